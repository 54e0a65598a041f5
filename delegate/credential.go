package delegate

import (
	"context"
	"net/http"
)

// Credential is the handle on a credential that urlflow holds for the tool's user: the
// tool uses it through Call, and never sees it.
type Credential struct {
	c         *Client
	need      Need
	userToken string
}

func (c *Client) credential(need Need, token string) *Credential {
	return &Credential{c: c, need: need, userToken: token}
}

// Request is a request to the API of the credential's slot or provider (its base URL,
// methods and how the credential is injected are urlflow's configuration).
type Request struct {
	// Method is the HTTP method; Path is under the API's base URL and cannot leave it.
	Method, Path string
	Query        map[string]string
	Body         string
}

// Response is the API's answer, as urlflow passes it on: the credential redacted from it.
type Response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// BodyEncoding is "text", or "base64" for a body that is not text.
	BodyEncoding string `json:"bodyEncoding"`
}

// Call makes req to the API with the credential injected by urlflow. A request that
// urlflow refuses is an *APIError; its Reason "not_stored", "locked", "reconnect" or
// "unopenable" means that the user must provide the credential again (Require).
func (cr *Credential) Call(ctx context.Context, req Request) (*Response, error) {
	body := map[string]any{"method": req.Method, "path": req.Path}
	if cr.need.Slot != "" {
		body["slot"] = cr.need.Slot
	} else {
		body["provider"] = cr.need.Provider
	}
	if len(req.Query) > 0 {
		body["query"] = req.Query
	}
	if req.Body != "" {
		body["body"] = req.Body
	}
	var resp Response
	if _, err := cr.c.do(ctx, http.MethodPost, "proxy", cr.userToken, body, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
