package flow

import (
	"errors"
	"fmt"
)

// State is where an elicitation stands. The nine states and the events that move between
// them are the state table of docs/design.md ("State machine"); Next is that table in code.
type State string

// The states of an elicitation.
const (
	// Pending: created, URL handed to the client, no answer yet.
	Pending State = "pending"
	// Consented: the client answered accept. Consent, never success.
	Consented State = "consented"
	// InProgress: the elicitation's own user opened the URL in a browser.
	InProgress State = "in_progress"
	// Complete: urlflow verified and stored the credential. Only this state releases one.
	Complete State = "complete"
	// Failed: verification or the provider failed; the user may try again until the deadline.
	Failed State = "failed"
	// Unknown: urlflow cannot tell what happened (the client never answered).
	Unknown State = "unknown"
	// Declined: an explicit no, in the client or on the page.
	Declined State = "declined"
	// Cancelled: dismissed in the client, or cancelled through the API or a tool.
	Cancelled State = "cancelled"
	// Expired: the deadline passed before the flow completed.
	Expired State = "expired"
)

// States lists every state, in the order of the state table (docs/design.md).
var States = []State{Pending, Consented, InProgress, Failed, Unknown, Complete, Declined, Cancelled, Expired}

// Terminal reports whether no event can change s any more.
func (s State) Terminal() bool {
	switch s {
	case Complete, Declined, Cancelled, Expired:
		return true
	}
	return false
}

// Valid reports whether s is one of the nine states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Event is something that happened to an elicitation. Every event is recorded in the
// elicitation's history; only some change its state (see Next).
type Event string

// Events of the state table.
const (
	ClientAccept    Event = "client_accept"     // the client answered accept
	ClientDecline   Event = "client_decline"    // the client answered decline
	ClientCancel    Event = "client_cancel"     // the client answered cancel
	NoAnswer        Event = "no_answer"         // elicitation/create failed or timed out unanswered
	BrowserOpen     Event = "browser_open"      // the elicitation's own user opened the URL
	Verified        Event = "verified"          // urlflow verified and stored the credential
	VerifyFailed    Event = "verify_failed"     // provider error or secret rejected by verification
	PageDecline     Event = "page_decline"      // the user declined on the page
	CancelRequested Event = "cancel"            // the cancel endpoint or tool
	DeadlinePassed  Event = "deadline"          // the deadline passed
	Created         Event = "created"           // history only: the elicitation was created
	OtherUserOpened Event = "other_user_opened" // history only: refused, possible phishing
	PageContinue    Event = "page_continue"     // history only: the user agreed on the consent page
	InputRejected   Event = "input_rejected"    // history only: a submitted value failed validation
	LatePost        Event = "late_post"         // history only: a form arrived after the flow ended
	Notified        Event = "notified"          // history only: completion written to the client's stream
	NotifyRequeued  Event = "notify_requeued"   // history only: a retry asked for the notification again
	SessionEnded    Event = "session_ended"     // history only: the session ended before it could be told
	RetriedAs       Event = "retried"           // history only: a new attempt was started from this one
)

// ErrImpossible is returned by Next for the cells of the state table marked "cannot
// happen": the event does not apply to that state at all (for example a verified secret
// for an elicitation nobody opened). Nothing changes.
var ErrImpossible = errors.New("event cannot happen in this state")

// changes holds every cell of the table that changes the state.
var changes = map[State]map[Event]State{
	Pending: {
		ClientAccept: Consented, ClientDecline: Declined, ClientCancel: Cancelled,
		NoAnswer: Unknown, BrowserOpen: InProgress, CancelRequested: Cancelled, DeadlinePassed: Expired,
	},
	Consented: {
		BrowserOpen: InProgress, CancelRequested: Cancelled, DeadlinePassed: Expired,
	},
	InProgress: {
		Verified: Complete, VerifyFailed: Failed, PageDecline: Declined,
		CancelRequested: Cancelled, DeadlinePassed: Expired,
	},
	Failed: {
		BrowserOpen: InProgress, PageDecline: Declined, CancelRequested: Cancelled, DeadlinePassed: Expired,
	},
	Unknown: {
		BrowserOpen: InProgress, CancelRequested: Cancelled, DeadlinePassed: Expired,
	},
}

// impossible holds the cells marked "–": the event cannot happen in that state.
var impossible = map[State]map[Event]bool{
	Pending:   {Verified: true, VerifyFailed: true, PageDecline: true},
	Consented: {Verified: true, VerifyFailed: true, PageDecline: true},
	Failed:    {Verified: true, VerifyFailed: true},
	Unknown:   {Verified: true, VerifyFailed: true, PageDecline: true},
}

// TableEvents lists the events that have a column in the state table, in its order.
var TableEvents = []Event{
	ClientAccept, ClientDecline, ClientCancel, NoAnswer, BrowserOpen,
	Verified, VerifyFailed, PageDecline, CancelRequested, DeadlinePassed,
}

// Next returns the state that event e moves state s to. An event that changes nothing
// (a late accept, a cancel of a finished flow, a history-only event) returns s itself.
// A cell of the table marked "cannot happen" returns s and ErrImpossible.
func Next(s State, e Event) (State, error) {
	if !s.Valid() {
		return s, fmt.Errorf("state %q: %w", s, errUnknownState)
	}
	if impossible[s][e] {
		return s, fmt.Errorf("%s in state %s: %w", e, s, ErrImpossible)
	}
	if to, ok := changes[s][e]; ok {
		return to, nil
	}
	return s, nil
}

var errUnknownState = errors.New("unknown state")

// ClientAnswer returns the event of a client's answer to a URL-mode elicitation/create,
// and the reason the history gives: accept is consent and never success. ok is false for
// an action other than accept, decline and cancel.
func ClientAnswer(action string) (ev Event, reason string, ok bool) {
	switch action {
	case "accept":
		return ClientAccept, "accepted in the client (consent, not success)", true
	case "decline":
		return ClientDecline, "declined in the client", true
	case "cancel":
		return ClientCancel, "cancelled in the client", true
	}
	return "", "", false
}
