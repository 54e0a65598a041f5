package upstream

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkRedact measures the work call_api adds to an answer of the default largest size
// (1 MiB) to find and replace every form of the secret: in a body of JSON, whose string
// tokens with escapes are decoded one by one, and in plain text.
func BenchmarkRedact(b *testing.B) {
	api := newSlot(b, API{BaseURL: "https://api.example", Inject: Injection{Basic: &BasicAuth{Username: "user", Password: "{secret}"}}}, nil).API
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
	record := `{"id":12345,"name":"h\u00e9llo w\u00f6rld \/ + = &amp; %2F","ok":true},`
	bodies := map[string]string{
		"json": "[" + strings.Repeat(record, DefaultMaxResponseBytes/len(record)) + "1]",
		"text": strings.Repeat("héllo wörld / + = &amp; %2F 12345 ", DefaultMaxResponseBytes/36),
	}
	for _, name := range []string{"json", "text"} {
		body := []byte(bodies[name])
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				newRedactor(api, secret()).redact(api, nil, resp, body)
			}
		})
	}
}

// BenchmarkCheckRequest measures looking for the secret in a request before it is sent: a
// JSON body of 64 KiB.
func BenchmarkCheckRequest(b *testing.B) {
	api := newSlot(b, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"}}, nil).API
	body := "[" + strings.Repeat(`{"id":12345,"name":"h\u00e9llo \/ x"},`, 64<<10/36) + "1]"
	req := Request{Method: "POST", Path: "/items", Query: url.Values{"page": {"2"}}, Body: body}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := newRedactor(api, secret()).checkRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}
