// Package templates renders urlflow's pages with templ: one component per page and a shared
// layout. Pages use no inline script or style (the CSP forbids both) and work without
// JavaScript; the stylesheet is served from Static.
package templates

import (
	"embed"
	"time"
)

// Static holds the files served under /static/ (the stylesheet).
//
//go:embed static
var Static embed.FS

// Page is what the shared layout shows around every page.
type Page struct {
	// Title is the document title and the page's heading.
	Title string
	// Dev marks a development server: the layout shows a banner saying so.
	Dev bool
	// SignedInAs names the signed-in user, empty when signed out.
	SignedInAs string
	// CSRF is the token for the layout's sign-out form; the form is shown when SignedInAs is set.
	CSRF string
	// Wide gives the page's card the width of a table (the operators' pages).
	Wide bool
	// Version is urlflow's version, shown in the footer of the operators' pages only.
	Version string
	// Errors are what was wrong with the form the page shows again. The layout prefixes the
	// document title with "Error: " and lists them at the top of the page, each linking to
	// its field; the page focuses the first field in error (autofocus, no script).
	Errors []FieldError
	// Lapse is the stylesheet that reveals the warning of a page whose link lapses
	// (lapseStylesheet); empty on other pages.
	Lapse string
}

// FieldError is what was wrong with one field of a form: Field is the id of its input.
type FieldError struct {
	Field, Message string
}

// DevSignIn is the development sign-in page: the user types a name and becomes that
// development user. It says clearly that it is not a real sign-in.
type DevSignIn struct {
	// Next is the same-origin path to return to after signing in.
	Next string
	CSRF string
	// Error explains why the last attempt was refused, if it was.
	Error string
	// Name is the name typed last time, to show again after an error.
	Name string
	// Operator is the name that signs in as an operator (the /admin pages).
	Operator string
}

// Consent is the page that opens an elicitation URL: who asks, for what, and two buttons.
type Consent struct {
	ElicitationID string
	// MoreTime is how the user asks for more time, or why they cannot.
	MoreTime MoreTime
	// ServiceLabel names the delegating service that asks, verified by urlflow; empty when
	// urlflow's own tools ask. ServiceReceives says that the service may receive what the
	// user provides itself (its release setting), not only use it through urlflow.
	ServiceLabel    string
	ServiceReceives bool
	// Offline: the service asks to use what the user provides while the user is away.
	Offline bool
	// ClientName and ClientVersion are what the MCP client said about itself; the page
	// labels them as self-reported.
	ClientName    string
	ClientVersion string
	// Purpose is the message the tool gave for the request.
	Purpose string
	// SlotLabel and SlotDescription describe the secret being asked for; SlotName is its
	// configuration name.
	SlotLabel       string
	SlotDescription string
	SlotName        string
	// Replace is set when the user already has this secret stored and asked to replace it.
	Replace bool
	// LockReason says why urlflow locked the stored secret (a tool's request carried it);
	// empty when it is not locked. Weak marks a stored secret that is easy to guess.
	LockReason string
	Weak       bool
	ExpiresAt  time.Time
	CSRF       string
	// ContinueAction and DeclineAction are the POST targets of the two buttons.
	ContinueAction string
	DeclineAction  string
}

// SecretForm is the form where the user enters the secret.
type SecretForm struct {
	ElicitationID   string
	SlotLabel       string
	SlotDescription string
	// Rules describes what a valid value looks like (length, pattern), one rule per line.
	Rules []string
	// Error explains why the last value was refused. The value itself is never shown again.
	Error     string
	ExpiresAt time.Time
	CSRF      string
	// Action is the POST target of the form; DeclineAction the target of "Decline".
	Action        string
	DeclineAction string
	// Parameters are the parts of the API's address the user enters with the secret
	// (a subdomain, say), shown before it; Address is that address with {name} for each.
	Parameters []ParameterField
	Address    string
	// ErrorField names the parameter that Error is about; empty when it is the secret's.
	ErrorField string
	// MoreTime is how the user asks for more time, or why they cannot (moreTimeForm).
	MoreTime MoreTime
}

// MoreTime is the offer of more time on a page with a deadline: the POST target of the
// form that asks for it and how much it gives, or, when the deadline cannot move, why not
// (and how to get a new link).
type MoreTime struct {
	Action string
	Amount time.Duration // whole minutes
	Why    string
}

// ParameterField is a field of the secret form for a part of the API's address. Its value
// is no secret, and is shown again after an error.
type ParameterField struct {
	Name, Label, Description, Hint, Value string
}

// Done is the page after the secret was verified and stored, or the account connected.
// It says who can use it and who can see it, as the consent page said.
type Done struct {
	SlotLabel  string
	ClientName string
	// Account names the connected third-party account; empty for a secret.
	Account string
	// ServiceLabel names the delegating service that asked, verified by urlflow; empty when
	// urlflow's own tools asked. ServiceReceives says that the service may receive what the
	// user provided itself (its release setting), not only use it through urlflow.
	ServiceLabel    string
	ServiceReceives bool
}

// Ended is the page for a flow that has ended without (or before) this visit: declined,
// cancelled, expired, already complete, or a form that arrived after the end.
type Ended struct {
	// State is the elicitation's state, shown to the user in words.
	State string
	// Heading and Message say what happened and what to do next.
	Heading string
	Message string
	// NothingChanged says that this request changed nothing (a replayed or late post).
	NothingChanged bool
}

// Refused is the page for a signed-in user who opened another user's elicitation URL.
type Refused struct {
	// SignedInAs is who the browser is signed in as.
	SignedInAs string
	// SignOutAction is the POST target to sign out and sign in as someone else.
	SignOutAction string
	CSRF          string
}

// Problem is a generic error page: a status, a heading and a message.
type Problem struct {
	Status  int
	Heading string
	Message string
}

// SignedOut is the page after signing out.
type SignedOut struct{}

// Failed is the page after the API refused a new secret (the slot's check failed). The
// user may try again until the link expires.
type Failed struct {
	SlotLabel string
	// Connection marks a third-party connection that did not complete (rather than a
	// secret its API refused).
	Connection bool
	// Reason says what the check found, in words ("the API answered 401 Unauthorized").
	Reason string
	// TryAgainURL opens the form again.
	TryAgainURL string
	// DeclineAction is the POST target of "Decline".
	DeclineAction string
	CSRF          string
	ExpiresAt     time.Time
}

// Connect is the consent page of a third-party connection: who asks, which provider, what
// access, and what urlflow does with it.
type Connect struct {
	ElicitationID string
	// ServiceLabel names the delegating service that asks, verified by urlflow; empty when
	// urlflow's own tools ask. ServiceReceives says that the service may receive what the
	// user provides itself (its release setting), not only use it through urlflow.
	ServiceLabel    string
	ServiceReceives bool
	// Offline: the service asks to use what the user provides while the user is away.
	Offline bool
	// ClientName and ClientVersion are self-reported by the MCP client.
	ClientName    string
	ClientVersion string
	Purpose       string
	// ProviderLabel names the provider ("GitHub"); ProviderName is its configuration name.
	ProviderLabel string
	ProviderName  string
	// Scopes are the access asked for, as the provider names it.
	Scopes []string
	// Reconnect is set when an earlier connection stopped working or is being replaced.
	Reconnect bool
	ExpiresAt time.Time
	CSRF      string
	// ContinueAction is the POST target that sends the browser to the provider.
	ContinueAction string
	DeclineAction  string
}

// Connections is the signed-in user's page of what urlflow holds for them, by who uses it
// (urlflow's own tools, then each delegating service), each with a form that removes it.
type Connections struct {
	Groups []ConnectionGroup
	// Notice says what the last removal did; empty otherwise.
	Notice string
	CSRF   string
}

// ConnectionGroup is what one holder uses.
type ConnectionGroup struct {
	// Holder is "urlflow's own tools" or a delegating service's label; Service is the
	// service's name, empty for urlflow's own.
	Holder, Service string
	Items           []ConnectionItem
}

// ConnectionItem is one stored secret or connected account.
type ConnectionItem struct {
	// Name identifies it in the removal form.
	Name string
	// Label is the slot's or the provider's label; Account the connected account, if any.
	Label, Account string
	StoredAt       time.Time
	LastUsedAt     *time.Time
	// Problem says why it does not work as it is (locked, to reconnect); empty otherwise.
	Problem string
	// Offline: its service may use it while the user is away, until the user withdraws that.
	Offline bool
	// Address is where a secret is used, when its slot's address is made of what the user
	// entered with it.
	Address string
}

// Admin is the operators' overview (/admin).
type Admin struct {
	Counts []AdminCount
	// Stuck are the stuck flows; Rows the flows that Filter selects, one page of them.
	Stuck, Rows []AdminRow
	Filter      AdminFilter
	// States are the states the filter offers.
	States []string
	// StuckTotal counts every stuck flow; Stuck holds the oldest of them.
	StuckTotal int
	// Total counts the flows that Filter selects, when the listing counted them.
	Total *int
	// NextURL continues the listing, PrevURL lists the page before, FirstURL starts it
	// again; each empty where it does not apply.
	NextURL, PrevURL, FirstURL string
	Notice                     string
	// Error says why the filters could not be applied.
	Error string
}

// AdminCount is one running state (or the owed notifications) in the overview.
type AdminCount struct {
	// List and StuckList are the queries of the filtered lists the counts link to.
	Label, List, StuckList string
	Running, Stuck         int
	// After is the threshold past which a flow is stuck, for people ("2m").
	After string
}

// AdminFilter is what the overview's filter form holds.
type AdminFilter struct {
	State, User, OlderThan string
	Stuck, Owed            bool
}

// AdminRow is one flow in a table of the overview.
type AdminRow struct {
	ID, State, Stuck, User, Target, Service, Client string
	CreatedAt, UpdatedAt                            time.Time
}

// AdminFlow is one flow for operators (/admin/flows/{id}).
type AdminFlow struct {
	ID, State, Stuck, Kind, Target, Service, User, Client, Era, Replica string
	CreatedAt, UpdatedAt, ExpiresAt                                     time.Time
	// Delivery says where its completion notification stands.
	Delivery           string
	RetryOf, RetriedBy string
	History            []AdminEntry
	// NotOffered says why an action that would seem to apply is not offered.
	NotOffered []string
	// Actions are what an operator may do to it now; none for a read-only operator.
	Actions []AdminAction
	CSRF    string
	Notice  string
}

// AdminEntry is one line of a flow's timeline.
type AdminEntry struct {
	At                                 time.Time
	Event, Actor, By, From, To, Reason string
	Count                              int
}

// AdminAction is an action on a flow: its path segment, its label and what it does.
type AdminAction struct {
	Name, Label, Explain string
}

// AdminConfirm asks to confirm Action on flow ID for Reason: Question is the heading, Yes
// the button that takes it.
type AdminConfirm struct {
	ID, Action, Question, Yes, Explain, Reason, CSRF string
}
