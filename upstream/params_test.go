package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// tenantAPI is an API whose host holds the user's tenant, under api.test, on port.
func tenantAPI(t *testing.T, port string) *API {
	t.Helper()
	api := &API{BaseURL: "http://{tenant}.api.test:" + port + "/v1/{space}", Inject: Injection{Header: "Authorization"},
		Parameters: []Parameter{
			{Name: "tenant", Label: "Acme subdomain", Pattern: "[a-z0-9-]{3,20}", PatternHint: "Lower-case letters, digits and hyphens."},
			{Name: "space", Label: "Acme space", Pattern: "[A-Za-z0-9_.~-]+"},
		}}
	if problems := api.Prepare(""); len(problems) > 0 {
		t.Fatalf("the test API is invalid: %v", problems)
	}
	return api
}

// loopbackCaller is a Caller whose transport dials addr whatever the host.
func loopbackCaller(t *testing.T, addr string) *Caller {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return New(tr)
}

func TestATemplatedBaseURLIsCheckedAtStart(t *testing.T) {
	param := func(name string) Parameter { return Parameter{Name: name, Label: "L", Pattern: "[a-z]+"} }
	for _, tc := range []struct {
		base   string
		params []Parameter
		want   string
	}{
		{"https://{tenant}.acme.example", nil, "{tenant} is not one of api.parameters"},
		{"https://acme.example/{a}", []Parameter{param("a"), param("b")}, "{b} is not in api.base_url"},
		{"https://{a}.example", []Parameter{param("a")}, "last two labels"},
		{"https://acme.{a}", []Parameter{param("a")}, "last two labels"},
		{"https://x.acme.{a}.example", []Parameter{param("a")}, "last two labels"},
		{"https://x.{a}.acme.example", []Parameter{param("a")}, ""},
		{"https://x.acme.example.{a}", []Parameter{param("a")}, "last two labels"},
		{"https://acme.example:{a}", []Parameter{param("a")}, "absolute http(s) URL"},
		{"{a}://acme.example", []Parameter{param("a")}, "absolute http(s) URL"},
		{"https://{a}.acme.example/{a}", []Parameter{param("a")}, "the host and the path"},
		{"https://acme.example/{A}", []Parameter{{Name: "A", Label: "L", Pattern: "x"}}, "must match [a-z]"},
		{"https://acme.example/{a}", []Parameter{{Name: "a", Label: "L"}}, "pattern is required"},
		{"https://acme.example/{a}", []Parameter{{Name: "a", Pattern: "x"}}, "label is required"},
		{"https://acme.example/{a}", []Parameter{{Name: "a", Label: "L", Pattern: "("}}, "does not compile"},
		{"https://acme.example/{a}/{a}", []Parameter{param("a"), param("a")}, "defined twice"},
		{"https://acme.example/{a}}", []Parameter{param("a")}, "a { or }"},
		{"https://acme.example/{a}?x=1", []Parameter{param("a")}, "cannot have a query"},
		{"https://{a}.acme.example/v1/{b}", []Parameter{param("a"), param("b")}, ""},
	} {
		api := API{BaseURL: tc.base, Inject: Injection{Header: "Authorization"}, Parameters: tc.params}
		problems := strings.Join(api.Prepare(""), "; ")
		if tc.want == "" && problems != "" || !strings.Contains(problems, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.base, problems, tc.want)
		}
	}
}

func TestBindMakesTheBaseURLOfValuesThatStayInIt(t *testing.T) {
	api := tenantAPI(t, "8443")
	bound, err := api.Bind(map[string]string{"tenant": "acme-eu", "space": "team.one"})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if got := bound.Base().String(); got != "http://acme-eu.api.test:8443/v1/team.one" {
		t.Errorf("bound base %s", got)
	}
	if api.Base().Host == bound.Base().Host {
		t.Error("Bind changed the API it was called on")
	}
	for _, values := range []map[string]string{
		{"tenant": "acme"}, // a value missing
		{"tenant": "acme", "space": "s", "other": "x"}, // a value of no parameter
		{"tenant": "ac", "space": "s"},                 // too short for the pattern
		{"tenant": "evil.example#", "space": "s"},      // leaves the domain
		{"tenant": "evil.example.com.", "space": "s"},  //
		{"tenant": "acme", "space": ".."},              // climbs out of the path
		{"tenant": "acme", "space": "a/b"},             // two segments
		{"tenant": "acme", "space": "a%2fb"},           // an encoded slash
		{"tenant": "acme@evil", "space": "s"},          // user info
		{"tenant": "ACME:1", "space": "s"},             // a port
		{"tenant": "", "space": "s"},                   //
		{"tenant": "-acme", "space": "s"},              // not a DNS label
	} {
		_, err := api.Bind(values)
		if !errors.Is(err, ErrParameters) {
			t.Errorf("Bind(%q): %v, want ErrParameters", values, err)
			continue
		}
		for name, v := range values {
			if len(v) > 2 && strings.Contains(err.Error(), v) {
				t.Errorf("Bind(%q): the error quotes the value of %s: %v", values, name, err)
			}
		}
	}
	plain := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}}, nil).API
	if same, err := plain.Bind(map[string]string{"stale": "x"}); err != nil || same != plain {
		t.Errorf("an API without parameters: %v %v, want it as it is", same, err)
	}
}

func TestATemplateIsCalledOnlyBoundAndConfinedToItsValues(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/s/leave" {
			// Another tenant of the same domain: not the user's.
			http.Redirect(w, r, "http://other.api.test"+r.Host[strings.Index(r.Host, ":"):]+"/v1/s/x", http.StatusFound)
			return
		}
		w.Write([]byte(r.Host))
	})
	_, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	template := tenantAPI(t, port)
	caller := loopbackCaller(t, api.Listener.Addr().String())

	if _, err := caller.Call(t.Context(), template, secret(), Request{Method: "GET", Path: "x"}); !errors.Is(err, errUnbound) {
		t.Fatalf("a call to the template: %v, want errUnbound", err)
	}
	if err := caller.Check(t.Context(), template, &Verify{Method: "GET", Path: "x", Status: []int{200}}, secret()); !errors.Is(err, errUnbound) {
		t.Fatalf("a check with the template: %v, want errUnbound", err)
	}
	if n := len(api.received()); n != 0 {
		t.Fatalf("the API got %d requests before Bind", n)
	}
	bound, err := template.Bind(map[string]string{"tenant": "acme", "space": "s"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := caller.Call(t.Context(), bound, secret(), Request{Method: "GET", Path: "x"})
	if err != nil || resp.Body != "acme.api.test:"+port {
		t.Fatalf("Call: %+v %v, want the tenant's host", resp, err)
	}
	if got := api.received()[0].req.URL.Path; got != "/v1/s/x" {
		t.Errorf("the API was asked for %s", got)
	}
	resp, err = caller.Call(t.Context(), bound, secret(), Request{Method: "GET", Path: "leave"})
	if err != nil || resp.Status != http.StatusFound || !strings.HasPrefix(resp.Redirected, "http://other.api.test") {
		t.Errorf("a redirect to another tenant: %+v %v, want it returned unfollowed", resp, err)
	}
	if n := len(api.received()); n != 2 {
		t.Errorf("the API got %d requests, want 2", n)
	}
}

// A value of a parameter is never enough to leave the domain, whatever the pattern
// allows: Bind refuses it, or the bound base URL is under the domain the template names.
func FuzzBindStaysInTheDomain(f *testing.F) {
	for _, seed := range []string{"acme", "evil.example#", "a/../b", "x@y", "%2e%2e", "a b", "xn--80ak6aa92e"} {
		f.Add(seed, "s")
	}
	f.Fuzz(func(t *testing.T, tenant, space string) {
		api := &API{BaseURL: "https://{tenant}.api.test/v1/{space}", Inject: Injection{Header: "Authorization"},
			Parameters: []Parameter{{Name: "tenant", Label: "T", Pattern: "(?s).*"}, {Name: "space", Label: "S", Pattern: "(?s).*"}}}
		if problems := api.Prepare(""); len(problems) > 0 {
			t.Fatal(problems)
		}
		bound, err := api.Bind(map[string]string{"tenant": tenant, "space": space})
		if err != nil {
			return
		}
		base := bound.Base()
		host, rest, _ := strings.Cut(base.Host, ".")
		if base.Scheme != "https" || rest != "api.test" || host != tenant || base.User != nil {
			t.Errorf("%q %q made %s", tenant, space, base)
		}
		if base.EscapedPath() != "/v1/"+space || base.RawQuery != "" || base.Fragment != "" {
			t.Errorf("%q %q made the path %q", tenant, space, base.EscapedPath())
		}
	})
}
