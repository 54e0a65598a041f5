package state

import (
	"crypto/sha256"
	"encoding/base64"

	"github.com/urlflow/urlflow/internal/display"
)

// User is the person an elicitation or a credential belongs to: an issuer and a subject,
// both taken from a verified token, never from anything a client claims.
type User struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

// Key returns a short, stable, opaque key for u, used in Redis key names and hash tags.
func (u User) Key() string {
	sum := sha256.Sum256([]byte(u.Issuer + "\x00" + u.Subject))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ID returns the string that identifies u to the MCP SDK, which compares it across the
// requests of a session. It holds both the issuer and the subject.
func (u User) ID() string { return u.Issuer + " " + u.Subject }

// IsZero reports whether u is the zero User.
func (u User) IsZero() bool { return u.Issuer == "" && u.Subject == "" }

// String returns the subject and issuer for people to read.
func (u User) String() string { return u.Subject + " at " + u.Issuer }

// Kind is what an elicitation collects.
type Kind string

// The kinds of elicitation.
const (
	KindSecret Kind = "secret" // a secret entered in urlflow's form
	KindOAuth  Kind = "oauth"  // a third-party OAuth grant
)

// ClientInfo is what the MCP client said about itself: at initialize, or in each request's
// _meta from 2026-07-28. It is self-reported and shown to the user as such. Make one with
// NewClientInfo.
type ClientInfo struct {
	Name    string `json:"name,omitempty"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version,omitempty"`
}

// The bounds of a ClientInfo's fields, in runes.
const (
	ClientNameLimit    = 100 // Name and Title
	ClientVersionLimit = 50
)

// NewClientInfo returns what a client reported about itself, cleaned by display.Clean: one
// line of visible text each, without control or bidirectional characters, the name and the
// title cut to ClientNameLimit runes and the version to ClientVersionLimit, a cut marked
// with "…". The client chooses these strings, so urlflow keeps (in elicitations and MCP
// session records), shows (on the pages) and logs only what NewClientInfo returns.
func NewClientInfo(name, title, version string) ClientInfo {
	return ClientInfo{
		Name:    display.Clean(name, ClientNameLimit),
		Title:   display.Clean(title, ClientNameLimit),
		Version: display.Clean(version, ClientVersionLimit),
	}
}

// Actor says who caused an event.
type Actor string

// The actors of history entries.
const (
	ActorClient   Actor = "client"     // the MCP client, through the protocol
	ActorUser     Actor = "user"       // the elicitation's user, in the browser or through the API
	ActorOther    Actor = "other_user" // a signed-in user who is not the elicitation's user
	ActorOperator Actor = "operator"   // an operator token
	ActorService  Actor = "service"    // a delegating MCP server, through the API
	ActorSystem   Actor = "system"     // urlflow itself: the clock, the notifier
)
