package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/state"
)

// TimeExtended is not a transition: it is the history entry of a deadline moved later at
// the user's request (MoreTime). The flow stays in its state.
const TimeExtended Event = "time_extended"

// MaxExtensions is how many times a user may ask for more time on one flow.
const MaxExtensions = 3

// CanExtend says whether the deadline of e may move, and when not, why, for the page: only
// a running flow of a 2025-11-25 session, whose client holds nothing bound to the deadline
// (a 2026-07-28 client and a delegating service hold a signed request state that expires
// with it), at most MaxExtensions times.
func (e *Elicitation) CanExtend() (bool, string) {
	switch {
	case e.State.Terminal():
		return false, "the request has ended"
	case e.Era() != "2025-11-25":
		return false, "the client holds this request with its deadline, which cannot move; if the link lapses, ask the client again for a new one"
	case e.Extensions >= MaxExtensions:
		return false, fmt.Sprintf("it was given more time %d times already; if the link lapses, ask the client again for a new one", MaxExtensions)
	}
	return true, ""
}

// MoreTime moves the deadline of running elicitation id by, later, at the request of actor,
// and records it in the history. It returns ErrConflict (wrapped, with why) when the
// deadline cannot move (CanExtend) and the record after it otherwise.
func (s *Store) MoreTime(ctx context.Context, id string, by time.Duration, actor state.Actor) (*Elicitation, error) {
	return s.update(ctx, id, NoticeState, func(e *Elicitation, b *batch) (bool, *Entry, error) {
		if e.Overdue(s.now()) {
			return false, nil, fmt.Errorf("more time for %s: the deadline has passed: %w", id, ErrConflict)
		}
		if ok, why := e.CanExtend(); !ok {
			return false, nil, fmt.Errorf("more time for %s: %s: %w", id, why, ErrConflict)
		}
		e.ExpiresAt = e.ExpiresAt.Add(by)
		e.Extensions++
		e.UpdatedAt = s.now().UTC()
		s.writeIndex(ctx, b, indexWrite{key: deadlinesKey, member: e.ID, score: float64(e.ExpiresAt.UnixMilli())})
		// The marker that lets a second call of the session find this flow lives as long.
		b.PExpireAt(ctx, openKey(e.User.Key(), e.Kind, e.CredentialName(), e.SessionID), e.ExpiresAt)
		entry := &Entry{At: e.UpdatedAt, Event: TimeExtended, Actor: actor, From: e.State, To: e.State,
			Reason: "more time asked for: the link is valid until " + e.ExpiresAt.Format("15:04:05 UTC")}
		return true, entry, nil
	})
}
