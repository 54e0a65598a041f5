package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/web/respond"
)

// proxyRequest is the body of POST /api/v1/proxy: the request to make, as call_api takes
// it, and whose credential to use.
type proxyRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// Label is the account label among several credentials of the target ("" for the
	// default account).
	Label string `json:"label"`

	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  queryParams `json:"query"`
	// Headers are the service's own request headers (upstream.CheckOwnParts says which).
	Headers map[string]string `json:"headers"`
	// Body is text, or base64 when BodyEncoding is "base64" (binary); ContentType is sent
	// with it (detected from the body when empty).
	Body         string `json:"body"`
	BodyEncoding string `json:"bodyEncoding"`
	ContentType  string `json:"contentType"`
	// Retries is upstream.Request.Retries.
	Retries int `json:"retries"`
	// ResponseHeaders is upstream.Request.ResponseHeaders.
	ResponseHeaders []string `json:"responseHeaders"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
	// UserRef names the user by the service's reference alone, for a credential the user
	// let the service use while away (offline).
	UserRef string `json:"userRef"`
}

// queryParams are a proxy request's query parameters: each a string, or a list of strings
// for a parameter repeated.
type queryParams url.Values

func (q *queryParams) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("query: want an object of strings, or of lists of strings")
	}
	*q = queryParams{}
	for k, v := range raw {
		var one string
		if err := json.Unmarshal(v, &one); err == nil {
			(*q)[k] = []string{one}
			continue
		}
		var many []string
		if err := json.Unmarshal(v, &many); err != nil || len(many) == 0 {
			return errors.New("query: want each parameter a string, or a list of one or more strings")
		}
		(*q)[k] = many
	}
	return nil
}

// proxyBody is the body a proxy request sends, decoded from bodyEncoding.
func proxyBody(req proxyRequest) (string, error) {
	switch req.BodyEncoding {
	case "":
		return req.Body, nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return "", errors.New("body: not standard base64, as bodyEncoding says")
		}
		return string(b), nil
	}
	return "", errors.New(`bodyEncoding: want "base64", or leave it out for text`)
}

// Reasons of a proxy request refused for what is stored: the service asks the user first
// (POST /api/v1/elicitations, which replaces a locked or unusable credential).
const (
	reasonNotStored  = "not_stored" // nothing stored for this service
	reasonLocked     = "locked"     // a secret locked until its user enters it again
	reasonReconnect  = "reconnect"  // a connection the provider no longer honours
	reasonUnopenable = "unopenable" // a secret sealed under a retired key
	reasonIncomplete = "incomplete" // a secret stored without what its slot's base URL now takes
	reasonCarried    = "carried"    // the request carried the credential; nothing was sent
	// not_releasable: a release of a credential provided before the service had release
	reasonNotReleasable = "not_releasable"
)

// notStored refuses a request for a secret the user has not stored for the service.
func notStored(c echo.Context, t serviceTarget) error {
	return apiRefusal(c, http.StatusConflict, reasonNotStored, "the user has no "+t.label+" stored for this service: create an elicitation")
}

// apiProxy is POST /api/v1/proxy, for delegating services only: the request is made to
// the slot's or provider's API with the user's credential that the service holds
// injected, under call_api's rules (package proxy), and the answer is call_api's
// structured result: status, the configured headers, the body, redacted.
func (s *API) apiProxy(c echo.Context) error {
	var req proxyRequest
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider, &req.Label)
	if err != nil {
		return err
	}
	call, err := proxyCall(t, req)
	if err != nil {
		return err
	}
	user, byRef, err := s.serviceUser(c, svc, req.User, req.UserRef)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	use := proxy.Use{User: user, Name: t.credentialName(svc), Actor: state.ActorService,
		Via: "a proxy request of the service " + svc.Name}
	var resp *upstream.Response
	if t.slot == nil && !byRef {
		// A provider's connection is read by the Keeper, which says when there is none.
		if resp, err = s.proxy.Provider(ctx, use, t.provider, call); err != nil {
			return s.proxyRefusal(c, t, err)
		}
		return c.JSON(http.StatusOK, resp)
	}
	cred, err := s.opts.Credentials.Get(ctx, user, use.Name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return notStored(c, t)
	case err != nil:
		return err
	}
	if err := offlineAllowed(byRef, cred); err != nil {
		return err
	}
	if t.slot != nil {
		resp, _, err = s.proxy.Secret(ctx, use, t.slot, cred, call)
	} else {
		resp, err = s.proxy.Provider(ctx, use, t.provider, call)
	}
	if err != nil {
		return s.proxyRefusal(c, t, err)
	}
	return c.JSON(http.StatusOK, resp)
}

// proxyCall is the request req asks of t's API, checked as far as it can be before the
// user and the credential are read (proxy.Check).
func proxyCall(t serviceTarget, req proxyRequest) (upstream.Request, error) {
	api := (*upstream.API)(nil)
	if t.slot != nil {
		api = t.slot.API
	} else {
		api = t.provider.API
	}
	var call upstream.Request
	if api == nil {
		return call, respond.Refuse(http.StatusBadRequest, "urlflow has no API configured for the %s %s", kindNoun(t.kind), t.name)
	}
	if req.Path == "" {
		return call, respond.Refuse(http.StatusBadRequest, `path is required: the API path to call ("/" for the API's base URL)`)
	}
	body, err := proxyBody(req)
	if err != nil {
		return call, respond.Refuse(http.StatusBadRequest, "%v", err)
	}
	if strings.ContainsAny(req.ContentType, "\r\n") {
		return call, respond.Refuse(http.StatusBadRequest, "contentType: one line")
	}
	if req.Retries < 0 || req.Retries > upstream.MaxRetries {
		return call, respond.Refuse(http.StatusBadRequest, "retries: want 0 to %d", upstream.MaxRetries)
	}
	call = upstream.Request{Method: req.Method, Path: req.Path, Query: url.Values(req.Query), Header: req.Headers,
		Body: body, ContentType: req.ContentType, Retries: req.Retries, ResponseHeaders: req.ResponseHeaders}
	switch err := proxy.Check(api, call); {
	case errors.Is(err, upstream.ErrRequestTooLarge):
		return call, respond.Refuse(http.StatusRequestEntityTooLarge, "%v (the API's max_request_bytes)", err)
	case err != nil:
		return call, respond.Refuse(http.StatusBadRequest, "%v", err)
	}
	return call, nil
}

// proxyRefusal answers a proxy request that failed with err.
func (s *API) proxyRefusal(c echo.Context, t serviceTarget, err error) error {
	var (
		locked  *proxy.LockedError
		carried *proxy.CarriedError
	)
	switch {
	case errors.As(err, &locked):
		return apiRefusal(c, http.StatusConflict, reasonLocked, fmt.Sprintf("the user's %s is locked (%s): create an elicitation to have it entered again", t.label, locked.Reason))
	case errors.Is(err, proxy.ErrUnopenable):
		return apiRefusal(c, http.StatusConflict, reasonUnopenable, "the stored "+t.label+" no longer opens (its key was retired): create an elicitation with replace")
	case errors.Is(err, proxy.ErrIncomplete):
		return apiRefusal(c, http.StatusConflict, reasonIncomplete, "the "+t.label+" was stored without what its API's base URL now takes ("+err.Error()+"): create an elicitation to have it entered again")
	case errors.As(err, &carried) && carried.Locked:
		return apiRefusal(c, http.StatusUnprocessableEntity, reasonCarried, "the request's "+carried.Where+" carries the credential, or a form of it, so urlflow sent nothing and locked the "+t.label+" until the user enters it again; never send it: urlflow adds it")
	case errors.As(err, &carried):
		return apiRefusal(c, http.StatusUnprocessableEntity, reasonCarried, "the request's "+carried.Where+" carries the credential, or a form of it, so urlflow sent nothing; never send it: urlflow adds it")
	case errors.Is(err, providers.ErrNotConnected):
		return apiRefusal(c, http.StatusConflict, reasonNotStored, "the user has no "+t.label+" connected for this service: create an elicitation")
	case errors.Is(err, providers.ErrReconnect):
		return apiRefusal(c, http.StatusConflict, reasonReconnect, "the provider no longer honours the user's connection: create an elicitation to connect again")
	case errors.Is(err, proxy.ErrNoToken):
		s.log.ErrorContext(c.Request().Context(), "connection tokens unusable", "credential", t.name, "err", err)
		return respond.Refuse(http.StatusServiceUnavailable, "urlflow could not get a working token right now; nothing was changed, try again in a moment")
	}
	return respond.Refuse(http.StatusBadGateway, "the call failed: %v", err)
}
