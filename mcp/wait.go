package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state/flow"
)

// How a tool call waits for a flow to end. A call that carries a progress token hears
// progress (every ProgressInterval) and waits until the flow ends, up to the deadline and
// ProgressWaitLimit, so that a client that shows progress asks the user once; a call
// without one waits a bounded time (PushWait, RetryWait, waitSeconds) and then answers
// honestly that the flow still runs.

// waitForEnd waits until e has ended or until (Store.AwaitEnd), and sends progress
// notifications on progress's ticks (if it has any).
func (s *Server) waitForEnd(ctx context.Context, e *flow.Elicitation, wake <-chan flow.Notice, until time.Time, progress *progressReport) (*flow.Elicitation, error) {
	var (
		tick   <-chan time.Time
		onTick func()
	)
	if progress != nil {
		tick, onTick = progress.C, func() { progress.send(ctx) }
	}
	e, err := s.opts.Flows.AwaitEnd(ctx, e, wake, until, tick, onTick)
	if err != nil && ctx.Err() == nil {
		return nil, s.unavailable(ctx, err)
	}
	return e, err
}

// progressReport sends the progress notifications of a tool call that waits for a flow:
// one every ProgressInterval when the call carries a progress token. Without a token, C is
// nil and it sends nothing.
type progressReport struct {
	// C ticks when the next notification is due.
	C <-chan time.Time

	s      *Server
	e      *flow.Elicitation
	req    *sdk.CallToolRequest
	token  any
	ticker *time.Ticker
	step   int
}

// reportProgress starts the progress notifications of req's wait for e.
func (s *Server) reportProgress(req *sdk.CallToolRequest, e *flow.Elicitation) *progressReport {
	p := &progressReport{req: req, token: req.Params.GetProgressToken(), s: s, e: e}
	if p.token != nil {
		p.ticker = time.NewTicker(s.opts.ProgressInterval)
		p.C = p.ticker.C
	}
	return p
}

// on reports whether the call is told of progress.
func (p *progressReport) on() bool { return p != nil && p.ticker != nil }

func (p *progressReport) stop() {
	if p.on() {
		p.ticker.Stop()
	}
}

// send sends the next progress notification, with the link the user has to finish at.
func (p *progressReport) send(ctx context.Context) {
	p.step++
	err := p.req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
		ProgressToken: p.token, Progress: float64(p.step),
		Message: "Waiting for you to finish in the browser: " + flow.ElicitationURL(p.s.opts.PublicURL, p.e.ID),
	})
	if err != nil {
		p.s.log.InfoContext(ctx, "progress notification not sent", "elicitation_id", p.e.ID, "err", err)
	}
}

// waitLimit is when a tool call's wait for e ends: with progress, the deadline or
// ProgressWaitLimit from now, whichever comes first; without, bounded from now.
func (s *Server) waitLimit(e *flow.Elicitation, progress *progressReport, bounded time.Duration) time.Time {
	limit := bounded
	if progress.on() {
		limit = s.opts.ProgressWaitLimit
	}
	if until := time.Now().Add(limit); until.Before(e.ExpiresAt) {
		return until
	}
	return e.ExpiresAt
}
