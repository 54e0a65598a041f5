package mcp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// inputKey names urlflow's one input request in a multi round-trip result.
const inputKey = "auth"

// multiRoundTrip asks for n in protocol 2026-07-28. The first call opens the elicitation
// and answers input_required with a URL-mode input request and a signed requestState.
// A retry must carry a requestState that this server issued for the same user, tool and
// arguments, and not expired; anything else is refused and changes nothing. The client's
// answer in the retry is recorded as the state table says (an accept is consent and
// nothing more). The retry then waits for the flow to end: while the call carries a
// progress token, until the flow ends (with progress notifications, up to the deadline and
// ProgressWaitLimit), so that a client that shows progress asks the user once; otherwise at
// most RetryWait. Complete lets the tool go on, an end without success gets an honest
// result, and a flow still running gets input_required again for the same elicitation.
func (s *Server) multiRoundTrip(ctx context.Context, t turn, n ask.Need, missing ask.Outcome) (*flow.Elicitation, *sdk.CallToolResult, error) {
	p := t.req.Params
	binding := ask.ToolBinding(p.Name, p.Arguments)
	if p.RequestState == "" {
		o, err := s.opts.Asker.Open(ctx, n, missing)
		if err != nil {
			return nil, nil, s.unavailable(ctx, err)
		}
		return s.roundResult(ctx, t, o, binding)
	}
	id, err := s.opts.Asker.Redeem(p.RequestState, t.user, binding)
	if err != nil {
		s.log.WarnContext(ctx, "retry refused", "user", t.user.Key(), "tool", p.Name, "err", err)
		return nil, nil, fmt.Errorf("%w. Nothing was changed; call the tool again without requestState to start over", err)
	}
	wake, stop := s.opts.Hub.Wait(id)
	defer stop()
	// What the flow is now, read or written after the subscription, so that the wait
	// misses no ending.
	cur, err := s.opts.Asker.Current(ctx, t.user, id, inputAction(p.InputResponses), "")
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w: its elicitation is gone. Call the tool again without requestState to start over", ask.ErrBadState)
	}
	if err != nil {
		return nil, nil, s.unavailable(ctx, err)
	}
	progress := s.reportProgress(t.req, cur)
	defer progress.stop()
	e, err := s.waitForEnd(ctx, cur, wake, s.waitLimit(cur, progress, s.opts.RetryWait), progress)
	if err != nil {
		return nil, nil, err
	}
	o := ask.Settle(e)
	if cur.State.Terminal() { // it had ended before this retry: what it stored may be gone
		if o, err = s.opts.Asker.Recheck(ctx, n, e); err != nil {
			return nil, nil, s.unavailable(ctx, err)
		}
	}
	return s.roundResult(ctx, t, o, binding)
}

// inputAction is the client's answer to urlflow's input request in a retry: accept,
// decline or cancel, or "" when it sent none. The SDK checks the action; a stranger one
// counts as cancel, which ends nothing more.
func inputAction(responses sdk.InputResponseMap) string {
	answer, ok := responses[inputKey].(*sdk.ElicitResult)
	if !ok || answer == nil {
		return ""
	}
	if _, _, known := flow.ClientAnswer(answer.Action); !known {
		return "cancel"
	}
	return answer.Action
}

// roundResult is what a round of a multi round-trip call answers for o: nothing once the
// credential is stored (the tool goes on), the honest end, or, while the elicitation runs,
// input_required (the link, for a client without URL mode).
func (s *Server) roundResult(ctx context.Context, t turn, o ask.Outcome, binding ask.Binding) (*flow.Elicitation, *sdk.CallToolResult, error) {
	e := o.Elicitation
	switch {
	case o.Status == ask.Stored:
		return e, nil, nil
	case o.Status == ask.Ended:
		return e, s.outcome(ctx, e), nil
	case !t.urlMode():
		return e, s.userActionRequired(ctx, e), nil
	}
	return e, &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{inputKey: s.elicitParams(ctx, e, false)},
		RequestState:  s.opts.Asker.Issue(e, binding),
	}, nil
}
