package delegate

import (
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func TestAServerAuthenticatesWithItsKeyOrItsClientsToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"key", Options{URL: "https://urlflow.example", Key: "urlflow_sk_K"}, "Bearer urlflow_sk_K"},
		{"client credentials", Options{URL: "https://urlflow.example", TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "at-1"})}, "Bearer at-1"},
	} {
		c, err := New(tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		req, _ := http.NewRequest(http.MethodGet, "https://urlflow.example/api/v1/events", nil)
		if err := c.authorize(req); err != nil || req.Header.Get("Authorization") != tc.want {
			t.Errorf("%s: Authorization %q, %v", tc.name, req.Header.Get("Authorization"), err)
		}
	}
	for _, bad := range []Options{
		{URL: "https://urlflow.example"},
		{URL: "https://urlflow.example", Key: "not-a-key"},
		{URL: "https://urlflow.example", Key: "urlflow_sk_K", TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "x"})},
		{URL: "urlflow.example", Key: "urlflow_sk_K"},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}

func TestOptionsLeftZeroTakeTheirDocumentedDefaults(t *testing.T) {
	c, err := New(Options{URL: "https://urlflow.example", Key: "urlflow_sk_K"})
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.Style != StylePush || c.opts.PushWait != 50*time.Second || c.opts.RetryWait != 25*time.Second ||
		c.opts.ProgressInterval != 15*time.Second || c.opts.ProgressWaitLimit != 10*time.Minute ||
		c.opts.HTTPClient != http.DefaultClient || c.log != slog.Default() || c.opts.RateLimitRetries != 2 {
		t.Errorf("defaults: %+v", c.opts)
	}
	set := Options{URL: "https://urlflow.example", Key: "urlflow_sk_K", Style: StyleError, PushWait: time.Second, RetryWait: 2 * time.Second,
		ProgressInterval: 3 * time.Second, ProgressWaitLimit: 4 * time.Second, HTTPClient: &http.Client{}, Logger: slog.New(slog.DiscardHandler),
		RateLimitRetries: -1}
	if c, err = New(set); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.opts, set) || c.log != set.Logger { // equal funcs: both nil
		t.Errorf("options set: %+v, want %+v", c.opts, set)
	}
}
