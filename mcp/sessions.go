package mcp

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/every"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
)

// Registration timing: a session is registered in Redis for registrationTTL and refreshed
// every registrationRefresh while it lives here, so that other replicas (the recovery API)
// can tell whether it lives.
const (
	registrationTTL     = 90 * time.Second
	registrationRefresh = 30 * time.Second
)

// DefaultReplicaHeartbeat is how long a replica's heartbeat lasts unless refreshed; it is
// refreshed three times as often. Once it lapses, the replica's sessions count as ended
// (mcpsessions.Registry.Ended): seconds after the replica dies or loses Redis.
const DefaultReplicaHeartbeat = 10 * time.Second

// reapInterval is how often the registry looks for sessions that ended without a request
// saying so (sessionRegistry.reap).
const reapInterval = 5 * time.Second

// admissionHold is how long a place among a user's sessions stays reserved for a session
// that is starting: longer than any initialize request takes.
const admissionHold = 30 * time.Second

// errTooManySessions: a user has as many MCP sessions as allowed, and none of them can be
// closed to make room.
var errTooManySessions = errors.New("too many MCP sessions")

// liveSession is an MCP session held by this process.
type liveSession struct {
	ss      *sdk.ServerSession
	user    state.User
	client  state.ClientInfo
	started time.Time
	// lastUsed and inflight (requests in progress) are guarded by the registry's mutex.
	lastUsed time.Time
	inflight int
}

// sessionRegistry knows the sessions this process holds and their users. The SDK keeps a
// session's user to itself; urlflow records it from the initialize request's token, and the
// notifier checks it before writing to a session.
type sessionRegistry struct {
	store   *mcpsessions.Registry
	replica string
	// live lists the sessions the SDK holds (sdk.Server.Sessions).
	live func() iter.Seq[*sdk.ServerSession]
	log  *slog.Logger
	// perUser caps the sessions of one user on all replicas.
	perUser int
	// heartbeat is how long the replica's heartbeat lasts (Options.ReplicaHeartbeat).
	heartbeat time.Duration
	// ended is told of every session that ends here, with why (the notifier's
	// sessionEnded).
	ended func(ctx context.Context, user state.User, id, why string)

	mu   sync.Mutex
	byID map[string]*liveSession
}

func newSessionRegistry(store *mcpsessions.Registry, replica string, perUser int, heartbeat time.Duration,
	live func() iter.Seq[*sdk.ServerSession], log *slog.Logger) *sessionRegistry {
	return &sessionRegistry{store: store, replica: replica, perUser: perUser, heartbeat: heartbeat, live: live, log: log,
		ended: func(context.Context, state.User, string, string) {}, byID: map[string]*liveSession{}}
}

// Why a session held here ended (sessionRegistry.end).
const (
	endedByClient   = "the client closed the session"
	endedUnseen     = "the session idled out or its connection failed"
	endedByShutdown = "the replica that held the session shut down"
	endedForRoom    = "the session was closed to make room for a newer one of the same user"
)

func (r *sessionRegistry) add(ctx context.Context, ss *sdk.ServerSession, user state.User, client state.ClientInfo) {
	now := time.Now().UTC()
	ls := &liveSession{ss: ss, user: user, client: client, started: now, lastUsed: now}
	id := ss.ID()
	r.mu.Lock()
	r.byID[id] = ls
	r.mu.Unlock()
	r.register(ctx, id, ls)
	r.log.InfoContext(ctx, "mcp session started", "session", id, "user", user.Key(), "client", client.Name)
}

// end forgets session id, which has ended as why says, if it is held here: it leaves the
// registry, its registration in Redis is removed, and the notifications it is owed are
// recorded as not written (sessionRegistry.ended). It runs even when ctx has ended (a
// shutdown unregisters the sessions it closes).
func (r *sessionRegistry) end(ctx context.Context, id, why string) {
	r.mu.Lock()
	ls, ok := r.byID[id]
	delete(r.byID, id)
	r.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.store.Forget(ctx, ls.user, id); err != nil {
		r.log.WarnContext(ctx, "ended mcp session not unregistered; it expires", "session", id, "err", err)
	}
	r.log.InfoContext(ctx, "mcp session ended", "session", id, "why", why)
	r.ended(ctx, ls.user, id, why)
}

// endIfGone ends session id if it is held here and the SDK no longer holds it (its client
// deleted it).
func (r *sessionRegistry) endIfGone(ctx context.Context, id string) {
	ls, ok := r.get(id)
	if !ok {
		return
	}
	for ss := range r.live() {
		if ss == ls.ss {
			return
		}
	}
	r.end(ctx, id, endedByClient)
}

// reap ends the sessions held here that the SDK no longer holds: those that idled out,
// failed, or were deleted without endIfGone seeing it. Sessions are found ended this way,
// at most reapInterval late, rather than by a goroutine per session waiting on it: an
// idle session then costs no more than the SDK's own.
func (r *sessionRegistry) reap(ctx context.Context) {
	held := r.snapshot() // first: a session added after it is not judged
	for ss := range r.live() {
		delete(held, ss.ID())
	}
	for id := range held {
		r.end(ctx, id, endedUnseen)
	}
}

// closeAll closes and ends every session this process holds.
func (r *sessionRegistry) closeAll(ctx context.Context) {
	for id, ls := range r.snapshot() {
		ls.ss.Close()
		r.end(ctx, id, endedByShutdown)
	}
}

func (r *sessionRegistry) register(ctx context.Context, id string, ls *liveSession) {
	r.mu.Lock()
	lastUsed, busy := ls.lastUsed, ls.inflight > 0
	r.mu.Unlock()
	err := r.store.Register(ctx, mcpsessions.Session{
		ID: id, User: ls.user, Replica: r.replica, Client: ls.client, StartedAt: ls.started,
		LastUsedAt: lastUsed, Busy: busy,
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

// busy marks session id, if it is held here, as serving a request until the returned
// function is called, and as used now.
func (r *sessionRegistry) busy(id string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ls, ok := r.byID[id]
	if !ok {
		return func() {}
	}
	ls.inflight++
	ls.lastUsed = time.Now().UTC()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		ls.inflight--
		ls.lastUsed = time.Now().UTC()
	}
}

// admit reserves a place for a new session of user among the user's sessions on every
// replica. At the cap, it ends the least recently used session that no request is waiting
// on and no notification is owed to, wherever it lives, and takes its place; it returns
// errTooManySessions when there is none. The caller releases the admission once the new
// session is registered or did not start.
func (r *sessionRegistry) admit(ctx context.Context, user state.User) (*mcpsessions.Admission, error) {
	// A concurrent admission may take the place just made: try a few times.
	for range 3 {
		a, live, err := r.store.Admit(ctx, user, r.perUser, admissionHold)
		if a != nil || err != nil {
			return a, err
		}
		standings, err := r.store.Standings(ctx, user, live)
		if err != nil {
			return nil, err
		}
		victim, ok := r.leastRecentlyUsedIdle(standings)
		if !ok {
			return nil, errTooManySessions
		}
		evicted, err := r.store.Evict(ctx, user, victim.ID)
		if err != nil {
			return nil, err
		}
		if evicted {
			r.log.InfoContext(ctx, "mcp session closed to make room for a new one of the same user",
				"session", victim.ID, "user", user.Key(), "replica", victim.Replica, "last_used", victim.LastUsedAt)
		}
	}
	return nil, errTooManySessions
}

// leastRecentlyUsedIdle returns the least recently used of standings that has no request
// in progress and no notification owed. A session held here is judged by what this
// process knows now, others by their last registration.
func (r *sessionRegistry) leastRecentlyUsedIdle(standings []mcpsessions.Standing) (mcpsessions.Session, bool) {
	var victim mcpsessions.Session
	found := false
	for _, st := range standings {
		ms := st.Session
		r.mu.Lock()
		if ls, ok := r.byID[ms.ID]; ok {
			ms.LastUsedAt, ms.Busy = ls.lastUsed, ls.inflight > 0
		}
		r.mu.Unlock()
		if ms.Busy || st.Undelivered > 0 {
			continue
		}
		if !found || ms.LastUsedAt.Before(victim.LastUsedAt) {
			victim, found = ms, true
		}
	}
	return victim, found
}

// closeEvicted closes the session a NoticeCloseSession names if it is held here and still
// idle. One that a request reached meanwhile stays open: the user then has one session
// more than the cap until a session ends.
func (r *sessionRegistry) closeEvicted(ctx context.Context, n flow.Notice) {
	if n.What != flow.NoticeCloseSession {
		return
	}
	r.mu.Lock()
	ls, ok := r.byID[n.SessionID]
	idle := ok && ls.inflight == 0 && ls.user.Key() == n.UserKey
	r.mu.Unlock()
	if !idle {
		if ok {
			r.log.InfoContext(ctx, "mcp session to close for room is in use; kept", "session", n.SessionID)
		}
		return
	}
	ls.ss.Close()
	r.end(ctx, n.SessionID, endedForRoom)
}

// snapshot returns the sessions held here, by ID.
func (r *sessionRegistry) snapshot() map[string]*liveSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*liveSession, len(r.byID))
	for id, ls := range r.byID {
		out[id] = ls
	}
	return out
}

// beat records that this replica lives, for the heartbeat's lifetime.
func (r *sessionRegistry) beat(ctx context.Context) {
	if err := r.store.Beat(ctx, r.replica, r.heartbeat); err != nil {
		r.log.WarnContext(ctx, "replica heartbeat not recorded; other replicas will count this one's sessions as ended until it is",
			"err", err)
	}
}

// run beats the replica's heartbeat, refreshes the registrations and reaps ended sessions
// until ctx ends.
func (r *sessionRegistry) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { every.Run(ctx, r.heartbeat/3, r.beat) })
	wg.Go(func() {
		every.Run(ctx, registrationRefresh, func(ctx context.Context) {
			for id, ls := range r.snapshot() {
				r.register(ctx, id, ls)
			}
		})
	})
	wg.Go(func() { every.Run(ctx, reapInterval, r.reap) })
	wg.Wait()
}

// userOf returns the user of a request's verified token.
func userOf(extra *sdk.RequestExtra) (state.User, bool) {
	if extra == nil {
		return state.User{}, false
	}
	return identity.UserOf(extra.TokenInfo)
}
