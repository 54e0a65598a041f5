package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// inputKey names urlflow's one input request in a multi round-trip result.
const inputKey = "auth"

// requestStateGrace keeps a requestState valid a little past its elicitation's deadline,
// so that a retry just after the deadline gets the honest "expired" rather than an error.
const requestStateGrace = 5 * time.Minute

// multiRoundTrip asks for a in protocol 2026-07-28. The first call creates the elicitation
// and answers input_required with a URL-mode input request and a signed requestState.
// A retry must carry a requestState that this server issued for the same user, tool and
// arguments, and not expired; anything else is refused and changes nothing. The client's
// answer in the retry is recorded as the state table says (an accept is consent and
// nothing more). The retry then waits for the flow to end: while the call carries a
// progress token, until the flow ends (with progress notifications, up to the deadline and
// ProgressWaitLimit), so that a client that shows progress asks the user once; otherwise at
// most RetryWait. Complete lets the tool go on, an end without success gets an honest
// result, and a flow still running gets input_required again for the same elicitation.
func (s *Server) multiRoundTrip(ctx context.Context, t turn, a ask) (*flow.Elicitation, *sdk.CallToolResult, error) {
	p := t.req.Params
	digest := argumentsDigest(p.Arguments)
	if p.RequestState == "" {
		return s.firstRound(ctx, t, a, digest)
	}

	st, err := s.states.open(p.RequestState, time.Now(), t.user, p.Name, digest)
	if err != nil {
		s.log.WarnContext(ctx, "retry refused", "user", t.user.Key(), "tool", p.Name, "err", err)
		return nil, nil, fmt.Errorf("%w. Nothing was changed; call the tool again without requestState to start over", err)
	}
	wake, stop := s.opts.Hub.Wait(st.ElicitationID)
	defer stop()
	e, err := s.ownElicitation(ctx, t.user, st.ElicitationID, true)
	gone := func() error {
		return fmt.Errorf("%w: its elicitation is gone. Call the tool again without requestState to start over", errBadRequestState)
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, gone()
	}
	if err != nil {
		return nil, nil, s.unavailable(ctx, err)
	}
	// What the flow is now, read or written after the subscription, so that the wait
	// misses no ending: the answer's step returns it.
	var cur *flow.Elicitation
	if answer, ok := p.InputResponses[inputKey].(*sdk.ElicitResult); ok && answer != nil {
		if cur, err = s.recordAnswer(ctx, e.ID, clientAnswer{res: answer}); err != nil && !errors.Is(err, state.ErrNotFound) {
			return nil, nil, s.unavailable(ctx, err)
		}
	}
	if cur == nil && err == nil {
		cur, err = s.opts.Flows.Get(ctx, e.ID)
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, gone()
	}
	if err != nil {
		return nil, nil, s.unavailable(ctx, err)
	}
	endedBefore := cur.State.Terminal()
	progress := s.reportProgress(t.req, cur)
	defer progress.stop()
	if e, err = s.waitForEnd(ctx, cur, wake, s.waitLimit(cur, progress, s.opts.RetryWait), progress); err != nil {
		return nil, nil, err
	}
	switch {
	case e.State == flow.Complete && endedBefore:
		// The credential may have been deleted (disconnect) since the flow stored it: the
		// requestState outlives its flow. Then the call starts over rather than going on
		// without it. A flow this call saw complete stored it in that same step.
		switch _, err := s.opts.Credentials.Get(ctx, t.user, a.target); {
		case errors.Is(err, state.ErrNotFound):
			return s.firstRound(ctx, t, a, digest)
		case err != nil:
			return nil, nil, s.unavailable(ctx, err)
		}
		return e, nil, nil
	case e.State == flow.Complete:
		return e, nil, nil
	case e.State.Terminal():
		return e, s.outcome(e), nil
	}
	return e, s.inputRequired(t, e, digest), nil
}

// firstRound opens the elicitation for a and asks the client to show it: input_required,
// or the link for a client without URL mode.
func (s *Server) firstRound(ctx context.Context, t turn, a ask, digest string) (*flow.Elicitation, *sdk.CallToolResult, error) {
	e, _, err := s.openElicitation(ctx, t, a)
	if err != nil {
		return nil, nil, s.unavailable(ctx, err)
	}
	if !t.urlMode() {
		return e, s.userActionRequired(e), nil
	}
	return e, s.inputRequired(t, e, digest), nil
}

// inputRequired is the multi round-trip result that asks the client to show e's URL and
// call again with the signed requestState.
func (s *Server) inputRequired(t turn, e *flow.Elicitation, digest string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{inputKey: s.elicitParams(e, false)},
		RequestState: s.states.seal(requestState{
			User: t.user.Key(), Tool: t.req.Params.Name, Arguments: digest,
			ElicitationID: e.ID, Expires: e.ExpiresAt.Add(requestStateGrace).Unix(),
		}),
	}
}
