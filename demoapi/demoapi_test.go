package demoapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOnlyValidDemoKeysGetIn(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for key, want := range map[string]int{
		"demo_0123456789abcdef":  http.StatusOK,
		"demo_0123456789ABCDEFx": http.StatusOK,
		"demo_short":             http.StatusUnauthorized,
		"demo_0123456789abcde!":  http.StatusUnauthorized,
		"":                       http.StatusUnauthorized,
		"xdemo_0123456789abcdef": http.StatusUnauthorized,
		"demo_revoked0123456789": http.StatusUnauthorized,
	} {
		resp, body := get(t, srv.URL+Prefix+"/whoami", key)
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
		if Revoked(key) && body["error"] != "this demo key is revoked" {
			t.Errorf("key %q: error %q, want it to say the key is revoked", key, body["error"])
		}
		if want == http.StatusOK && (body["account"] != Account(key) || strings.Contains(body["account"], key)) {
			t.Errorf("key %q: account %q", key, body["account"])
		}
	}
}

func TestEchoShowsTheRequestAsTheAPISawIt(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Prefix+"/echo?x=1", strings.NewReader(`{"a":1}`))
	req.Header.Set("Authorization", "Bearer demo_0123456789abcdef")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Method, Path, Body string
		Headers            map[string]string
		Query              map[string][]string
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if body.Method != "POST" || body.Path != Prefix+"/echo" || body.Body != `{"a":1}` || body.Query["x"][0] != "1" ||
		body.Headers["Authorization"] != "Bearer demo_0123456789abcdef" {
		t.Fatalf("echo: %+v", body)
	}
}

func TestAWorkspaceAnswersUnlessItIsMissing(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for workspace, want := range map[string]int{"acme": http.StatusOK, "missing-acme": http.StatusNotFound} {
		resp, body := get(t, srv.URL+Prefix+"/workspaces/"+workspace+"/whoami", "demo_0123456789abcdef")
		if resp.StatusCode != want || want == http.StatusOK && body["workspace"] != workspace {
			t.Errorf("workspace %q: %d %v, want %d", workspace, resp.StatusCode, body, want)
		}
	}
}

// get sends GET url with key as a bearer key (none when empty) and decodes the answer.
func get(t *testing.T, url, key string) (*http.Response, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	return resp, body
}
