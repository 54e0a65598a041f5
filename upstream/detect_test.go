package upstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
)

func TestARequestThatCarriesTheSecretIsRefusedBeforeSending(t *testing.T) {
	caller := newCaller(t)
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL + "/v1", Methods: []string{"GET", "POST"},
		Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"}}, nil)
	// testSecret has "/" and " ": a path cannot carry it unescaped, so the path cases use a
	// secret that fits in a segment.
	const plain = "k3yK3yk3YxQ7mZp9"
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name   string
		secret string
		req    Request
		where  string
	}{
		{"in the path", plain, Request{Method: "GET", Path: "/users/" + plain}, "path"},
		{"percent-encoded in the path", plain, Request{Method: "GET", Path: "/users/%6B3yK3yk3YxQ7mZp9"}, "path"},
		{"as a query value", testSecret, Request{Method: "GET", Path: "/x", Query: url.Values{"q": {testSecret}}}, "query"},
		{"inside a query value", testSecret, Request{Method: "GET", Path: "/x", Query: url.Values{"q": {"a" + testSecret + "b"}}}, "query"},
		{"percent-encoded in a query value", testSecret, Request{Method: "GET", Path: "/x", Query: url.Values{"q": {url.QueryEscape(testSecret)}}}, "query"},
		{"as a query name", testSecret, Request{Method: "GET", Path: "/x", Query: url.Values{testSecret: {"1"}}}, "query"},
		{"in a text body", testSecret, Request{Method: "POST", Path: "/x", Body: "guess: " + testSecret}, "body"},
		{"in a form body", testSecret, Request{Method: "POST", Path: "/x", Body: "a=1&k=" + url.QueryEscape(testSecret)}, "body"},
		{"JSON-escaped in a body", testSecret, Request{Method: "POST", Path: "/x", Body: `{"k":"s3cr3t\/tok\u002ben= x\u0026y"}`}, "body"},
		{"base64 in a body", testSecret, Request{Method: "POST", Path: "/x", Body: `{"k":"` + b64([]byte(testSecret)) + `"}`}, "body"},
		{"as a JSON number", "4711471147114711", Request{Method: "POST", Path: "/x", Body: `{"guesses":[1,2,4711471147114711]}`}, "body"},
		{"as a JSON key", testSecret, Request{Method: "POST", Path: "/x", Body: `{"` + testSecret + `":1}`}, "body"},
		{"among many guesses", "4711", Request{Method: "POST", Path: "/x", Body: guesses()}, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := caller.Call(context.Background(), slot.API, state.NewSecret(tt.secret), tt.req)
			var refused *SecretInRequestError
			if !errors.As(err, &refused) || !errors.Is(err, ErrSecretInRequest) || refused.Where != tt.where {
				t.Fatalf("Call = %+v, %v; want a refusal naming the %s", resp, err, tt.where)
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
	if got := api.received(); len(got) != 0 {
		t.Fatalf("the API received %q; a request carrying the secret must not be sent", api.paths())
	}

	// What carries no form of the secret goes out.
	for _, req := range []Request{
		{Method: "GET", Path: "/users/k3yK3yk3YxQ7mZp", Query: url.Values{"q": {"s3cr3t/tok"}}},
		{Method: "POST", Path: "/x", Body: `{"k":"s3cr3t/tok+en= x&z","n":47114711471147}`},
	} {
		if _, err := caller.Call(context.Background(), slot.API, state.NewSecret(testSecret), req); err != nil {
			t.Errorf("Call(%+v): %v", req, err)
		}
	}
	if got := api.received(); len(got) != 2 {
		t.Fatalf("the API received %q; want the two requests without the secret", api.paths())
	}
}

// guesses is a JSON body with every 4-digit PIN: the attack that a redacted echo answers.
func guesses() string {
	var b strings.Builder
	b.WriteString(`{"pins":[`)
	for i := range 10000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%04d"`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}
