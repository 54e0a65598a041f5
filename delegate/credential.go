package delegate

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Credential is the handle on a credential that urlflow holds for the tool's user: the
// tool uses it through Call, and never sees it.
type Credential struct {
	c         *Client
	need      Need
	userToken string
	// userRef names the user instead of userToken, for a credential of Client.Offline;
	// subject, for a server with assert_users.
	userRef, subject string
}

// Offline returns the handle on the credential of need (its Slot or Provider, and Label)
// that the user known to your server as userRef let it use while away (Need.Offline), for
// work your server does on its own: its Call names the user by reference alone. urlflow
// refuses it (an *APIError with Status 403 and Reason "not_offline") for a credential the
// user did not let your server use so, or no longer does.
func (c *Client) Offline(userRef string, need Need) *Credential {
	return &Credential{c: c, need: need, userRef: userRef}
}

func (c *Client) credential(need Need, token string) *Credential {
	return &Credential{c: c, need: need, userToken: token}
}

// Request is a request to the API of the credential's slot or provider (its base URL,
// methods and how the credential is injected are urlflow's configuration).
type Request struct {
	// Method is the HTTP method; Path is under the API's base URL and cannot leave it.
	Method, Path string
	// Query holds parameters of one value; QueryValues those of several (sent in order).
	// A parameter in both is sent with Query's value first.
	Query       map[string]string
	QueryValues url.Values
	// Header holds your own request headers: not the connection's, not the one urlflow
	// injects the credential in, and Authorization and Cookie only where urlflow's
	// configuration of the API allows them (docs/delegation.md).
	Header map[string]string
	// Body is sent as is, any bytes (in base64 on the way to urlflow when it is not
	// UTF-8), with ContentType (application/json or text/plain, by its content, when
	// empty).
	Body        string
	ContentType string
	// Retries (at most 3) has urlflow send a GET, HEAD, PUT or DELETE again when the API
	// answers 429, 502, 503 or 504, waiting what its Retry-After asks, within the API's
	// timeout; Response.Attempts then says how many times it was sent.
	Retries int
	// ResponseHeaders names the response headers to return besides those urlflow's
	// configuration of the API always returns: names, or prefixes ending in "*"
	// ("X-RateLimit-*"), within the API's allow_response_headers.
	ResponseHeaders []string
}

// Response is the API's answer, as urlflow passes it on: the credential redacted from it.
type Response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// BodyEncoding is "text", or "base64" for a body that is not text.
	BodyEncoding string `json:"bodyEncoding"`
	// Attempts is how many times urlflow sent the request (Request.Retries), 0 for once.
	Attempts int `json:"attempts"`
}

// Call makes req to the API with the credential injected by urlflow. A request that
// urlflow refuses is an *APIError; its Reason "not_stored", "locked", "reconnect",
// "unopenable" or "incomplete" means that the user must provide the credential again
// (Require).
func (cr *Credential) Call(ctx context.Context, req Request) (*Response, error) {
	body := cr.named()
	body["method"], body["path"] = req.Method, req.Path
	if query := queryOf(req); len(query) > 0 {
		body["query"] = query
	}
	if len(req.Header) > 0 {
		body["headers"] = req.Header
	}
	if req.ContentType != "" {
		body["contentType"] = req.ContentType
	}
	if req.Retries > 0 {
		body["retries"] = req.Retries
	}
	if len(req.ResponseHeaders) > 0 {
		body["responseHeaders"] = req.ResponseHeaders
	}
	switch {
	case req.Body == "":
	case utf8.ValidString(req.Body):
		body["body"] = req.Body
	default:
		body["body"], body["bodyEncoding"] = base64.StdEncoding.EncodeToString([]byte(req.Body)), "base64"
	}
	var resp Response
	if _, err := cr.c.do(ctx, http.MethodPost, "proxy", cr.userToken, body, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// queryOf is the query of req as the proxy request takes it: a parameter of one value as a
// string (which every urlflow reads), one of several as the list of its values, Query's
// first.
func queryOf(req Request) map[string]any {
	values := url.Values{}
	for k, v := range req.Query {
		values[k] = []string{v}
	}
	for k, vs := range req.QueryValues {
		values[k] = append(values[k], vs...)
	}
	query := make(map[string]any, len(values))
	for k, vs := range values {
		if len(vs) == 1 {
			query[k] = vs[0]
		} else {
			query[k] = vs
		}
	}
	return query
}

// Released is the credential itself, which urlflow gives a server whose configuration has
// release: a slot's secret (with what the user entered for its slot's address), or a
// provider's access token, fresh enough to use (never its refresh token). Protect it as
// urlflow does.
type Released struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Label  string `json:"label"`
	// UserRef is the reference your server knows the user by.
	UserRef string `json:"userRef"`
	// Secret and Parameters are a slot's.
	Secret     string            `json:"secret"`
	Parameters map[string]string `json:"parameters"`
	// AccessToken, TokenType, ExpiresAt and Scopes are a provider's.
	AccessToken string    `json:"accessToken"`
	TokenType   string    `json:"tokenType"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Scopes      []string  `json:"scopes"`
}

// Release asks urlflow for the credential itself (POST /api/v1/release), which only a
// server whose configuration has release may receive, and only for a credential the user
// provided on pages that said so; every release is in the user's audit trail. A refusal is
// an *APIError: 403 without release, 409 with Reason "not_releasable" (provided before),
// or one of Call's reasons.
func (cr *Credential) Release(ctx context.Context) (*Released, error) {
	var out Released
	if _, err := cr.c.do(ctx, http.MethodPost, "release", cr.userToken, cr.named(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// named is the body that names the credential: its slot or provider, its label, and the
// user's reference or subject where they name the user (the user's token goes in a header).
func (cr *Credential) named() map[string]any {
	body := map[string]any{}
	if cr.need.Slot != "" {
		body["slot"] = cr.need.Slot
	} else {
		body["provider"] = cr.need.Provider
	}
	if cr.need.Label != "" {
		body["label"] = cr.need.Label
	}
	if cr.userRef != "" {
		body["userRef"] = cr.userRef
	}
	if cr.subject != "" {
		body["user"] = cr.subject
	}
	return body
}
