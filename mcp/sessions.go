package mcp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// Registration timing: a session is registered in Redis for registrationTTL and refreshed
// every registrationRefresh while it lives here, so that other replicas (the recovery API)
// can tell whether it lives.
const (
	registrationTTL     = 90 * time.Second
	registrationRefresh = 30 * time.Second
)

// liveSession is an MCP session held by this process.
type liveSession struct {
	ss      *sdk.ServerSession
	user    state.User
	client  state.ClientInfo
	started time.Time
}

// sessionRegistry knows the sessions this process holds and their users. The SDK keeps a
// session's user to itself; urlflow records it from the initialize request's token, and the
// notifier checks it before writing to a session.
type sessionRegistry struct {
	store      *flow.Store
	replica    string
	background *background
	log        *slog.Logger

	mu   sync.Mutex
	byID map[string]*liveSession
}

func newSessionRegistry(store *flow.Store, replica string, bg *background, log *slog.Logger) *sessionRegistry {
	return &sessionRegistry{store: store, replica: replica, background: bg, log: log, byID: map[string]*liveSession{}}
}

func (r *sessionRegistry) add(ctx context.Context, ss *sdk.ServerSession, user state.User, client state.ClientInfo) {
	ls := &liveSession{ss: ss, user: user, client: client, started: time.Now().UTC()}
	id := ss.ID()
	r.mu.Lock()
	r.byID[id] = ls
	r.mu.Unlock()
	r.register(ctx, id, ls)
	r.log.InfoContext(ctx, "mcp session started", "session", id, "user", user.Key(), "client", client.Name)
	// The session ends when its client closes it, it idles out, or Run closes it at shutdown.
	r.background.spawn(ctx, func(context.Context) {
		ss.Wait()
		r.mu.Lock()
		delete(r.byID, id)
		r.mu.Unlock()
		// Unregister even during shutdown (Run waits for it before Redis closes).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.store.ForgetMCPSession(ctx, id); err != nil {
			r.log.WarnContext(ctx, "ended mcp session not unregistered; it expires", "session", id, "err", err)
		}
		r.log.InfoContext(ctx, "mcp session ended", "session", id)
	})
}

// closeAll closes every session this process holds.
func (r *sessionRegistry) closeAll() {
	for _, ls := range r.snapshot() {
		ls.ss.Close()
	}
}

func (r *sessionRegistry) register(ctx context.Context, id string, ls *liveSession) {
	err := r.store.RegisterMCPSession(ctx, flow.MCPSession{
		ID: id, User: ls.user, Replica: r.replica, Client: ls.client, StartedAt: ls.started,
	}, registrationTTL)
	if err != nil {
		r.log.WarnContext(ctx, "mcp session not registered", "session", id, "err", err)
	}
}

// get returns the live session id held here.
func (r *sessionRegistry) get(id string) (*liveSession, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ls, ok := r.byID[id]
	return ls, ok
}

// ids returns the IDs of the sessions held here.
func (r *sessionRegistry) snapshot() map[string]*liveSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*liveSession, len(r.byID))
	for id, ls := range r.byID {
		out[id] = ls
	}
	return out
}

// run refreshes the registrations until ctx ends.
func (r *sessionRegistry) run(ctx context.Context) {
	t := time.NewTicker(registrationRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for id, ls := range r.snapshot() {
				r.register(ctx, id, ls)
			}
		}
	}
}

// userOf returns the user of a request's verified token.
func userOf(extra *sdk.RequestExtra) (state.User, bool) {
	if extra == nil {
		return state.User{}, false
	}
	return identity.UserOf(extra.TokenInfo)
}
