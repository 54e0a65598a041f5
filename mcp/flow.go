package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// need is what a tool of turn t needs of its user: target of kind (KindSecret if empty),
// with the reason the pages show given how the credential it replaces stands.
func (s *Server) need(t turn, kind state.Kind, target string, scopes []string, purpose func(*flow.Replaced) string) ask.Need {
	if kind == "" {
		kind = state.KindSecret
	}
	return ask.Need{User: t.user, Kind: kind, Target: target, Scopes: scopes, Purpose: purpose,
		Caller: ask.Caller{Client: t.client(), SessionID: t.sessionID(), Replica: s.opts.Replica}}
}

// askFor takes the user through an elicitation for n, which its Check found missing, in
// the way the call's era and client allow: it reuses the running elicitation of the same
// user and target in the same session (or, in the sessionless era, of the same user and
// target), or opens one. It returns the elicitation and no result once the credential is
// stored (the tool goes on and reads it), and otherwise the result or error the tool
// returns now.
func (s *Server) askFor(ctx context.Context, t turn, n ask.Need, missing ask.Outcome) (*flow.Elicitation, *sdk.CallToolResult, error) {
	if t.era == era2026 {
		return s.multiRoundTrip(ctx, t, n, missing)
	}
	o, err := s.opts.Asker.Open(ctx, n, missing)
	if err != nil {
		return nil, nil, s.unavailable(ctx, err)
	}
	e := o.Elicitation
	switch {
	case !t.urlMode():
		return e, s.userActionRequired(ctx, e), nil
	case s.opts.Style == StyleError:
		return e, nil, sdk.URLElicitationRequiredError([]*sdk.ElicitParams{s.elicitParams(ctx, e, true)})
	}
	res, err := s.push(ctx, t, e, o.Created)
	return e, res, err
}

// elicitParams is the URL-mode elicitation for e. The 2026-07-28 input request carries no
// elicitation ID; the 2025-11-25 elicitation/create and −32042 do.
func (s *Server) elicitParams(ctx context.Context, e *flow.Elicitation, withID bool) *sdk.ElicitParams {
	p := &sdk.ElicitParams{
		Mode:    "url",
		URL:     flow.ElicitationURL(s.opts.PublicURL, e.ID),
		Message: s.asked(ctx, e).message(),
	}
	if withID {
		p.ElicitationID = e.ID
	}
	return p
}

// clientAnswer is the outcome of elicitation/create.
type clientAnswer struct {
	res *sdk.ElicitResult
	err error
}

// push sends elicitation/create (for a reused flow too, whatever its running state) and
// waits for the flow to end (waitLimit: while the call
// reports progress, until the deadline or ProgressWaitLimit; otherwise PushWait), after
// which it answers honestly that the flow is still running. The
// client's accept is recorded as consent and nothing more; its decline or cancel ends the
// flow. A cancelled tool call leaves the elicitation running: the user may still finish in
// the browser. When the flow has ended, its completion notification goes on the call's own
// stream just before the result, and that is its delivery (carriedNotice).
func (s *Server) push(ctx context.Context, t turn, e *flow.Elicitation, created bool) (*sdk.CallToolResult, error) {
	req := t.req
	wake, stop := s.opts.Hub.Wait(e.ID)
	defer stop()
	notice := s.notifier.carry(e.ID)
	defer notice.release(ctx)

	var answers chan clientAnswer
	elicitCtx, cancelElicit := context.WithCancel(ctx)
	defer cancelElicit()
	if !e.State.Terminal() {
		// Every call asks, also for a flow its client accepted before: the call that showed
		// the link may have ended (a page step that failed, a client that gave up waiting),
		// and a call that asked nothing left its client without the link, waiting in
		// silence (TestACallThatPicksUpAnAcceptedFlowAsksAgain). An answer to a flow past
		// pending changes nothing and is recorded.
		answers = make(chan clientAnswer, 1)
		params := s.elicitParams(ctx, e, true)
		go func() {
			res, err := req.Session.Elicit(elicitCtx, params)
			answers <- clientAnswer{res, err}
		}()
	}

	progress := s.reportProgress(req, e)
	defer progress.stop()
	budget := time.NewTimer(time.Until(s.waitLimit(e, progress, s.opts.PushWait)))
	defer budget.Stop()

	// The record is read only when it may have ended: once now, unless this call has just
	// created it (nobody else knows its URL yet), and after a notice that says it ended or
	// says nothing (the subscription came back). Recording the client's answer publishes
	// a notice of its own.
	read := !created
	for {
		if read {
			cur, err := s.opts.Flows.Read(ctx, e.ID, flow.IfCopy((*flow.Elicitation).Ended))
			if err != nil {
				return nil, s.unavailable(ctx, err)
			}
			if cur.State.Terminal() {
				notice.write(ctx, req.Session, cur)
				return s.outcome(ctx, cur), nil
			}
		}
		read = false
		select {
		case a := <-answers:
			answers = nil
			if _, err := s.recordAnswer(ctx, e.ID, a); err != nil {
				return nil, s.unavailable(ctx, err)
			}
		case n := <-wake:
			read = n.MayHaveEnded()
		case <-progress.C:
			progress.send(ctx)
		case <-budget.C:
			if answers != nil {
				if _, err := s.opts.Flows.Apply(ctx, e.ID, flow.NoAnswer, state.ActorSystem,
					"the client did not answer elicitation/create in time"); err != nil {
					return nil, s.unavailable(ctx, err)
				}
			}
			cur, err := s.opts.Flows.Read(ctx, e.ID)
			if err != nil {
				return nil, s.unavailable(ctx, err)
			}
			notice.write(ctx, req.Session, cur)
			return s.outcome(ctx, cur), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// sessionURLMode reports whether the client of a 2025-11-25 session declared URL-mode
// elicitation at initialize.
func sessionURLMode(ss *sdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}

// offerNewAttempt sends elicitation/create for a new attempt started through the recovery
// API ({"new": true}) to the originating session, when this process holds it and its
// client declared URL mode: that is how the client learns the new URL. The client's answer
// is recorded like any other.
func (s *Server) offerNewAttempt(ctx context.Context, n flow.Notice) {
	if n.What != flow.NoticeRetried {
		return
	}
	ls, ok := s.sessions.get(n.SessionID)
	if !ok || !sessionURLMode(ls.ss) {
		return
	}
	s.background.spawn(ctx, func(ctx context.Context) {
		e, err := s.opts.Flows.Read(ctx, n.ID)
		if err != nil || e.User != ls.user || e.State != flow.Pending {
			return
		}
		ctx, cancel := context.WithDeadline(ctx, e.ExpiresAt)
		defer cancel()
		res, err := ls.ss.Elicit(ctx, s.elicitParams(s.inLanguageOf(ctx, e.User), e, true))
		if _, err := s.recordAnswer(ctx, e.ID, clientAnswer{res, err}); err != nil {
			s.log.WarnContext(ctx, "answer to a new attempt not recorded", "elicitation_id", e.ID, "err", err)
		}
	})
}

// recordAnswer records the client's answer to elicitation/create as the state table says,
// and returns the record after it (nil when the tool call ended instead: nothing recorded).
func (s *Server) recordAnswer(ctx context.Context, id string, a clientAnswer) (*flow.Elicitation, error) {
	var (
		ev     flow.Event
		actor  = state.ActorClient
		reason string
	)
	switch {
	case a.err != nil:
		if ctx.Err() != nil {
			return nil, nil // the tool call ended; that is not the client's answer
		}
		ev, actor, reason = flow.NoAnswer, state.ActorSystem, "elicitation/create failed: "+a.err.Error()
	default:
		var ok bool
		if ev, reason, ok = flow.ClientAnswer(a.res.Action); !ok {
			ev, reason, _ = flow.ClientAnswer("cancel") // the SDK checks the action; a stranger one ends nothing more
		}
	}
	change, err := s.opts.Flows.Apply(ctx, id, ev, actor, reason)
	return change.Elicitation, err
}
