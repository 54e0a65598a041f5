package flow

import (
	"fmt"
	"net/url"
	"time"

	"github.com/urlflow/urlflow/internal/ages"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

// Delivery records the completion notification to the originating MCP session.
// QueuedAt is when urlflow queued it (the flow ended); WrittenAt is when it was written to
// the client's stream. A notification that is queued but not written has not reached the
// client.
type Delivery struct {
	QueuedAt  *time.Time `json:"queuedAt,omitempty"`
	WrittenAt *time.Time `json:"writtenAt,omitempty"`
	// SkippedAt is when urlflow decided not to send it (the client declared no URL mode).
	SkippedAt *time.Time `json:"skippedAt,omitempty"`
	// SessionEndedAt is when urlflow found the session ended before the notification could
	// be written (SessionEnded says how it knew): delivery's end when nobody is left to tell.
	// The result stays readable through elicitation_status and the API. Should the session
	// turn out to live after all (a partition healed), it is still told: WrittenAt is then set
	// as well.
	SessionEndedAt *time.Time `json:"sessionEndedAt,omitempty"`
	SessionEnded   string     `json:"sessionEnded,omitempty"`
	Attempts       int        `json:"attempts"`
	LastError      string     `json:"lastError,omitempty"`
}

// Describe says where the notification stands at now, for people (the operators' pages
// and command line).
func (d Delivery) Describe(now time.Time) string {
	switch {
	case d.WrittenAt != nil && d.SessionEndedAt != nil:
		return fmt.Sprintf("written %s ago (%d attempts), after its session had been found ended (%s): it lived after all",
			ages.Of(now.Sub(*d.WrittenAt)), d.Attempts, d.SessionEnded)
	case d.WrittenAt != nil:
		return fmt.Sprintf("written %s ago (%d attempts)", ages.Of(now.Sub(*d.WrittenAt)), d.Attempts)
	case d.SkippedAt != nil:
		return d.LastError
	case d.SessionEndedAt != nil:
		return fmt.Sprintf("not written: %s %s ago, before it could be told (%d attempts); "+
			"the result is readable through elicitation_status and the API", d.SessionEnded, ages.Of(now.Sub(*d.SessionEndedAt)), d.Attempts)
	case d.QueuedAt != nil && d.LastError != "":
		return fmt.Sprintf("owed for %s, %d attempts, last: %s", ages.Of(now.Sub(*d.QueuedAt)), d.Attempts, d.LastError)
	case d.QueuedAt != nil:
		return fmt.Sprintf("owed for %s, %d attempts", ages.Of(now.Sub(*d.QueuedAt)), d.Attempts)
	}
	return "none owed (the flow is running, or had no MCP session)"
}

// Replaced is how a stored credential stood when a flow to replace it was created: the
// consent page says why it is asked for again.
type Replaced struct {
	// LockReason is set when it was locked, and says why.
	LockReason string `json:"lockReason,omitempty"`
	// Weak is set when it was weaker than its slot requires.
	Weak bool `json:"weak,omitempty"`
	// Reconnect is set when it was a connection its provider no longer honoured.
	Reconnect bool `json:"reconnect,omitempty"`
}

// NotificationOwed reports whether the completion notification of e is owed to its MCP
// session and not yet written or given up. The session's undelivered set holds e while
// NotificationDeliverable: every step that changes one changes the other with it.
func (e *Elicitation) NotificationOwed() bool {
	return e.NotificationDeliverable() && e.Delivery.SessionEndedAt == nil
}

// NotificationDeliverable reports whether the completion notification of e would still be
// written to its MCP session if that session lives: it is owed, or it was given up only
// because the session was found ended (Delivery.SessionEndedAt), which a replica that still
// holds the session knows better.
func (e *Elicitation) NotificationDeliverable() bool {
	return e.State.Terminal() && e.SessionID != "" && e.Delivery.QueuedAt != nil &&
		e.Delivery.WrittenAt == nil && e.Delivery.SkippedAt == nil
}

// Entry is one line of an elicitation's history. From and To are equal when the event
// changed nothing.
//
// An entry may stand for several events (docs/design.md, "History"). An event identical to
// the newest entry but for its time is counted on that entry: Count is how many times it
// happened in a row, At the first time and LastAt the last. And once a history is longer
// than HistoryFirst + HistoryNewest entries, the entries between its first and its newest
// are dropped into one entry whose Event is HistoryDropped: Count is how many events were
// dropped, At and LastAt when the first and the last of them happened, From the state
// before them and To the state after them.
type Entry struct {
	At     time.Time   `json:"at"`
	Event  Event       `json:"event"`
	Actor  state.Actor `json:"actor"`
	From   State       `json:"from,omitempty"`
	To     State       `json:"to,omitempty"`
	Reason string      `json:"reason,omitempty"`
	// By names who acted when the actor is an operator (Act.By).
	By string `json:"by,omitempty"`
	// Count is how many events the entry stands for; 0 (left out of the JSON) means one.
	Count int `json:"count,omitempty"`
	// LastAt is when the last of them happened, for an entry with a Count.
	LastAt time.Time `json:"lastAt,omitzero"`
}

// Act says who does something to an elicitation and why, for its history: the actor, who
// exactly when the actor is an operator (their name), and the reason they gave.
type Act struct {
	Actor  state.Actor
	By     string
	Reason string
}

// reason returns the reason of act, or def when it gives none.
func (a Act) reason(def string) string {
	if a.Reason != "" {
		return a.Reason
	}
	return def
}

// Elicitation is one request for a secret or a grant, as stored in Redis.
type Elicitation struct {
	ID     string     `json:"id"`
	User   state.User `json:"user"`
	Kind   state.Kind `json:"kind"`
	Target string     `json:"target"`
	// Label is the account label of the credential among several of its target that its
	// service may hold for the user (credentials.Labeled); empty for the default account.
	Label string `json:"label,omitempty"`
	// Service is the delegating service that asked, through the API; empty for urlflow's
	// own tools. The credential is stored in its namespace (CredentialName).
	Service string `json:"service,omitempty"`
	// Releasable is set when the service may receive what the user provides itself (its
	// release setting when it asked): the pages said so, and the credential keeps it.
	Releasable bool `json:"releasable,omitempty"`
	// Offline is set when the service asked to use the credential while the user is not in
	// a session: the pages said so, and the credential keeps that grant.
	Offline bool `json:"offline,omitempty"`
	// Call and Metadata are the service's own, from its create request: shown back to it
	// and to operators, and kept with the credential the flow stores.
	Call     string         `json:"call,omitempty"`
	Metadata state.Metadata `json:"metadata,omitempty"`
	State    State          `json:"state"`
	// Purpose is the message shown to the user in the client and on the page.
	Purpose string `json:"purpose"`
	// Replace is set when the user asked to replace a credential that already exists.
	Replace bool `json:"replace,omitempty"`
	// Replaced says how the credential it replaces stood when it was created (nil in
	// records written before urlflow kept it, and when it replaces nothing).
	Replaced *Replaced `json:"replaced,omitempty"`
	// Scopes are the scopes asked of a third-party provider (kind oauth).
	Scopes []string `json:"scopes,omitempty"`
	// Client is the MCP client's self-reported name and version.
	Client state.ClientInfo `json:"client"`
	// SessionID is the originating MCP session (2025-11-25), if any.
	SessionID string `json:"sessionId,omitempty"`
	// Replica is the urlflow process that held that session when the flow started.
	Replica string `json:"replica,omitempty"`
	// Trace is the W3C traceparent of the span that started the flow (a tool call, a
	// service's request), so that its page visits and completion notification join that
	// trace: 55 bytes, and only while tracing is on (package tracing).
	Trace     string    `json:"trace,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Extensions counts the times its user asked for more time (MoreTime).
	Extensions int      `json:"extensions,omitempty"`
	Delivery   Delivery `json:"delivery"`
	RetryOf    string   `json:"retryOf,omitempty"`
	RetriedBy  string   `json:"retriedBy,omitempty"`
	// Revision counts the writes of the record: every write adds one (writeRecord), and a
	// step writes only over the record it read, so a later write always has a higher
	// revision. A replica keeps the copy with the highest it has seen (Store.see). Zero in
	// records written before urlflow counted them.
	Revision uint64 `json:"rev,omitempty"`
}

// CredentialName is the name the credential of e is stored under: its target in its
// service's namespace.
func (e *Elicitation) CredentialName() string {
	return credentials.Labeled(credentials.Name(e.Service, e.Target), e.Label)
}

// Ended reports whether e has ended: its state is terminal and never changes again.
func (e *Elicitation) Ended() bool { return e.State.Terminal() }

// Overdue reports whether e is still running although its deadline has passed.
func (e *Elicitation) Overdue(now time.Time) bool {
	return !e.State.Terminal() && !now.Before(e.ExpiresAt)
}

// View is the public JSON of an elicitation: the body of the recovery API and the
// structuredContent of the MCP tools. URL is set only while the flow runs; History only for
// the owner or an operator.
type View struct {
	ID      string     `json:"id"`
	State   State      `json:"state"`
	Kind    state.Kind `json:"kind"`
	Target  string     `json:"target"`
	Label   string     `json:"label,omitempty"`
	Service string     `json:"service,omitempty"`
	// Offline: the service asked to use the credential while the user is away.
	Offline bool `json:"offline,omitempty"`
	// UserRef is the reference the flow's service knows its user by (package userref),
	// and Call and Metadata the service's own from its create request: set by ViewFor, for
	// the service and operators; empty for urlflow's own flows.
	UserRef   string         `json:"userRef,omitempty"`
	Call      string         `json:"call,omitempty"`
	Metadata  state.Metadata `json:"metadata,omitempty"`
	URL       string         `json:"url,omitempty"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
	ExpiresAt time.Time      `json:"expiresAt"`
	Delivery  Delivery       `json:"delivery"`
	RetryOf   string         `json:"retryOf,omitempty"`
	RetriedBy string         `json:"retriedBy,omitempty"`
	History   []Entry        `json:"history,omitempty"`
}

// View returns the public view of e. url is the elicitation's URL; it is left out once the
// flow has ended. history may be nil.
func (e *Elicitation) View(url string, history []Entry) View {
	v := View{
		ID: e.ID, State: e.State, Kind: e.Kind, Target: e.Target, Label: e.Label, Service: e.Service, Offline: e.Offline,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, ExpiresAt: e.ExpiresAt,
		Delivery: e.Delivery, RetryOf: e.RetryOf, RetriedBy: e.RetriedBy, History: history,
	}
	if !e.State.Terminal() {
		v.URL = url
	}
	return v
}

// UserRefs make the references services know their users by (package userref).
type UserRefs interface {
	Of(service string, user state.User) string
}

// ViewFor is View as a service and operators see it: with the user reference of a
// service's flow made by refs, and the service's call and metadata.
func (e *Elicitation) ViewFor(refs UserRefs, url string, history []Entry) View {
	v := e.View(url, history)
	if e.Service != "" && refs != nil {
		v.UserRef = refs.Of(e.Service, e.User)
	}
	v.Call, v.Metadata = e.Call, e.Metadata
	return v
}

// ElicitationURL returns the URL a user opens for elicitation id: the public URL, /e/, and
// the ID. It carries nothing else: it is not a credential and signs nobody in.
func ElicitationURL(publicURL *url.URL, id string) string {
	return publicURL.JoinPath("e", id).String()
}
