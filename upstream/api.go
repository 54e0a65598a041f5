package upstream

import (
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults and bounds of a slot's API.
const (
	DefaultTimeout          = 10 * time.Second
	MaxTimeout              = 60 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	MaxResponseBytes        = 10 << 20
	DefaultMaxRequestBytes  = 1 << 20
	MaxRequestBytes         = 10 << 20
	// SecretPlaceholder stands for the secret in injection templates.
	SecretPlaceholder = "{secret}"
	// PublicURLPlaceholder in a base URL stands for urlflow's own public URL, so that a
	// configuration can point at urlflow's development demo API.
	PublicURLPlaceholder = "{public_url}"
)

// API says where and how urlflow uses a secret or an access token for a tool (call_api)
// and for checking a new secret: the base URL every call stays under, the methods allowed,
// and how the secret is put into a request. Secret slots and third-party providers each
// carry one, from the configuration file.
type API struct {
	// BaseURL is an absolute http(s) URL; no call can leave it.
	BaseURL string `yaml:"base_url"`
	// Methods are the HTTP methods allowed; GET if empty.
	Methods []string `yaml:"methods"`
	// Inject says where the secret goes.
	Inject Injection `yaml:"inject"`
	// Timeout bounds one call (DefaultTimeout if zero, at most MaxTimeout).
	Timeout time.Duration `yaml:"timeout"`
	// MaxResponseBytes bounds what Call returns: the body once decompressed and the
	// returned headers together, as the API sent them (before redaction), each header
	// counting the length of its name and value (DefaultMaxResponseBytes if zero, at most
	// MaxResponseBytes).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// ResponseHeaders are the response headers every call returns (Content-Type if empty).
	ResponseHeaders []string `yaml:"response_headers"`
	// AllowResponseHeaders are the further response headers a delegating service's request
	// may ask for: names, or prefixes of names ending in "*" ("X-RateLimit-*"). A prefix
	// never selects Set-Cookie; naming it does.
	AllowResponseHeaders []string `yaml:"allow_response_headers"`
	// MaxRequestBytes bounds the body of a request (DefaultMaxRequestBytes if zero, at most
	// MaxRequestBytes).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// AllowRequestHeaders names the headers that a request may set although urlflow
	// refuses them by default (RefusedRequestHeaders): Cookie, say. The injected header,
	// Host and the headers of the connection itself are never a request's to set.
	AllowRequestHeaders []string `yaml:"allow_request_headers"`
	// AllowNonASCIIPath lets paths hold characters beyond ASCII, as is or percent-encoded,
	// UTF-8 only; Resolve refuses them otherwise. Look-alikes of dots and slashes (U+2024,
	// U+FF0E, U+FF0F) then reach the API, which must not read them as such.
	AllowNonASCIIPath bool `yaml:"allow_non_ascii_path"`
	// TraceContext sends the W3C trace context (traceparent, tracestate) with each call,
	// when tracing is on (package tracing). Off by default: a trace ID tells a third party
	// which of its calls belong to one flow.
	TraceContext bool `yaml:"trace_context"`
	// Parameters are the parts of BaseURL, {name} in its host or its path, that the user
	// enters with the secret (params.go); secret slots only.
	Parameters []Parameter `yaml:"parameters"`

	// base is the base URL; for a template before Bind, with a marker for each parameter,
	// to check paths against (do refuses to send to it).
	base *url.URL
	// template is BaseURL with {public_url} resolved; bound is set by Bind.
	template string
	bound    bool
}

// Injection puts the secret into a request: exactly one of a header (with a template), a
// query parameter, or HTTP basic authentication.
type Injection struct {
	// Header names the header that carries Template, for example Authorization.
	Header string `yaml:"header"`
	// Template is the header's value with {secret} in it ("Bearer {secret}"); "{secret}"
	// if empty.
	Template string `yaml:"template"`
	// Query names the query parameter that carries the secret.
	Query string `yaml:"query"`
	// Basic sends HTTP basic authentication built from two templates.
	Basic *BasicAuth `yaml:"basic"`
}

// BasicAuth holds the username and password templates of basic authentication; either may
// hold {secret}.
type BasicAuth struct {
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Verify is the check a new secret must pass before urlflow stores it: a request to the
// API with the new secret (Caller.Check), and the statuses that mean "valid".
type Verify struct {
	// Method is GET if empty.
	Method string `yaml:"method"`
	// Path is relative to the API's base URL.
	Path string `yaml:"path"`
	// Status lists the statuses that mean valid; 200 if empty.
	Status []int `yaml:"status"`
}

// Clone returns a copy of a that shares nothing with it.
func (a API) Clone() *API {
	a.Methods = slices.Clone(a.Methods)
	a.ResponseHeaders = slices.Clone(a.ResponseHeaders)
	a.AllowResponseHeaders = slices.Clone(a.AllowResponseHeaders)
	a.AllowRequestHeaders = slices.Clone(a.AllowRequestHeaders)
	a.Parameters = slices.Clone(a.Parameters)
	if a.Inject.Basic != nil {
		basic := *a.Inject.Basic
		a.Inject.Basic = &basic
	}
	return &a
}

// Base returns the parsed base URL.
func (a *API) Base() *url.URL { return a.base }

// Allows reports whether method is allowed.
func (a *API) Allows(method string) bool { return slices.Contains(a.Methods, strings.ToUpper(method)) }

// Value returns a template with the secret in it.
func Value(template, secret string) string {
	return strings.ReplaceAll(template, SecretPlaceholder, secret)
}

// Prepare fills in v's defaults and returns every problem, each naming the key
// ("verify.status ...").
func (v *Verify) Prepare() []string {
	var problems []string
	if v.Method == "" {
		v.Method = http.MethodGet
	}
	v.Method = strings.ToUpper(v.Method)
	if len(v.Status) == 0 {
		v.Status = []int{http.StatusOK}
	}
	for _, st := range v.Status {
		if st < 100 || st > 599 {
			problems = append(problems, fmt.Sprintf("verify.status: %d is not an HTTP status", st))
		}
	}
	return problems
}

// Prepare checks a, fills in its defaults and resolves {public_url} in its base URL. It
// returns every problem, each naming the key ("api.base_url ...").
func (a *API) Prepare(publicURL string) []string {
	raw, problems := a.prepareTemplate(strings.ReplaceAll(a.BaseURL, PublicURLPlaceholder, strings.TrimRight(publicURL, "/")))
	u, err := url.Parse(raw)
	switch {
	case a.BaseURL == "":
		problems = append(problems, "api.base_url is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		problems = append(problems, fmt.Sprintf("api.base_url must be an absolute http(s) URL, got %q", a.BaseURL))
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		problems = append(problems, "api.base_url cannot have a query, a fragment or user info")
	default:
		problems = append(problems, a.checkTemplate(u)...)
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		a.base = u
	}
	if len(a.Methods) == 0 {
		a.Methods = []string{http.MethodGet}
	}
	for i, m := range a.Methods {
		a.Methods[i] = strings.ToUpper(m)
		switch a.Methods[i] {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			problems = append(problems, fmt.Sprintf("api.methods: %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", m))
		}
	}
	problems = append(problems, a.Inject.check()...)
	switch {
	case a.Timeout == 0:
		a.Timeout = DefaultTimeout
	case a.Timeout < 0 || a.Timeout > MaxTimeout:
		problems = append(problems, fmt.Sprintf("api.timeout must be between 0 and %s", MaxTimeout))
	}
	switch {
	case a.MaxResponseBytes == 0:
		a.MaxResponseBytes = DefaultMaxResponseBytes
	case a.MaxResponseBytes < 0 || a.MaxResponseBytes > MaxResponseBytes:
		problems = append(problems, fmt.Sprintf("api.max_response_bytes must be between 1 and %d", MaxResponseBytes))
	}
	switch {
	case a.MaxRequestBytes == 0:
		a.MaxRequestBytes = DefaultMaxRequestBytes
	case a.MaxRequestBytes < 0 || a.MaxRequestBytes > MaxRequestBytes:
		problems = append(problems, fmt.Sprintf("api.max_request_bytes must be between 1 and %d", MaxRequestBytes))
	}
	for i, h := range a.AllowRequestHeaders {
		a.AllowRequestHeaders[i] = textproto.CanonicalMIMEHeaderKey(h)
		if neverSet(a.AllowRequestHeaders[i]) || a.AllowRequestHeaders[i] == textproto.CanonicalMIMEHeaderKey(a.Inject.Header) {
			problems = append(problems, fmt.Sprintf("api.allow_request_headers: %s is never a request's to set (urlflow sets it, or it belongs to the connection)", h))
		}
	}
	return append(problems, a.prepareResponseHeaders()...)
}

func (in *Injection) check() []string {
	ways := 0
	for _, set := range []bool{in.Header != "", in.Query != "", in.Basic != nil} {
		if set {
			ways++
		}
	}
	var problems []string
	if ways != 1 {
		problems = append(problems, "api.inject needs exactly one of header, query or basic")
	}
	if in.Header != "" {
		if in.Template == "" {
			in.Template = SecretPlaceholder
		}
		if !strings.Contains(in.Template, SecretPlaceholder) {
			problems = append(problems, "api.inject.template must contain {secret}")
		}
		if strings.ContainsAny(in.Header, " :\r\n") {
			problems = append(problems, fmt.Sprintf("api.inject.header: %q is not a header name", in.Header))
		}
	}
	if in.Basic != nil && !strings.Contains(in.Basic.Username+in.Basic.Password, SecretPlaceholder) {
		problems = append(problems, "api.inject.basic: username or password must contain {secret}")
	}
	return problems
}
