package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/every"
	"github.com/urlflow/urlflow/internal/expiring"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
)

// ErrConflict is returned when an operation does not apply to an elicitation's current
// state, for example a second new attempt from the same ended elicitation. A lookup of
// something that does not exist returns state.ErrNotFound.
var ErrConflict = errors.New("conflict")

// maxCASAttempts bounds the optimistic retries of one update under contention.
const maxCASAttempts = 64

// DefaultRetention is how long an elicitation and its history stay in Redis after their
// deadline. Correctness never depends on it: it only cleans up.
const DefaultRetention = 7 * 24 * time.Hour

// StoreOptions configure a Store.
type StoreOptions struct {
	// Now returns the current time; time.Now if nil.
	Now func() time.Time
	// Retention is how long records are kept after their deadline; DefaultRetention if zero.
	Retention time.Duration
	// Logger receives transition logs; slog.Default() if nil.
	Logger *slog.Logger
	// Counters counts creations and transitions; nothing is counted if nil.
	Counters *counters.Counters
	// IDKeys seal the user into each elicitation ID (ids.go): 32 bytes each, the one that
	// seals new IDs first, then older ones that still open IDs made with them. If empty, a
	// key made at random once per process: for tests, where no other process reads the IDs.
	IDKeys [][]byte
	// Outboxes hear of every step that creates an elicitation or changes its state, and
	// queue their writes with it (Outbox).
	Outboxes []Outbox
	// StuckAfter are the thresholds past which a flow is stuck (List, Summarize);
	// DefaultStuckAfter if zero.
	StuckAfter StuckAfter
	// Metrics receive how long each flow this store ends took; nothing is measured if nil.
	Metrics *metrics.Process
	// Audit receives every change of state and every credential stored, written with the
	// step; nothing is audited if nil.
	Audit *audit.Trail
}

// Store keeps elicitations and their history in Redis, and stores the credential of a flow
// that completes in the same step.
type Store struct {
	rdb       redis.UniversalClient
	now       func() time.Time
	retention time.Duration
	log       *slog.Logger
	counters  *counters.Counters
	ids       *idSealer
	outboxes  []Outbox
	// stuckAfter are the thresholds of stuck flows.
	stuckAfter StuckAfter
	audit      *audit.Trail
	metrics    *metrics.Process
	// cluster is set on a Redis Cluster, where a script cannot write outside its user's
	// slot (outside, writeIndex).
	cluster bool
	// indexes queues the writes of the deployment-wide indexes on a Cluster (writeIndex).
	indexes *indexQueue

	// owners remembers whose elicitation each recently seen ID of the legacy form is (IDs
	// made before IDs carried their user): an ID never changes user, so a replica reads the
	// eid:ID index once per ID instead of before every read and change of it. Only IDs that
	// exist are kept.
	mu     sync.Mutex // guards owners, seen and ending
	owners *expiring.Map[string, string]
	// seen remembers each record as this replica last read or wrote it, for two minutes
	// (about the time a person takes from one page of a flow to the next): a step that
	// changes a record starts from it instead of reading it again. It is only a hint: the
	// step's script writes only if the record still reads so, and otherwise the step reads
	// it and starts over.
	seen *expiring.Map[string, seenRecordEntry]
	// ending holds, for each elicitation whose transition this replica is writing, a
	// channel closed once the outcome is in seen: the step's script publishes its notice,
	// which can reach this replica's notifier before the script's answer (ForDelivery).
	ending map[string]chan struct{}
	// toCompact are the flows this replica settled, oldest first, whose histories it packs
	// once due (packhistory.go).
	compactMu sync.Mutex
	toCompact []compactItem
}

// Bounds of Store.owners (about a megabyte) and Store.seen (up to about 20 MB at 2 kB a
// record, and usually far less: it keeps records for two minutes).
const (
	ownersSize = 10_000
	ownersTTL  = time.Hour
	seenSize   = 10_000
	seenTTL    = 2 * time.Minute
)

// NewStore returns a Store on rdb. It panics if an ID key is not 32 bytes long.
func NewStore(rdb redis.UniversalClient, opts StoreOptions) *Store {
	ids, err := newIDSealer(opts.IDKeys)
	if err != nil {
		panic(err)
	}
	s := &Store{rdb: rdb, now: opts.Now, retention: opts.Retention, log: opts.Logger, counters: opts.Counters, ids: ids, outboxes: opts.Outboxes,
		owners: expiring.New[string, string](ownersSize), seen: expiring.New[string, seenRecordEntry](seenSize),
		ending: map[string]chan struct{}{}, indexes: newIndexQueue()}
	_, s.cluster = rdb.(*redis.ClusterClient)
	if s.now == nil {
		s.now = time.Now
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	s.stuckAfter, s.audit, s.metrics = opts.StuckAfter, opts.Audit, opts.Metrics
	if s.stuckAfter == (StuckAfter{}) {
		s.stuckAfter = DefaultStuckAfter
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Now returns the store's current time.
func (s *Store) Now() time.Time { return s.now() }

// NewElicitation describes an elicitation to create.
type NewElicitation struct {
	User   state.User
	Kind   state.Kind
	Target string
	// Label is the account label (Elicitation.Label).
	Label string
	// Service is the delegating service that asks (empty for urlflow's own tools);
	// Releasable, whether it may receive the credential itself (Elicitation.Releasable).
	Service    string
	Releasable bool
	// Offline asks the user to let the service use the credential while away
	// (Elicitation.Offline).
	Offline bool
	// Call and Metadata are the service's own (Elicitation.Call, Elicitation.Metadata).
	Call      string
	Metadata  state.Metadata
	Purpose   string
	Replace   bool
	Replaced  *Replaced
	Scopes    []string
	Client    state.ClientInfo
	SessionID string
	Replica   string
	// TTL is the time from creation to the deadline.
	TTL time.Duration
	// Trace is the trace context of the span that asks (Elicitation.Trace).
	Trace string
}

// Create stores a new pending elicitation and returns it.
func (s *Store) Create(ctx context.Context, n NewElicitation) (*Elicitation, error) {
	e, wrote, err := s.create(ctx, n, nil)
	if err == nil && !wrote {
		err = fmt.Errorf("create elicitation: its new ID %s is taken", e.ID)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// create stores a new pending elicitation if each key of checks exists or not as it says,
// and reports whether it did.
func (s *Store) create(ctx context.Context, n NewElicitation, checks []check) (*Elicitation, bool, error) {
	e, err := s.newRecord(n)
	if err != nil {
		return nil, false, err
	}
	actor := state.ActorClient
	if n.Service != "" {
		actor = state.ActorService
	}
	entry := Entry{At: e.CreatedAt, Event: Created, Actor: actor, To: Pending, Reason: n.Purpose}
	b := s.newBatch()
	if err := s.writeNew(ctx, b, e, entry); err != nil {
		b.Discard()
		return nil, false, err
	}
	ran, _, err := s.runIf(ctx, elicitationKey(e.User.Key(), e.ID), nil, checks, b)
	wrote := ran == ranWrote
	if err != nil {
		return nil, false, fmt.Errorf("create elicitation: %w", err)
	}
	if !wrote {
		return e, false, nil
	}
	if err := s.writeAfter(ctx, b); err != nil {
		return nil, false, fmt.Errorf("write the service event of elicitation %s: %w", e.ID, err)
	}
	s.created(ctx, b, e)
	return e, true, nil
}

// created logs and counts the creation of e, and remembers it as b wrote it.
func (s *Store) created(ctx context.Context, b *batch, e *Elicitation) {
	s.seeWritten(b, e)
	s.log.InfoContext(ctx, "elicitation created", "elicitation_id", e.ID, "user", e.User.Key(),
		"kind", e.Kind, "target", e.Target, "session", e.SessionID)
	s.counters.Add(ctx, "urlflow_elicitations_created_total", "kind", string(e.Kind))
}

func (s *Store) newRecord(n NewElicitation) (*Elicitation, error) {
	if n.User.IsZero() {
		return nil, errors.New("create elicitation: no user")
	}
	if n.TTL <= 0 {
		return nil, errors.New("create elicitation: no deadline")
	}
	id, err := s.ids.newID(n.User.Key())
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	return &Elicitation{
		ID: id, User: n.User, Kind: n.Kind, Target: n.Target, Label: n.Label, Service: n.Service, Releasable: n.Releasable,
		Offline: n.Offline, Call: n.Call, Metadata: n.Metadata, State: Pending,
		Purpose: n.Purpose, Replace: n.Replace, Replaced: n.Replaced, Scopes: n.Scopes, Client: n.Client, SessionID: n.SessionID,
		Replica: n.Replica, Trace: n.Trace, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(n.TTL),
	}, nil
}

// writeNew queues the writes of a new record: in the user's slot, and its entry in the
// deadline index, which makes it known to the sweeper.
func (s *Store) writeNew(ctx context.Context, b *batch, e *Elicitation, entry Entry) error {
	uk := e.User.Key()
	if err := s.writeRecord(ctx, b, e); err != nil {
		return err
	}
	if err := s.appendHistory(ctx, b, e, entry); err != nil {
		return err
	}
	b.Set(ctx, openKey(uk, e.Kind, e.CredentialName(), e.SessionID), e.ID, e.ExpiresAt.Sub(e.CreatedAt))
	s.writeIndex(ctx, b, indexWrite{key: deadlinesKey, member: e.ID, score: float64(e.ExpiresAt.UnixMilli())})
	s.queueIndex(ctx, b, e)
	s.queueTransitionAudit(ctx, b, e, entry)
	return s.queueOutboxes(ctx, b, Step{Elicitation: e, Event: Created})
}

// keep is how long e's keys live from now.
func (s *Store) keep(e *Elicitation) time.Duration {
	return e.ExpiresAt.Sub(s.now()) + s.retention
}

// writeRecord queues the write of e, one revision on from the record it was read as.
func (s *Store) writeRecord(ctx context.Context, b *batch, e *Elicitation) error {
	e.Revision++
	doc, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode elicitation %s: %w", e.ID, err)
	}
	b.Set(ctx, elicitationKey(e.User.Key(), e.ID), doc, s.keep(e))
	b.written, b.record = e, doc
	return nil
}

// Open returns the running elicitation of n's user for n's kind, service and target in n's MCP
// session (or outside any session), or creates one as Create does; created says which. The
// open key of an elicitation is deleted when it ends, so in the usual case (none running)
// it costs one script that creates the record if that key still does not exist.
func (s *Store) Open(ctx context.Context, n NewElicitation) (e *Elicitation, created bool, err error) {
	name := credentials.Labeled(credentials.Name(n.Service, n.Target), n.Label)
	open := check{key: openKey(n.User.Key(), n.Kind, name, n.SessionID)}
	if e, created, err = s.create(ctx, n, []check{open}); err != nil || created {
		return e, created, err
	}
	// One is open, or was when it ended before its key was deleted (written by an earlier
	// version, or past its deadline and not yet swept).
	running, err := s.OpenFor(ctx, n.User, n.Kind, name, n.SessionID)
	if err == nil {
		return running, false, nil
	}
	if !errors.Is(err, state.ErrNotFound) {
		return nil, false, err
	}
	e, err = s.Create(ctx, n)
	return e, err == nil, err
}

// OpenFor returns the running elicitation of user for kind and credential name (its
// target in its service's namespace, credentials.Name) started in MCP session sessionID
// (or outside any session when sessionID is empty), or ErrNotFound.
func (s *Store) OpenFor(ctx context.Context, user state.User, kind state.Kind, name, sessionID string) (*Elicitation, error) {
	id, err := s.rdb.Get(ctx, openKey(user.Key(), kind, name, sessionID)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up open elicitation: %w", err)
	}
	s.rememberOwner(id, user.Key()) // the open key, in user's slot, names only user's flows
	e, err := s.Read(ctx, id)
	if err != nil {
		return nil, err
	}
	if e.State.Terminal() || e.User != user {
		return nil, state.ErrNotFound
	}
	return e, nil
}

// Retry starts a new attempt of elicitation id, which must have ended without success, for
// the same user, purpose and MCP session, and links the two both ways in one atomic step.
// It returns ErrConflict if id is still running, complete, or was already retried.
func (s *Store) Retry(ctx context.Context, id string, act Act, ttl time.Duration) (*Elicitation, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.Read(ctx, id); err != nil { // expires it first if overdue
		return nil, err
	}
	from := s.seenDoc(id)
	for range maxCASAttempts {
		old, doc, _, err := s.readForChange(ctx, uk, id, "", from)
		if err != nil {
			return nil, err
		}
		switch {
		case !old.State.Terminal() || old.State == Complete:
			return nil, fmt.Errorf("retry %s in state %s: %w", id, old.State, ErrConflict)
		case old.RetriedBy != "":
			return nil, fmt.Errorf("retry %s: already retried as %s: %w", id, old.RetriedBy, ErrConflict)
		}
		next, err := s.newRecord(NewElicitation{
			User: old.User, Kind: old.Kind, Target: old.Target, Label: old.Label, Service: old.Service, Releasable: old.Releasable,
			Offline: old.Offline, Call: old.Call, Metadata: old.Metadata, Purpose: old.Purpose,
			Replace: old.Replace, Replaced: old.Replaced, Scopes: old.Scopes, Client: old.Client, SessionID: old.SessionID,
			Replica: old.Replica, TTL: ttl,
		})
		if err != nil {
			return nil, err
		}
		next.RetryOf = old.ID
		old.RetriedBy = next.ID
		old.UpdatedAt = next.CreatedAt
		b := s.newBatch()
		created := Entry{At: next.CreatedAt, Event: Created, Actor: act.Actor, By: act.By, To: Pending,
			Reason: act.reason("new attempt") + " of " + old.ID}
		err = s.writeNew(ctx, b, next, created)
		if err == nil {
			err = s.writeRecord(ctx, b, old)
		}
		if err == nil {
			err = s.appendHistory(ctx, b, old, Entry{At: next.CreatedAt, Event: RetriedAs, Actor: act.Actor, By: act.By,
				From: old.State, To: old.State, Reason: act.reason("new attempt") + ": " + next.ID})
		}
		if err == nil {
			err = s.queueNotice(ctx, b, next, NoticeRetried)
		}
		if err != nil {
			b.Discard()
			return nil, err
		}
		ran, current, err := s.runIf(ctx, elicitationKey(uk, id), doc, nil, b)
		wrote := ran == ranWrote
		from = current
		if err != nil {
			return nil, fmt.Errorf("retry elicitation %s: %w", id, err)
		}
		if !wrote {
			continue
		}
		s.seeWritten(b, old)
		if err := s.writeAfter(ctx, b); err != nil {
			return nil, fmt.Errorf("write the service event of elicitation %s: %w", next.ID, err)
		}
		s.log.InfoContext(ctx, "elicitation retried", "elicitation_id", next.ID, "retry_of", id, "user", uk)
		return next, nil
	}
	return nil, fmt.Errorf("retry elicitation %s: too much contention", id)
}

// Sweep expires every running elicitation whose deadline has passed, so that deadlines
// hold when nobody reads, and packs the histories of the flows this replica settled
// (packhistory.go). It returns how many it expired.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	s.pruneCopies()
	if _, err := s.compactDue(ctx, false); err != nil {
		s.log.WarnContext(ctx, "histories not packed", "err", err)
	}
	max := strconv.FormatInt(s.now().UnixMilli(), 10)
	ids, err := s.rdb.ZRangeByScore(ctx, deadlinesKey, &redis.ZRangeBy{Min: "-inf", Max: max, Count: 500}).Result()
	if err != nil {
		return 0, fmt.Errorf("sweep deadlines: %w", err)
	}
	expired := 0
	for _, id := range ids {
		e, changed, err := s.expire(ctx, id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			s.rdb.ZRem(ctx, deadlinesKey, id)
		case err != nil:
			return expired, err
		case changed:
			expired++
		case e.State.Terminal():
			s.rdb.ZRem(ctx, deadlinesKey, id) // ended earlier; its tidy-up was lost
		}
	}
	return expired, nil
}

// pruneCopies drops the copies of records and owners this replica keeps past their time,
// so that the memory of a busy minute goes back once it is over (BenchmarkSoak: about 16
// MB of copies after 30,000 flows, which stayed while nothing was written).
func (s *Store) pruneCopies() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.Prune(now)
	s.owners.Prune(now)
}

func (s *Store) expire(ctx context.Context, id string) (*Elicitation, bool, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return s.expireIfOverdue(ctx, uk, id)
}

// trimInterval is how often a replica trims the listing indexes (Index.Trim).
const trimInterval = 5 * time.Minute

// RunSweeper calls Sweep every interval and Index.Trim every trimInterval until ctx ends,
// and meanwhile adds the elicitations written before the listing indexes existed to them
// (Index.AddExisting). On a Redis Cluster it also sends the replica's queued index writes every
// second (writeIndex), and once more when ctx ends. It returns once all of that has
// stopped.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	if s.cluster {
		wg.Go(func() { s.indexes.run(ctx, s.rdb, s.log) })
	}
	wg.Go(func() {
		if did, err := s.Index().AddExisting(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "indexing existing elicitations failed; the next start tries again", "err", err)
		} else if did {
			s.log.InfoContext(ctx, "existing elicitations indexed for listing")
		}
	})
	wg.Go(func() {
		every.Run(ctx, trimInterval, func(ctx context.Context) {
			if _, err := s.Index().Trim(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "index trim failed", "err", err)
			}
		})
	})
	every.Run(ctx, interval, func(ctx context.Context) {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep failed", "err", err)
		}
	})
	wg.Wait()
}

// Ping checks that Redis answers, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping Redis: %w", err)
	}
	return nil
}
