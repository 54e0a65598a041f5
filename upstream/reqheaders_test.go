package upstream

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// A delegating service's own request: its headers, less those it may not set; a parameter
// repeated; a body of any bytes and type, up to the API's limit; the secret in none of them.
func TestARequestSendsItsOwnHeadersRepeatedParametersAndBinaryBodies(t *testing.T) {
	caller := newCaller(t)
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL, Methods: []string{"POST"}, Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"},
		MaxRequestBytes: 64}, nil)
	binary := "\x00\x01\xfe\xffPNG"
	req := Request{Method: "POST", Path: "upload", Query: url.Values{"tag": {"a", "b"}, "one": {"1"}},
		Header: map[string]string{"X-Request-Id": "r-42", "Accept": "application/vnd.acme+json", "If-Match": `"v3"`},
		Body:   binary, ContentType: "image/png"}
	if _, err := caller.Call(context.Background(), slot.API, secret(), req); err != nil {
		t.Fatalf("Call: %v", err)
	}
	got := api.received()[0]
	r := got.req
	if r.Header.Get("X-Request-Id") != "r-42" || r.Header.Get("Accept") != "application/vnd.acme+json" || r.Header.Get("If-Match") != `"v3"` ||
		r.Header.Get("Authorization") != "Bearer "+testSecret || r.Header.Get("Content-Type") != "image/png" {
		t.Errorf("headers %v", r.Header)
	}
	if !slices.Equal(r.URL.Query()["tag"], []string{"a", "b"}) || r.URL.Query().Get("one") != "1" {
		t.Errorf("query %q", r.URL.RawQuery)
	}
	if got.body != binary {
		t.Errorf("body %q, want %q", got.body, binary)
	}

	for name, want := range map[string]string{
		"Host":                "belongs to the connection",
		"connection":          "belongs to the connection",
		"Transfer-Encoding":   "belongs to the connection",
		"Accept-Encoding":     "set by urlflow",
		"Authorization":       "carries the credential",
		"Cookie":              "api.allow_request_headers",
		"Sec-Fetch-Site":      "a browser's header",
		"Bad Name":            "not a token",
		"X-Split\r\nInjected": "not a token",
	} {
		bad := req
		bad.Header = map[string]string{name: "x"}
		_, err := caller.Call(context.Background(), slot.API, secret(), bad)
		if !errors.Is(err, ErrRequestHeader) || !strings.Contains(err.Error(), want) {
			t.Errorf("header %q: %v, want ErrRequestHeader that says %q", name, err, want)
		}
	}
	crlf := req
	crlf.Header = map[string]string{"X-Note": "a\r\nX-Evil: 1"}
	if _, err := caller.Call(context.Background(), slot.API, secret(), crlf); !errors.Is(err, ErrRequestHeader) || strings.Contains(err.Error(), "Evil") {
		t.Errorf("a value with a line break: %v", err)
	}
	// A secret as a header name is not a token: refused, and never quoted back.
	asName := req
	asName.Header = map[string]string{testSecret: "1"}
	if _, err := caller.Call(context.Background(), slot.API, secret(), asName); !errors.Is(err, ErrRequestHeader) || strings.Contains(err.Error(), testSecret) {
		t.Errorf("the secret as a header name: %v", err)
	}
	for _, where := range []map[string]string{{"X-Token": testSecret}, {"X-Token": "Bearer " + url.QueryEscape(testSecret)}} {
		carrying := req
		carrying.Header = where
		var in *SecretInRequestError
		if _, err := caller.Call(context.Background(), slot.API, secret(), carrying); !errors.As(err, &in) || in.Where != "headers" {
			t.Errorf("the secret in a header: %v", err)
		}
	}
	large := req
	large.Body = strings.Repeat("x", 65)
	if _, err := caller.Call(context.Background(), slot.API, secret(), large); !errors.Is(err, ErrRequestTooLarge) {
		t.Errorf("a body over max_request_bytes: %v", err)
	}
	if n := len(api.received()); n != 1 {
		t.Errorf("%d requests reached the API, want only the first", n)
	}

	cookies := newSlot(t, API{BaseURL: api.URL, Methods: []string{"POST"}, Inject: Injection{Header: "X-Api-Key"},
		AllowRequestHeaders: []string{"cookie", "Authorization"}}, nil)
	withCookie := req
	withCookie.Header = map[string]string{"Cookie": "session=1", "Authorization": "Basic dTpw"}
	if _, err := caller.Call(context.Background(), cookies.API, secret(), withCookie); err != nil {
		t.Fatalf("allowed headers refused: %v", err)
	}
	if r := api.received()[1].req; r.Header.Get("Cookie") != "session=1" || r.Header.Get("X-Api-Key") != testSecret {
		t.Errorf("allowed headers: %v", r.Header)
	}
}

func TestTheHeadersAConfigurationMayAllowAndTheRequestLimit(t *testing.T) {
	for _, tc := range []struct {
		api  API
		want string
	}{
		{API{BaseURL: "https://api.example", Inject: Injection{Header: "X-Key"}, AllowRequestHeaders: []string{"Host"}}, "Host is never"},
		{API{BaseURL: "https://api.example", Inject: Injection{Header: "X-Key"}, AllowRequestHeaders: []string{"x-key"}}, "x-key is never"},
		{API{BaseURL: "https://api.example", Inject: Injection{Header: "X-Key"}, MaxRequestBytes: MaxRequestBytes + 1}, "api.max_request_bytes"},
	} {
		problems := tc.api.Prepare("")
		if len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
			t.Errorf("%+v: %v, want a problem that says %q", tc.api, problems, tc.want)
		}
	}
	ok := API{BaseURL: "https://api.example", Inject: Injection{Header: "X-Key"}}
	if problems := ok.Prepare(""); len(problems) != 0 || ok.MaxRequestBytes != DefaultMaxRequestBytes {
		t.Errorf("defaults: %v %d", problems, ok.MaxRequestBytes)
	}
}
