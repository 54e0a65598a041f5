package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// BearerOptions configure RequireBearer.
type BearerOptions struct {
	// ResourceMetadataURL is named in every challenge (RFC 9728), so that a client can find
	// the authorization server to sign in with.
	ResourceMetadataURL string
	// Scopes must all be in a user's token. A service's client credentials token carries
	// the service's own scopes instead (ServiceKeys.ServiceOfClient).
	Scopes []string
	// Operators, when not nil, are accepted besides users' tokens. Only the recovery API
	// accepts them; an operator never reaches /mcp.
	Operators *Operators
	// Services, when not nil, recognises the keys of delegating services and the client
	// credentials tokens of their OAuth clients, accepted besides users' tokens. Only the
	// API accepts them. When nil (/mcp, where a session belongs to a user), every client
	// credentials token is refused as naming no user.
	Services ServiceKeys
	// BadTokens, when not nil, counts the tokens that do not verify per client address and
	// refuses to check more from an address over its limit. /mcp and the API share one.
	BadTokens *BadTokens
	// Refused, when not nil, is told of every token refused as not valid or without the
	// scopes, with why (never the token): the audit trail's refused identities.
	Refused func(r *http.Request, why string)
	// Logger receives why a token could not be checked; slog.Default() if nil.
	Logger *slog.Logger
}

// refused tells opts.Refused of a refused token.
func (opts BearerOptions) refused(r *http.Request, why string) {
	if opts.Refused != nil {
		opts.Refused(r, why)
	}
}

// ServiceKeys recognises the keys of delegating services (package services).
type ServiceKeys interface {
	// ServiceOf returns the name of the service whose key is key.
	ServiceOf(key string) (string, bool)
	// ServiceOfClient returns the name of the service that is the OAuth client clientID
	// and the scopes that its client credentials tokens must all carry to authenticate it.
	ServiceOfClient(clientID string) (service string, scopes []string, ok bool)
}

// Caller is who sent a request that RequireBearer let through: a user, with the claims of
// the token, an operator, or a delegating service.
type Caller struct {
	// Operator is set for an operator, who is OperatorAs.
	Operator   bool
	OperatorAs Operator
	// Service names the delegating service that authenticated with its key or its client
	// credentials token.
	Service string
	// Claims are the verified token's, for a user.
	Claims Claims
}

type callerKey struct{}

// CallerFrom returns the caller of a request that RequireBearer let through.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// RequireBearer returns middleware that lets through only requests with a bearer token that
// v verifies (or an operator token or a service key, where opts allow them) and that
// carries every scope of opts.Scopes, and puts the Caller in the request's context.
// Everything else is answered as RFC 6750 says, with the resource metadata in the
// challenge (RFC 9728):
//
//   - no bearer token: 401, a challenge without an error code;
//   - a token that does not verify: 401 invalid_token, with the reason (never the token);
//   - a user's token without a required scope: 403 insufficient_scope, with the scopes;
//   - a client credentials token (OAuth, naming no user): 401 invalid_token where
//     opts.Services is nil or names no service of its client, and 403 insufficient_scope,
//     with the service's scopes, when it lacks one of them;
//   - a token that cannot be checked now (the issuer does not answer): 503, and the reason
//     goes to the log only;
//   - a token from a client address that sent too many tokens that do not verify
//     (opts.BadTokens): 429 with Retry-After, and the token is not checked.
//
// Bodies are JSON: {"error": "..."}.
func RequireBearer(v Verifier, opts BearerOptions) func(http.Handler) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b := &bearerCheck{v: v, opts: opts}
	return func(next http.Handler) http.Handler {
		// This handler stays small: it is on the stack of every open MCP stream for as long
		// as the stream lasts, and a smaller stack lets the runtime shrink the goroutine's.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r := b.admit(w, r); r != nil {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// bearerCheck decides who sends a request (RequireBearer).
type bearerCheck struct {
	v    Verifier
	opts BearerOptions
}

// admit returns r with its Caller in its context, or answers r with the refusal and
// returns nil.
func (b *bearerCheck) admit(w http.ResponseWriter, r *http.Request) *http.Request {
	opts, log := &b.opts, b.opts.Logger
	token, ok := BearerToken(r)
	if !ok {
		refuse(w, http.StatusUnauthorized, opts.challenge(""), "a bearer token is required")
		return nil
	}
	if op, ok := opts.Operators.Match(token); ok {
		return withCaller(r, Caller{Operator: true, OperatorAs: op})
	}
	if opts.Services != nil {
		if name, ok := opts.Services.ServiceOf(token); ok {
			return withCaller(r, Caller{Service: name})
		}
	}
	if no, refused := opts.BadTokens.check(r, token); refused {
		if no.first {
			log.WarnContext(r.Context(), "bearer tokens of a client not checked: too many did not verify",
				"client", no.client.String(), "limit", opts.BadTokens.limit.Failures, "window", opts.BadTokens.limit.Window.String())
		}
		opts.refused(r, "bearer token not checked: too many that did not verify came from this address")
		retry := retryAfterSeconds(no.retryAfter)
		w.Header().Set("Retry-After", retry)
		refuse(w, http.StatusTooManyRequests, "",
			"too many bearer tokens that are not valid came from this address; try again in "+retry+" seconds")
		return nil
	}
	claims, err := b.v.Verify(r.Context(), token)
	switch {
	case errors.Is(err, ErrInvalidToken):
		opts.BadTokens.failed(r)
		reason := strings.TrimPrefix(err.Error(), ErrInvalidToken.Error()+": ")
		opts.refused(r, "bearer token not valid: "+reason)
		refuse(w, http.StatusUnauthorized, opts.challenge(`error="invalid_token", error_description=`+quote(reason)),
			"the bearer token is not valid: "+reason)
		return nil
	case err != nil:
		log.ErrorContext(r.Context(), "bearer token not checked", "err", err)
		refuse(w, http.StatusServiceUnavailable, "", "urlflow cannot check tokens right now; please try again in a moment")
		return nil
	}
	opts.BadTokens.verified(token, claims.Expiry)
	switch {
	case claims.Actor != "":
		// Exchanged for another party (RFC 8693), which holds it: evidence of the user
		// that a delegating service may send (web: Urlflow-User-Token), never its own
		// authentication.
		opts.refused(r, "bearer token exchanged for another party (act)")
		refuse(w, http.StatusUnauthorized, opts.challenge(`error="invalid_token", error_description="a token exchanged for another party (act) is not accepted here"`),
			"the bearer token is not valid: a token exchanged for another party (act) is not accepted here")
		return nil
	case claims.ClientOnly():
		return b.admitClient(w, r, claims)
	}
	if missing := missingScopes(claims.Scopes, opts.Scopes); len(missing) > 0 {
		opts.refused(r, "bearer token lacks the scopes "+strings.Join(missing, ", "))
		refuse(w, http.StatusForbidden,
			opts.challenge(`error="insufficient_scope", scope=`+quote(strings.Join(opts.Scopes, " "))),
			"the token lacks the scopes "+strings.Join(missing, ", "))
		return nil
	}
	return withCaller(r, Caller{Claims: claims})
}

// admitClient is admit for a client credentials token, which names no user: it is a
// delegating service's where opts accept services, when it carries the service's scopes.
func (b *bearerCheck) admitClient(w http.ResponseWriter, r *http.Request, claims Claims) *http.Request {
	opts := &b.opts
	noUser := opts.challenge(`error="invalid_token", error_description="a client's own token names no user"`)
	if opts.Services == nil {
		// An MCP session belongs to a user; no client acts as one, a service's neither.
		opts.refused(r, "a client's own token (client credentials, client "+claims.ClientID+") where only users' tokens are accepted")
		refuse(w, http.StatusUnauthorized, noUser,
			"the bearer token is not valid: a client's own token (client credentials) names no user, and only a user's token is accepted here")
		return nil
	}
	service, scopes, ok := opts.Services.ServiceOfClient(claims.ClientID)
	if !ok {
		opts.refused(r, "a client's own token, of no service")
		refuse(w, http.StatusUnauthorized, noUser, "the bearer token is not valid: a client's own token (client credentials) names no user")
		return nil
	}
	// The service's own scopes, not the users': they show that the token was asked for
	// to act as the service here, not for another purpose at the same issuer.
	if missing := missingScopes(claims.Scopes, scopes); len(missing) > 0 {
		why := "the client credentials token of the service " + service + " lacks the scopes " + strings.Join(missing, ", ")
		opts.refused(r, why)
		refuse(w, http.StatusForbidden, opts.challenge(`error="insufficient_scope", scope=`+quote(strings.Join(scopes, " "))), why)
		return nil
	}
	return withCaller(r, Caller{Service: service})
}

// withCaller returns r with c as its Caller.
func withCaller(r *http.Request, c Caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// BearerToken returns the token of r's "Authorization: Bearer TOKEN" header.
func BearerToken(r *http.Request) (string, bool) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") {
		return "", false
	}
	return fields[1], true
}

// challenge returns the WWW-Authenticate value with params and the resource metadata.
func (o BearerOptions) challenge(params string) string {
	if o.ResourceMetadataURL != "" {
		if params != "" {
			params += ", "
		}
		params += "resource_metadata=" + quote(o.ResourceMetadataURL)
	}
	return strings.TrimSpace("Bearer " + params)
}

// quote makes s an RFC 6750 quoted string: the characters it allows, in double quotes.
func quote(s string) string {
	return `"` + strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return '\''
		}
		return r
	}, s) + `"`
}

func refuse(w http.ResponseWriter, status int, challenge, message string) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": message})
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// missingScopes returns the scopes of want that are not in have.
func missingScopes(have, want []string) []string {
	var missing []string
	for _, s := range want {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// ForSDK hands the caller that RequireBearer let through to the MCP SDK's streamable HTTP
// handler next, which reads a request's user from the SDK's own context key (as TokenInfo,
// with issuer and subject in its UserID) and compares it across a session's requests.
// Nothing is checked a second time: only a user's verified claims pass.
func ForSDK(next http.Handler) http.Handler {
	return auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := CallerFrom(r.Context())
		if !ok || c.Operator || c.Service != "" || c.Claims.User.IsZero() {
			return nil, fmt.Errorf("%w: no user", ErrInvalidToken)
		}
		return TokenInfo(c.Claims), nil
	}, &auth.RequireBearerTokenOptions{ClockSkew: DefaultClockSkew})(next)
}
