package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// newBearerRequest returns a request to u authenticated by the access token.
func newBearerRequest(ctx context.Context, method, u, accessToken string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+accessToken)
	return req, nil
}

// newFormRequest returns a POST of form to u.
func newFormRequest(ctx context.Context, u string, form url.Values) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

// newJSONRequest returns a request to u with body as JSON.
func newJSONRequest(ctx context.Context, method, u string, body any) (*http.Request, error) {
	doc, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// tokenAnswer is the JSON answer of a token endpoint (RFC 6749, section 5.1), for the
// providers whose answers x/oauth2 cannot read.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
}

// token returns the answer as a Token, or an error when it has no access token.
func (a tokenAnswer) token() (*Token, error) {
	if a.AccessToken == "" {
		return nil, errors.New("token request: the answer has no access token")
	}
	t := &Token{AccessToken: a.AccessToken, RefreshToken: a.RefreshToken, TokenType: "Bearer", Scopes: scopeList(a.Scope)}
	if a.ExpiresIn > 0 {
		t.Expiry = time.Now().Add(time.Duration(a.ExpiresIn) * time.Second)
	}
	return t, nil
}

// tokenRequest sends req, a token request of grant, and decodes the answer into answer. A
// refresh the provider refuses is ErrReconnect.
func (p *Provider) tokenRequest(req *http.Request, grant string, answer any) error {
	err := p.doJSON(req, answer)
	var pe *providerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe) && refusal(pe.status) && grant == "refresh_token":
		return fmt.Errorf("%w: %v", ErrReconnect, err)
	}
	return fmt.Errorf("token request: %w", err)
}

// doJSON sends req and decodes a 2xx JSON answer into v. Errors name the status, never a
// token.
func (p *Provider) doJSON(req *http.Request, v any) error {
	resp, err := p.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Host, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &providerError{status: resp.StatusCode, host: req.URL.Host, body: body}
	}
	// Numbers stay as they were sent: an account ID beyond 2^53 must not be rounded.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s %s: not JSON: %w", req.Method, req.URL.Host, err)
	}
	return nil
}

// providerError is a non-2xx answer of a provider.
type providerError struct {
	status int
	host   string
	body   []byte
}

func (e *providerError) Error() string {
	var oe struct {
		Error string `json:"error"`
	}
	json.Unmarshal(e.body, &oe)
	if oe.Error != "" {
		return fmt.Sprintf("%s answered %d (%s)", e.host, e.status, oe.Error)
	}
	return fmt.Sprintf("%s answered %d", e.host, e.status)
}

// do sends req. Its error names the method and host, never the URL (which may carry a
// token in its query).
func (p *Provider) do(req *http.Request) (*http.Response, error) {
	resp, err := p.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Host, err)
	}
	return resp, nil
}

// send sends req and wants a 2xx answer.
func (p *Provider) send(req *http.Request) error {
	resp, err := p.do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s answered %d", req.Method, req.URL.Host, resp.StatusCode)
	}
	return nil
}
