package flow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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
	// Webhooks reports whether a delegating service has a webhook, to which the step that
	// ends each of its flows queues a delivery (webhooks.go). Nil: no service has one.
	Webhooks func(service string) bool
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
	webhooks  func(service string) bool
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
	s := &Store{rdb: rdb, now: opts.Now, retention: opts.Retention, log: opts.Logger, counters: opts.Counters, ids: ids, webhooks: opts.Webhooks,
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
	// Service is the delegating service that asks (empty for urlflow's own tools);
	// Releasable, whether it may receive the credential itself (Elicitation.Releasable).
	Service    string
	Releasable bool
	Purpose    string
	Replace    bool
	Replaced   *Replaced
	Scopes     []string
	Client     state.ClientInfo
	SessionID  string
	Replica    string
	// TTL is the time from creation to the deadline.
	TTL time.Duration
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
	s.created(ctx, e)
	return e, true, nil
}

// created logs and counts the creation of e, and remembers it as written.
func (s *Store) created(ctx context.Context, e *Elicitation) {
	s.seeWritten(e)
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
		ID: id, User: n.User, Kind: n.Kind, Target: n.Target, Service: n.Service, Releasable: n.Releasable, State: Pending,
		Purpose: n.Purpose, Replace: n.Replace, Replaced: n.Replaced, Scopes: n.Scopes, Client: n.Client, SessionID: n.SessionID,
		Replica: n.Replica, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(n.TTL),
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
	return s.queueServiceEvent(ctx, b, e, Created, "")
}

// keep is how long e's keys live from now.
func (s *Store) keep(e *Elicitation) time.Duration {
	return e.ExpiresAt.Sub(s.now()) + s.retention
}

// writeRecord queues the write of e, one revision on from the record it was read as.
func (s *Store) writeRecord(ctx context.Context, p redis.Pipeliner, e *Elicitation) error {
	e.Revision++
	doc, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode elicitation %s: %w", e.ID, err)
	}
	p.Set(ctx, elicitationKey(e.User.Key(), e.ID), doc, s.keep(e))
	return nil
}

// userKeyOf returns the user key of elicitation id: opened from the ID, or for an ID of
// the legacy form remembered or read from the index.
func (s *Store) userKeyOf(ctx context.Context, id string) (string, error) {
	if uk, ok := s.ids.userKey(id); ok {
		return uk, nil
	}
	if !legacyIDPattern.MatchString(id) {
		return "", state.ErrNotFound
	}
	s.mu.Lock()
	uk, ok := s.owners.Get(id, s.now())
	s.mu.Unlock()
	if ok {
		return uk, nil
	}
	uk, err := s.rdb.Get(ctx, indexKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", state.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("look up elicitation %s: %w", id, err)
	}
	s.rememberOwner(id, uk)
	return uk, nil
}

// rememberOwner notes that elicitation id is user key uk's.
func (s *Store) rememberOwner(id, uk string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners.Set(id, uk, now.Add(ownersTTL), now)
}

// load reads elicitation id of user key uk, and remembers it as seen.
func (s *Store) load(ctx context.Context, uk, id string) (*Elicitation, error) {
	e, doc, err := decodeRecord(id, s.rdb.Get(ctx, elicitationKey(uk, id)))
	if err == nil {
		s.see(e, doc)
	}
	return e, err
}

// seenRecordEntry is a record as this replica last saw it: as stored, and decoded.
type seenRecordEntry struct {
	doc []byte
	e   Elicitation
}

// see remembers e, stored as doc, as the record of its elicitation as this replica just
// read or wrote it, unless the copy kept is of a later revision: a read that was on its way
// while this replica wrote the record, or the answer of a step that wrote before another
// step whose answer came first, brings an older record, which must not replace the newer
// copy. (An older copy once sent a browser that had moved a flow on back to its consent
// page.) Records of revision zero, written before revisions, replace each other.
func (s *Store) see(e *Elicitation, doc []byte) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.seen.Get(e.ID, now); ok && e.Revision <= cur.e.Revision && cur.e.Revision > 0 {
		return
	}
	s.seen.Set(e.ID, seenRecordEntry{doc: doc, e: *e}, now.Add(seenTTL), now)
}

// waitEnding waits, when this replica is writing a transition that ends elicitation id,
// until its outcome is in seen: its script's notice can arrive before its answer.
func (s *Store) waitEnding(ctx context.Context, id string) error {
	s.mu.Lock()
	ending := s.ending[id]
	s.mu.Unlock()
	if ending == nil {
		return nil
	}
	select {
	case <-ending:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginEnding notes that this replica is writing a transition that ends elicitation id,
// and returns the function to call once its outcome is in seen.
func (s *Store) beginEnding(id string) func() {
	ch := make(chan struct{})
	s.mu.Lock()
	s.ending[id] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.ending[id] == ch {
			delete(s.ending, id)
		}
		s.mu.Unlock()
		close(ch)
	}
}

// seeWritten remembers e as just written (writeRecord writes the same bytes).
func (s *Store) seeWritten(e *Elicitation) {
	if doc, err := json.Marshal(e); err == nil {
		s.see(e, doc)
	}
}

// seenRecord returns the record of elicitation id as this replica read or wrote it in the
// last two minutes, if it did; the step that uses it must check that it still reads so
// (runIf). The record is a copy of the one kept, which shares what its pointers point to:
// change a field, never what a pointer field points to.
func (s *Store) seenRecord(id string) (*Elicitation, []byte, bool) {
	s.mu.Lock()
	entry, ok := s.seen.Get(id, s.now())
	s.mu.Unlock()
	if !ok {
		return nil, nil, false
	}
	e := entry.e
	return &e, entry.doc, true
}

// decodeRecord decodes the answer of a GET of elicitation id's record, and returns it with
// the record as stored, which a step that changes it compares against (runIf).
func decodeRecord(id string, get *redis.StringCmd) (*Elicitation, []byte, error) {
	doc, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil, state.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	e, err := decodeDoc(id, doc)
	return e, doc, err
}

func decodeDoc(id string, doc []byte) (*Elicitation, error) {
	var e Elicitation
	if err := json.Unmarshal(doc, &e); err != nil {
		return nil, fmt.Errorf("decode elicitation %s: %w", id, err)
	}
	return &e, nil
}

// read reads elicitation id of user key uk as stored and, when other is not empty, whether
// the key other exists, in one round trip.
func (s *Store) read(ctx context.Context, uk, id, other string) (*Elicitation, []byte, bool, error) {
	var get *redis.StringCmd
	var exists *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, elicitationKey(uk, id))
		if other != "" {
			exists = p.Exists(ctx, other)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, false, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	e, doc, err := decodeRecord(id, get)
	if err != nil {
		return nil, nil, false, err
	}
	s.see(e, doc)
	return e, doc, exists != nil && exists.Val() > 0, nil
}

// readForChange is read for an attempt of a step that changes elicitation id, starting
// from the record as from says when it is not nil (as this replica last saw it, or as the
// step's script answered when it found the record changed), without a round trip; whether
// other exists is then guessed from the record (the credential a flow replaces exists).
// The step's script checks both.
func (s *Store) readForChange(ctx context.Context, uk, id, other string, from []byte) (*Elicitation, []byte, bool, error) {
	if from != nil {
		if e, doc, ok := s.seenRecord(id); ok && bytes.Equal(doc, from) {
			return e, doc, other != "" && e.Replace, nil // decoded already
		}
		if e, err := decodeDoc(id, from); err == nil {
			return e, from, other != "" && e.Replace, nil
		}
	}
	return s.read(ctx, uk, id, other)
}

// seenDoc returns the record of elicitation id as this replica last saw it, or nil.
func (s *Store) seenDoc(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if entry, ok := s.seen.Get(id, s.now()); ok {
		return entry.doc
	}
	return nil
}

// Get returns elicitation id. A running elicitation whose deadline has passed is moved to
// expired first, so a reader never sees a flow running past its deadline.
func (s *Store) Get(ctx context.Context, id string) (*Elicitation, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	e, _, err := s.expireIfOverdue(ctx, uk, id)
	return e, err
}

// Ended returns elicitation id as Get does, or the copy this replica read or wrote in the
// last two minutes when that copy says it has ended: an ended state never changes again.
func (s *Store) Ended(ctx context.Context, id string) (*Elicitation, error) {
	return s.getUnlessSeen(ctx, id, func(e *Elicitation) bool { return e.State.Terminal() })
}

// getUnlessSeen returns the copy of elicitation id this replica saw in the last two
// minutes when enough says it will do, and otherwise reads it as Get does. A transition
// this replica is writing that ends it is waited for first: its script's notice, which
// callers act on, can arrive before its answer.
func (s *Store) getUnlessSeen(ctx context.Context, id string, enough func(*Elicitation) bool) (*Elicitation, error) {
	if err := s.waitEnding(ctx, id); err != nil {
		return nil, err
	}
	if e, _, ok := s.seenRecord(id); ok && enough(e) {
		return e, nil
	}
	return s.Get(ctx, id)
}

// Seen returns elicitation id as this replica last read or wrote it in the last two
// minutes, if it did: a hint that may be stale, for a step whose write checks it (Apply
// starts from the same copy).
func (s *Store) Seen(id string) (*Elicitation, bool) {
	e, _, ok := s.seenRecord(id)
	return e, ok
}

// ForDelivery returns elicitation id for an attempt to deliver its completion notification:
// the copy this replica saw in the last two minutes, without a round trip, when that copy says
// the flow has ended (its state and session never change again) and the notification is
// owed; otherwise the record, as Get reads it. A copy older than a delivery recorded
// elsewhere can make the notification go out twice (clients ignore the second), never
// not at all.
func (s *Store) ForDelivery(ctx context.Context, id string) (*Elicitation, error) {
	return s.getUnlessSeen(ctx, id, (*Elicitation).NotificationOwed)
}

// GetAlong returns elicitation id as Get does, and the value of the key other (nil if it
// does not exist), read together: one MGET when other is in the user's slot of the ID (a
// signed-in browser session of the same user), else one round trip of two GETs. The value
// of other is returned also when the elicitation does not exist (state.ErrNotFound).
func (s *Store) GetAlong(ctx context.Context, id, other string) (*Elicitation, []byte, error) {
	uk, err := s.userKeyOf(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		val, err := s.rdb.Get(ctx, other).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil, nil, state.ErrNotFound
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", other, err)
		}
		return nil, val, state.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	var record, val *redis.StringCmd
	var both *redis.SliceCmd
	key := elicitationKey(uk, id)
	if strings.HasPrefix(other, state.UserTag(uk)) {
		both = s.rdb.MGet(ctx, key, other)
		err = both.Err()
	} else {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			record, val = p.Get(ctx, key), p.Get(ctx, other)
			return nil
		})
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	var doc, otherVal []byte
	if both != nil {
		vals := both.Val()
		if str, ok := vals[0].(string); ok {
			doc = []byte(str)
		}
		if str, ok := vals[1].(string); ok {
			otherVal = []byte(str)
		}
	} else {
		for _, c := range []*redis.StringCmd{record, val} {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, nil, fmt.Errorf("read elicitation %s: %w", id, err)
			}
		}
		doc, otherVal = []byte(record.Val()), []byte(val.Val())
		if record.Err() != nil {
			doc = nil
		}
		if val.Err() != nil {
			otherVal = nil
		}
	}
	if doc == nil {
		return nil, otherVal, state.ErrNotFound
	}
	e, err := decodeDoc(id, doc)
	if err != nil {
		return nil, otherVal, err
	}
	s.see(e, doc)
	e, _, err = s.current(ctx, e)
	return e, otherVal, err
}

// expireIfOverdue reads elicitation id and expires it if its deadline has passed. It
// reports whether this call expired it.
func (s *Store) expireIfOverdue(ctx context.Context, userKey, id string) (*Elicitation, bool, error) {
	e, err := s.load(ctx, userKey, id)
	if err != nil {
		return nil, false, err
	}
	return s.current(ctx, e)
}

// current returns e, or e moved to expired when its deadline has passed; it reports whether
// this call expired it.
func (s *Store) current(ctx context.Context, e *Elicitation) (*Elicitation, bool, error) {
	if !e.Overdue(s.now()) {
		return e, false, nil
	}
	c, err := s.Apply(ctx, e.ID, DeadlinePassed, state.ActorSystem, "deadline passed")
	if err != nil {
		return nil, false, err
	}
	return c.Elicitation, c.Changed(), nil
}

// History returns the history of elicitation id, oldest first: at most HistoryFirst + 1 +
// HistoryNewest entries, some of which may stand for several events (Entry).
func (s *Store) History(ctx context.Context, id string) ([]Entry, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	lines, err := s.rdb.LRange(ctx, historyKey(uk, id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read history of %s: %w", id, err)
	}
	entries := make([]Entry, 0, len(lines))
	for _, l := range lines {
		var en Entry
		if err := json.Unmarshal([]byte(l), &en); err != nil {
			return nil, fmt.Errorf("decode history of %s: %w", id, err)
		}
		entries = append(entries, en)
	}
	return entries, nil
}

// Change is the outcome of Apply.
type Change struct {
	// Elicitation is the record after the event.
	Elicitation *Elicitation
	// From and To are the states before and after; equal when nothing changed.
	From, To State
}

// Changed reports whether the event changed the state.
func (c Change) Changed() bool { return c.From != c.To }

// An ApplyOption adds work to Apply that happens atomically with the transition.
type ApplyOption func(*applyConfig)

type applyConfig struct {
	by         string
	credential *credentials.Credential
	replaced   bool
	same       []check
}

// ErrStale is returned by Apply with IfStill when the key no longer holds the value the
// caller started from: nothing was written, and the caller starts again from Redis.
var ErrStale = errors.New("what the step started from has changed")

// IfStill makes the step only if key (in the elicitation's user's slot) still holds value,
// which the caller read earlier (a browser session): otherwise Apply writes nothing and
// returns ErrStale.
func IfStill(key string, value []byte) ApplyOption {
	return func(a *applyConfig) { a.same = append(a.same, check{key: key, value: value}) }
}

// By names who acts (an operator) in the history entry of the event.
func By(name string) ApplyOption {
	return func(a *applyConfig) { a.by = name }
}

// WithCredential stores c for the elicitation's user in the same atomic step that moves
// the elicitation to complete. If the event does not complete the elicitation (it ended
// meanwhile), c is not stored.
func WithCredential(c *credentials.Credential) ApplyOption {
	return func(a *applyConfig) { a.credential = c }
}

// Apply records event ev on elicitation id and moves it as the state table says, in one
// atomic step: of two racing events exactly one changes the state, and the other is applied
// to the new state (usually changing nothing). Every event, also one that changes nothing,
// is recorded in the history in the same step (appendHistory: an event like the newest
// entry is counted on it, and a long history drops entries from its middle). An overdue
// elicitation is expired before ev is applied.
// A cell marked "cannot happen" is recorded and returns ErrImpossible.
func (s *Store) Apply(ctx context.Context, id string, ev Event, actor state.Actor, reason string, opts ...ApplyOption) (Change, error) {
	var cfg applyConfig
	for _, o := range opts {
		o(&cfg)
	}
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return Change{}, err
	}
	other := ""
	if cfg.credential != nil {
		other = credentials.Key(uk, cfg.credential.Name)
	}
	from := s.seenDoc(id)
	for range maxCASAttempts {
		e, doc, exists, err := s.readForChange(ctx, uk, id, other, from)
		if err != nil {
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		}
		if ev == DeadlinePassed && !e.Overdue(s.now()) {
			// Another reader expired it first, or the deadline has not come: no event.
			return Change{Elicitation: e, From: e.State, To: e.State}, nil
		}
		checks := cfg.same
		if cfg.credential != nil {
			cfg.replaced = exists
			checks = append(slices.Clip(checks), check{key: other, exists: exists})
		}
		change, applyErr := s.apply(e, ev, actor, reason)
		b := s.newBatch()
		if err := s.queueChange(ctx, b, change, ev, actor, reason, cfg); err != nil {
			b.Discard()
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		}
		if change.Changed() {
			if err := s.queueNotice(ctx, b, change.Elicitation, NoticeState); err != nil {
				b.Discard()
				return Change{}, err
			}
			if change.To.Terminal() {
				s.writeIndex(ctx, b, indexWrite{key: deadlinesKey, member: id, remove: true})
			}
		}
		done := func() {}
		if change.To.Terminal() && change.Changed() {
			done = s.beginEnding(id)
		}
		ran, current, err := s.runIf(ctx, elicitationKey(uk, id), doc, checks, b)
		from = current
		if ran == ranWrote && change.Changed() {
			s.seeWritten(change.Elicitation)
		}
		done()
		switch {
		case err != nil:
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		case ran == ranStale:
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, ErrStale)
		case ran != ranWrote:
			continue // changed since it was read: read it again
		}
		s.writeAfterOrLog(ctx, b, id)
		s.logChange(ctx, change, ev, actor)
		return change, applyErr
	}
	return Change{}, fmt.Errorf("apply %s to elicitation %s: too much contention", ev, id)
}

// apply computes the change ev makes to e (which it modifies) without writing anything.
func (s *Store) apply(e *Elicitation, ev Event, actor state.Actor, reason string) (Change, error) {
	from := e.State
	now := s.now().UTC()
	if e.Overdue(now) {
		e.State = Expired
	}
	to, err := Next(e.State, ev)
	e.State = to
	if e.State != from {
		e.UpdatedAt = now
		if e.State.Terminal() && e.SessionID != "" {
			e.Delivery.QueuedAt = &now
		}
	}
	return Change{Elicitation: e, From: from, To: e.State}, err
}

// queueChange queues the writes of change in the user's slot: the record when the state
// changed, the history entries, the credential, and the undelivered mark of a flow that
// ended.
func (s *Store) queueChange(ctx context.Context, p *batch, c Change, ev Event, actor state.Actor, reason string, cfg applyConfig) error {
	e := c.Elicitation
	now := e.UpdatedAt
	if !c.Changed() {
		now = s.now().UTC()
	}
	from := c.From
	var transition *Entry // the entry that changed the state, when one did
	if from != Expired && e.State == Expired && ev != DeadlinePassed {
		// The deadline had passed before ev arrived: record the expiry first.
		deadline := Entry{At: now, Event: DeadlinePassed, Actor: state.ActorSystem, From: from, To: Expired, Reason: "deadline passed"}
		if err := s.appendHistory(ctx, p, e, deadline); err != nil {
			return err
		}
		from, transition = Expired, &deadline
	}
	entry := Entry{At: now, Event: ev, Actor: actor, From: from, To: e.State, Reason: reason, By: cfg.by}
	if transition == nil {
		transition = &entry
	}
	if err := s.appendHistory(ctx, p, e, entry); err != nil {
		return err
	}
	if !c.Changed() {
		return nil
	}
	if err := s.writeRecord(ctx, p, e); err != nil {
		return err
	}
	if err := s.queueServiceEvent(ctx, p, e, ev, c.From); err != nil {
		return err
	}
	s.queueTransitionAudit(ctx, p, e, *transition)
	if cfg.credential != nil && e.State == Complete {
		if err := credentials.Queue(ctx, p, e.User, cfg.credential); err != nil {
			return err
		}
		s.queueCredentialAudit(ctx, p, e, cfg.replaced)
	}
	if e.State.Terminal() {
		if err := s.queueWebhook(ctx, p, e); err != nil {
			return err
		}
		// A running elicitation is reused by the next ask (Open); an ended one is not.
		p.Do(ctx, delIfOp, openKey(e.User.Key(), e.Kind, e.CredentialName(), e.SessionID), e.ID)
	}
	if e.State.Terminal() && e.SessionID != "" {
		uk := e.User.Key()
		p.SAdd(ctx, undeliveredKey(uk, e.SessionID), e.ID)
		p.Expire(ctx, undeliveredKey(uk, e.SessionID), s.retention)
		s.queueOwed(ctx, p, e)
	}
	return nil
}

// logChange logs and counts a change.
func (s *Store) logChange(ctx context.Context, c Change, ev Event, actor state.Actor) {
	e := c.Elicitation
	if !c.Changed() {
		s.log.DebugContext(ctx, "elicitation event without change", "elicitation_id", e.ID,
			"event", ev, "actor", actor, "state", e.State)
		return
	}
	s.log.InfoContext(ctx, "elicitation transition", "elicitation_id", e.ID, "user", e.User.Key(),
		"event", ev, "actor", actor, "from", c.From, "to", c.To)
	if c.To.Terminal() {
		s.metrics.FlowEnded(string(e.Kind), string(c.To), e.UpdatedAt.Sub(e.CreatedAt))
	}
	s.counters.Add(ctx, "urlflow_elicitation_transitions_total", "kind", string(e.Kind), "to", string(c.To))
}

// update applies fn to elicitation id under the same optimistic lock as Apply, for changes
// that are not state transitions (delivery records, requeues). fn modifies e and may queue
// more writes in the user's slot on p; the record is written unless fn returns write false,
// and entry, if not nil, is recorded in the history. A written record is announced with a
// notice of kind what, unless what is empty.
func (s *Store) update(ctx context.Context, id string, what NoticeKind, fn func(e *Elicitation, b *batch) (write bool, entry *Entry, err error)) (*Elicitation, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	from := s.seenDoc(id)
	for range maxCASAttempts {
		e, doc, _, err := s.readForChange(ctx, uk, id, "", from)
		if err != nil {
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		b := s.newBatch()
		write, entry, err := fn(e, b)
		if err == nil && write {
			err = s.writeRecord(ctx, b, e)
		}
		if err == nil && write && entry != nil {
			err = s.appendHistory(ctx, b, e, *entry)
		}
		if err == nil && write && what != "" {
			err = s.queueNotice(ctx, b, e, what)
		}
		if err != nil {
			b.Discard()
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		ran, current, err := s.runIf(ctx, elicitationKey(uk, id), doc, nil, b)
		wrote := ran == ranWrote
		from = current
		if err != nil {
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		if wrote {
			if write {
				s.seeWritten(e)
			}
			s.writeAfterOrLog(ctx, b, id)
			return e, nil
		}
	}
	return nil, fmt.Errorf("update elicitation %s: too much contention", id)
}

// Open returns the running elicitation of n's user for n's kind, service and target in n's MCP
// session (or outside any session), or creates one as Create does; created says which. The
// open key of an elicitation is deleted when it ends, so in the usual case (none running)
// it costs one script that creates the record if that key still does not exist.
func (s *Store) Open(ctx context.Context, n NewElicitation) (e *Elicitation, created bool, err error) {
	name := credentials.Name(n.Service, n.Target)
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
	e, err := s.Get(ctx, id)
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
	if _, err := s.Get(ctx, id); err != nil { // expires it first if overdue
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
			User: old.User, Kind: old.Kind, Target: old.Target, Service: old.Service, Releasable: old.Releasable, Purpose: old.Purpose,
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
		s.seeWritten(old)
		if err := s.writeAfter(ctx, b); err != nil {
			return nil, fmt.Errorf("write the service event of elicitation %s: %w", next.ID, err)
		}
		s.log.InfoContext(ctx, "elicitation retried", "elicitation_id", next.ID, "retry_of", id, "user", uk)
		return next, nil
	}
	return nil, fmt.Errorf("retry elicitation %s: too much contention", id)
}

// Sweep expires every running elicitation whose deadline has passed, so that deadlines
// hold when nobody reads. It returns how many it expired.
func (s *Store) Sweep(ctx context.Context) (int, error) {
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

func (s *Store) expire(ctx context.Context, id string) (*Elicitation, bool, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return s.expireIfOverdue(ctx, uk, id)
}

// trimInterval is how often a replica trims the listing indexes (TrimIndexes).
const trimInterval = 5 * time.Minute

// RunSweeper calls Sweep every interval and TrimIndexes every trimInterval until ctx ends,
// and meanwhile adds the elicitations written before the listing indexes existed to them
// (IndexExisting). On a Redis Cluster it also sends the replica's queued index writes every
// second (writeIndex), and once more when ctx ends. It returns once all of that has
// stopped.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	if s.cluster {
		wg.Go(func() { s.indexes.run(ctx, s.rdb, s.log) })
	}
	wg.Go(func() {
		if did, err := s.IndexExisting(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "indexing existing elicitations failed; the next start tries again", "err", err)
		} else if did {
			s.log.InfoContext(ctx, "existing elicitations indexed for listing")
		}
	})
	wg.Go(func() {
		every.Run(ctx, trimInterval, func(ctx context.Context) {
			if _, err := s.TrimIndexes(ctx); err != nil && ctx.Err() == nil {
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
