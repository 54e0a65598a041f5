package identity

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/urlflow/urlflow/state"
)

// ErrInvalidToken is wrapped by every verification failure that is the token's fault:
// RequireBearer answers it 401 invalid_token. It is the MCP SDK's auth.ErrInvalidToken.
var ErrInvalidToken = auth.ErrInvalidToken

// Claims is what a verified bearer token says: whose it is, until when, and with which
// scopes.
type Claims struct {
	User   state.User
	Expiry time.Time
	Scopes []string
	// ClientID is the OAuth client the token was issued to (client_id, or azp), when the
	// token says.
	ClientID string
	// Actor is who acts for the user (act.sub, RFC 8693): set on a token exchanged by
	// another party, which holds it.
	Actor string
}

// ClientOnly reports whether the token names no user but the client it was issued to
// (OAuth client credentials): its subject is its client ID, or the client ID and
// "@clients".
func (c Claims) ClientOnly() bool {
	return c.ClientID != "" && (c.User.Subject == c.ClientID || c.User.Subject == c.ClientID+"@clients")
}

// A Verifier verifies bearer tokens.
type Verifier interface {
	// Verify returns the claims of token. An error wraps ErrInvalidToken when the token is
	// not valid; any other error means it could not be checked now (the issuer did not
	// answer). The error text never contains the token.
	Verify(ctx context.Context, token string) (Claims, error)
}

const userExtraKey = "urlflow.user"

// TokenInfo converts id for the MCP SDK. Its UserID holds issuer and subject, which the SDK
// compares across the requests of a session.
func TokenInfo(id Claims) *auth.TokenInfo {
	return &auth.TokenInfo{
		UserID:     id.User.ID(),
		Scopes:     id.Scopes,
		Expiration: id.Expiry,
		Extra:      map[string]any{userExtraKey: id.User},
	}
}

// UserOf returns the user of a TokenInfo made by TokenInfo.
func UserOf(ti *auth.TokenInfo) (state.User, bool) {
	if ti == nil {
		return state.User{}, false
	}
	u, ok := ti.Extra[userExtraKey].(state.User)
	return u, ok && !u.IsZero()
}
