// Package credentials keeps users' stored secrets and third-party grants in Redis, sealed
// by package vault, with each user's audit log of what was stored, replaced and deleted,
// and the locks under which a grant's tokens are refreshed.
//
// The one idea to hold: a credential is stored by the atomic step that completes its
// elicitation (package flow calls Queue inside that step); everything here afterwards only
// reads, touches, replaces or deletes it, and never shows a value.
package credentials

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/vault"
)

// Credential is a stored secret or grant of one user, sealed by package vault. Only the
// metadata is ever shown; the value stays sealed until a tool uses it.
type Credential struct {
	Name          string     `json:"name"`
	Kind          state.Kind `json:"kind"`
	ElicitationID string     `json:"elicitationId"`
	StoredAt      time.Time  `json:"storedAt"`
	// VerifiedAt is when the secret passed its slot's check with the API; nil when the slot
	// has no check.
	VerifiedAt *time.Time `json:"verifiedAt,omitempty"`
	// For a third-party connection (kind oauth): the account, the granted scopes, when the
	// tokens were last refreshed, and whether the provider stopped honouring them.
	Account        string     `json:"account,omitempty"`
	Scopes         []string   `json:"scopes,omitempty"`
	RefreshedAt    *time.Time `json:"refreshedAt,omitempty"`
	NeedsReconnect bool       `json:"needsReconnect,omitempty"`
	// LockedAt is when urlflow locked the secret because a tool's request carried it, and
	// LockReason says how; nil while it is usable. Storing the secret again (a new
	// elicitation for its slot) unlocks it.
	LockedAt   *time.Time `json:"lockedAt,omitempty"`
	LockReason string     `json:"lockReason,omitempty"`
	// Releasable is set when the user provided it on pages that said its delegating
	// service may receive it itself: only then may the service (POST /api/v1/release).
	Releasable bool `json:"releasable,omitempty"`
	// Offline is set when the user provided it on pages that said its delegating service
	// may use it while the user is not in a session: the service may then name the user
	// by reference alone (WithdrawOffline ends that).
	Offline bool `json:"offline,omitempty"`
	// Call and Metadata are the delegating service's own, from the create request of the
	// flow that stored it (flow.Elicitation): in its events and answers, never a user's.
	Call     string         `json:"call,omitempty"`
	Metadata state.Metadata `json:"metadata,omitempty"`
	// Parameters are what the user entered with a secret for the parameters of its slot's
	// base URL (upstream.API.Bind): a subdomain, say, never a secret.
	Parameters map[string]string `json:"parameters,omitempty"`
	Sealed     vault.Sealed      `json:"sealed"`
}

// Covers reports whether c was granted every scope of want.
func (c *Credential) Covers(want []string) bool {
	for _, w := range want {
		if !slices.Contains(c.Scopes, w) {
			return false
		}
	}
	return true
}

// Locked reports whether the credential is locked until its user enters it again; a nil
// credential is not.
func (c *Credential) Locked() bool { return c != nil && c.LockedAt != nil }

// Connection describes c to its owner, without when it was last used or whether it is
// weak, which c does not know.
func (c *Credential) Connection() Connection {
	service, target := SplitName(c.Name)
	if service == OwnService {
		service = ""
	}
	return Connection{Name: target, Label: LabelOf(c.Name), Service: service, Kind: c.Kind, StoredAt: c.StoredAt, VerifiedAt: c.VerifiedAt,
		Account: c.Account, Scopes: c.Scopes, RefreshedAt: c.RefreshedAt, NeedsReconnect: c.NeedsReconnect,
		LockedAt: c.LockedAt, LockReason: c.LockReason, Offline: c.Offline, Parameters: c.Parameters}
}

// Connection describes a stored credential to its owner: never its value.
type Connection struct {
	// Name is the slot or provider; Service the delegating service that holds it, empty
	// for urlflow's own tools.
	Name string `json:"name"`
	// Label is the account label among several of one target ("" for the default account).
	Label          string     `json:"label,omitempty"`
	Service        string     `json:"service,omitempty"`
	Kind           state.Kind `json:"kind"`
	StoredAt       time.Time  `json:"storedAt"`
	VerifiedAt     *time.Time `json:"verifiedAt,omitempty"`
	LastUsedAt     *time.Time `json:"lastUsedAt,omitempty"`
	Account        string     `json:"account,omitempty"`
	Scopes         []string   `json:"scopes,omitempty"`
	RefreshedAt    *time.Time `json:"refreshedAt,omitempty"`
	NeedsReconnect bool       `json:"needsReconnect,omitempty"`
	LockedAt       *time.Time `json:"lockedAt,omitempty"`
	LockReason     string     `json:"lockReason,omitempty"`
	// Offline: its service may use it while the user is not in a session, as the user
	// agreed on urlflow's pages (withdrawn on /connections).
	Offline bool `json:"offline,omitempty"`
	// Weak marks a secret stored before its slot had its strength minimum: it works, and
	// should be replaced. Package credentials cannot tell (it never opens a value): the
	// caller of Connections judges it.
	Weak bool `json:"weak,omitempty"`
	// Parameters are what the user entered with a secret for its slot's address.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// Store keeps credentials in Redis.
type Store struct {
	rdb        redis.UniversalClient
	now        func() time.Time
	log        *slog.Logger
	audit      *audit.Trail
	lifecycles []Lifecycle
}

// Options configure a Store.
type Options struct {
	// Now returns the current time; time.Now if nil.
	Now func() time.Time
	// Logger receives what the store logs; slog.Default() if nil.
	Logger *slog.Logger
	// Audit receives the credentials released, refreshed, deleted and locked (the step that
	// completes an elicitation audits the one it stores); nothing is audited if nil.
	Audit *audit.Trail
	// Lifecycles hear of the changes of the credentials of delegating services that the
	// Store makes (lifecycle.go).
	Lifecycles []Lifecycle
}

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts Options) *Store {
	s := &Store{rdb: rdb, now: opts.Now, log: opts.Logger, audit: opts.Audit, lifecycles: opts.Lifecycles}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// OwnService is the service name of urlflow's own MCP tools (package services).
const OwnService = "urlflow"

// Name is the name under which the credential of target (a slot or provider) collected for
// service is stored: target itself for urlflow's own tools, so that credentials stored
// before delegating services existed are urlflow's without being moved; service/target
// otherwise. Names of slots, providers and services never hold '/', so the two never meet,
// and no service reaches another's credentials.
func Name(service, target string) string {
	if service == "" || service == OwnService {
		return target
	}
	return service + "/" + target
}

// SplitName undoes Name (and Labeled): the service (OwnService for a name without '/')
// and the target, without its account label.
func SplitName(name string) (service, target string) {
	name, _, _ = strings.Cut(name, labelSeparator)
	if s, t, ok := strings.Cut(name, "/"); ok {
		return s, t
	}
	return OwnService, name
}

// A delegating service may hold several credentials of one target for one user, told
// apart by an account label ("work", "personal"): the name of a labelled one is its Name,
// labelSeparator and the label. The credential without a label is the default account, so
// every credential stored before labels existed is the default account of its target.
const labelSeparator = "@"

// labelPattern is the form of an account label.
var labelPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// LabelRule says what CheckLabel wants.
const LabelRule = "1 to 32 of a-z 0-9 _ -, starting with a letter or digit"

// CheckLabel returns an error unless label is empty (the default account) or an account
// label of the documented form.
func CheckLabel(label string) error {
	if label != "" && !labelPattern.MatchString(label) {
		return fmt.Errorf("label: want %s, or none for the default account", LabelRule)
	}
	return nil
}

// Labeled is the name of the credential name of the account label (name itself for the
// default account, label "").
func Labeled(name, label string) string {
	if label == "" {
		return name
	}
	return name + labelSeparator + label
}

// SplitTargetLabel undoes Labeled on a target: the target and its account label.
func SplitTargetLabel(labeled string) (target, label string) {
	target, label, _ = strings.Cut(labeled, labelSeparator)
	return target, label
}

// LabelOf is the account label of the credential name ("" for the default account).
func LabelOf(name string) string {
	_, label, _ := strings.Cut(name, labelSeparator)
	return label
}

// The Redis keys of credentials, all in their user's hash tag (docs/design.md).

// Key returns the key of credential name of the user whose key is userKey (state.User.Key):
// the step that stores a credential watches it.
func Key(userKey, name string) string { return state.UserTag(userKey) + "c:" + name }

func namesKey(userKey string) string { return state.UserTag(userKey) + "cs" }

// useKey names the hash of credential name → time of last use.
func useKey(userKey string) string { return state.UserTag(userKey) + "cu" }

// lockKey names the lock held while one credential is refreshed.
func lockKey(userKey, name string) string { return state.UserTag(userKey) + "lock:" + name }

// audited records event about user's credential name in the audit trail.
func (s *Store) audited(ctx context.Context, user state.User, event, name string, actor state.Actor, reason string) {
	ev := audit.Event{At: s.now().UTC(), Event: event, Credential: name, Actor: actor, Reason: reason}
	if service, _ := SplitName(name); service != OwnService {
		ev.Service = service
	}
	s.audit.Record(ctx, ev.About(user))
}

// Queue queues on p the writes that store c for user. Package flow calls it inside the
// atomic step that completes c's elicitation, which audits it, with QueueIndexing.
func Queue(ctx context.Context, p redis.Pipeliner, user state.User, c *Credential) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode credential %s: %w", c.Name, err)
	}
	uk := user.Key()
	p.Set(ctx, Key(uk, c.Name), doc, 0)
	p.SAdd(ctx, namesKey(uk), c.Name)
	p.HDel(ctx, useKey(uk), c.Name)
	return nil
}

// Get returns user's credential name, or state.ErrNotFound.
func (s *Store) Get(ctx context.Context, user state.User, name string) (*Credential, error) {
	var cred Credential
	if err := state.DecodeJSON(s.rdb.Get(ctx, Key(user.Key(), name)), "credential "+name, &cred); err != nil {
		return nil, err
	}
	return &cred, nil
}

// Names returns the names of user's credentials, sorted.
func (s *Store) Names(ctx context.Context, user state.User) ([]string, error) {
	names, err := s.rdb.SMembers(ctx, namesKey(user.Key())).Result()
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// Connections describes user's credentials, sorted by name: when each was stored,
// verified and last used, and weak when weak (nil for none) says so of the credential it
// has just read. It never opens a value itself.
func (s *Store) Connections(ctx context.Context, user state.User, weak func(*Credential) bool) ([]Connection, error) {
	names, err := s.Names(ctx, user)
	if err != nil {
		return nil, err
	}
	used, err := s.rdb.HGetAll(ctx, useKey(user.Key())).Result()
	if err != nil {
		return nil, fmt.Errorf("read credential use: %w", err)
	}
	out := make([]Connection, 0, len(names))
	for _, name := range names {
		c, err := s.Get(ctx, user, name)
		if errors.Is(err, state.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		conn := c.Connection()
		conn.Weak = weak != nil && weak(c)
		conn.LastUsedAt = useTime(used[name])
		out = append(out, conn)
	}
	return out, nil
}

// LastUsed returns when user's credential name was last used, nil when it has not been
// since it was stored.
func (s *Store) LastUsed(ctx context.Context, user state.User, name string) (*time.Time, error) {
	v, err := s.rdb.HGet(ctx, useKey(user.Key()), name).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read use of credential %s: %w", name, err)
	}
	return useTime(v), nil
}

// useTime reads a time of use as Touch records it: nil when there is none, or none that
// reads (a use it cannot read is none).
func useTime(v string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil
	}
	return &t
}

// Released records in the audit trail that user's credential c, as the caller read it, was
// given to actor, for reason, and that it was used now; its service hears of it.
func (s *Store) Released(ctx context.Context, user state.User, c *Credential, actor state.Actor, reason string) error {
	if err := s.Touch(ctx, user, c.Name); err != nil {
		return err
	}
	s.audited(ctx, user, audit.CredentialRelease, c.Name, actor, reason)
	s.tell(ctx, Change{Type: ChangeReleased, User: user, Credential: c, At: s.now().UTC(), Actor: actor, Reason: reason})
	return nil
}

// Touch records that user's credential name was used now.
func (s *Store) Touch(ctx context.Context, user state.User, name string) error {
	err := s.rdb.HSet(ctx, useKey(user.Key()), name, s.now().UTC().Format(time.RFC3339Nano)).Err()
	if err != nil {
		return fmt.Errorf("record use of credential %s: %w", name, err)
	}
	return nil
}

// Delete removes user's credential name and records it in the audit log with actor and
// reason. It reports whether there was one.
func (s *Store) Delete(ctx context.Context, user state.User, name string, actor state.Actor, reason string) (bool, error) {
	uk := user.Key()
	var del *redis.IntCmd
	var doc *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		doc = p.Get(ctx, Key(uk, name))
		del = p.Del(ctx, Key(uk, name))
		p.SRem(ctx, namesKey(uk), name)
		p.HDel(ctx, useKey(uk), name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("delete credential %s: %w", name, err)
	}
	s.settle(ctx, uk, name)
	if del.Val() == 0 {
		return false, nil
	}
	s.audited(ctx, user, audit.CredentialDeleted, name, actor, reason)
	s.log.InfoContext(ctx, "credential deleted", "user", uk, "credential", name, "actor", actor)
	var was Credential
	if err := state.DecodeJSON(doc, "credential "+name, &was); err != nil {
		s.log.WarnContext(ctx, "deleted credential unreadable: its service is not told", "user", uk, "credential", name, "err", err)
		return true, nil
	}
	s.tell(ctx, Change{Type: ChangeDeleted, User: user, Credential: &was, At: s.now().UTC(), Actor: actor, Reason: reason})
	return true, nil
}

// lockScript locks a credential if it is still the one its caller read: the same
// elicitation stored it. It sets lockedAt and lockReason in its document. It answers 1 if it locked, 0 if the credential is gone or was
// stored again meanwhile (a new value is not locked for what the old one did), and 2 if it
// was locked already.
var lockScript = redis.NewScript(`
local doc = redis.call("GET", KEYS[1])
if not doc then return 0 end
local c = cjson.decode(doc)
if c.elicitationId ~= ARGV[1] then return 0 end
if c.lockedAt then return 2 end
c.lockedAt = ARGV[2]
c.lockReason = ARGV[3]
redis.call("SET", KEYS[1], cjson.encode(c))
return 1`)

// Lock locks user's credential c until the user stores it again, recording reason in the
// credential and, with actor, in the audit trail. It locks nothing if the credential was
// deleted or stored again since c was read, and leaves a lock that is there already as it
// is. It reports whether c is locked now (by this call or before).
func (s *Store) Lock(ctx context.Context, user state.User, c *Credential, actor state.Actor, reason string) (bool, error) {
	now := s.now().UTC()
	uk := user.Key()
	n, err := lockScript.Run(ctx, s.rdb, []string{Key(uk, c.Name)}, c.ElicitationID, now.Format(time.RFC3339Nano), reason).Int()
	if err != nil {
		return false, fmt.Errorf("lock credential %s: %w", c.Name, err)
	}
	if n == 1 {
		s.audited(ctx, user, audit.CredentialLocked, c.Name, actor, reason)
		s.log.WarnContext(ctx, "credential locked", "user", uk, "credential", c.Name, "actor", actor, "reason", reason)
		locked := *c
		locked.LockedAt, locked.LockReason = &now, reason
		s.tell(ctx, Change{Type: ChangeLocked, User: user, Credential: &locked, At: now, Actor: actor, Reason: reason})
	}
	return n == 1 || n == 2, nil
}

// ErrStoredAgain is returned by Update when the credential it was to change was stored
// again (by another elicitation) or locked since it was read.
var ErrStoredAgain = errors.New("the credential was stored again or locked since it was read")

// maxUpdateAttempts bounds how often Update reads a credential again that another write
// (a reseal, say) changed between its read and its write.
const maxUpdateAttempts = 10

// Update stores what change makes of user's credential read (a refreshed token, a mark to
// connect again), keeping its audit history, if it is still that credential: it returns
// state.ErrNotFound if the credential was deleted meanwhile (a disconnect is not undone by
// a refresh that raced it), and ErrStoredAgain if it was stored again or locked (a new
// connection, or a lock, is not overwritten with what was made of the old one). change is
// applied to the stored credential as it is now, and the write is a compare-and-set on the
// document read, so a concurrent write of another field (a reseal) is kept too.
func (s *Store) Update(ctx context.Context, user state.User, read *Credential, change func(*Credential)) error {
	wasReconnect := false
	c, err := s.rewrite(ctx, user, read, func(c *Credential) {
		wasReconnect = c.NeedsReconnect
		change(c)
	})
	if err != nil {
		return err
	}
	s.audited(ctx, user, audit.CredentialRefresh, c.Name, state.ActorSystem, "")
	if c.NeedsReconnect && !wasReconnect {
		s.tell(ctx, Change{Type: ChangeReconnectRequired, User: user, Credential: c, At: s.now().UTC(),
			Actor: state.ActorSystem, Reason: "the provider no longer honours the connection"})
	}
	return nil
}

// WithdrawOffline ends the grant by which the service of user's credential name may use it
// while the user is away (Credential.Offline), as actor; it reports whether there was one.
// The service hears of it (ChangeOfflineWithdrawn), and it is in the audit trail.
func (s *Store) WithdrawOffline(ctx context.Context, user state.User, name string, actor state.Actor) (bool, error) {
	read, err := s.Get(ctx, user, name)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !read.Offline {
		return false, nil
	}
	c, err := s.rewrite(ctx, user, read, func(c *Credential) { c.Offline = false })
	if errors.Is(err, state.ErrNotFound) || errors.Is(err, ErrStoredAgain) {
		return false, nil // gone, or stored again (on pages that asked anew)
	}
	if err != nil {
		return false, err
	}
	const reason = "use while the user is away withdrawn"
	s.audited(ctx, user, audit.CredentialOfflineWithdrawn, name, actor, reason)
	s.tell(ctx, Change{Type: ChangeOfflineWithdrawn, User: user, Credential: c, At: s.now().UTC(), Actor: actor, Reason: reason})
	return true, nil
}

// rewrite writes what change makes of user's credential read, as Update says, and returns
// the credential as written.
func (s *Store) rewrite(ctx context.Context, user state.User, read *Credential, change func(*Credential)) (*Credential, error) {
	key := Key(user.Key(), read.Name)
	for range maxUpdateAttempts {
		doc, err := s.rdb.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return nil, state.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read credential %s: %w", read.Name, err)
		}
		var c Credential
		if err := json.Unmarshal([]byte(doc), &c); err != nil {
			return nil, fmt.Errorf("decode credential %s: %w", read.Name, err)
		}
		if c.ElicitationID != read.ElicitationID || (c.Locked() && !read.Locked()) {
			return nil, ErrStoredAgain
		}
		change(&c)
		written, err := s.compareAndSet(ctx, user, key, doc, &c)
		if err != nil {
			return nil, err
		}
		if written {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("update credential %s: it kept changing while being updated", read.Name)
}

// compareAndSet writes c at key if key still holds doc, and reports whether it did.
func (s *Store) compareAndSet(ctx context.Context, user state.User, key, doc string, c *Credential) (bool, error) {
	next, err := json.Marshal(c)
	if err != nil {
		return false, fmt.Errorf("encode credential %s: %w", c.Name, err)
	}
	// Indexed under its key before it is written, as everywhere (keyindex.go).
	if err := NoteSealing(ctx, s.rdb, user.Key(), c); err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.Name, err)
	}
	n, err := casScript.Run(ctx, s.rdb, []string{key}, doc, next).Int()
	s.settle(ctx, user.Key(), c.Name)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.Name, err)
	}
	return n == 1, nil
}

// TryLock takes the lock on user's credential name for ttl, if nobody holds it. It returns
// the holder's token for Unlock, and false when someone else holds it.
func (s *Store) TryLock(ctx context.Context, user state.User, name string, ttl time.Duration) (string, bool, error) {
	token := rand.Text()
	ok, err := s.rdb.SetNX(ctx, lockKey(user.Key(), name), token, ttl).Result()
	if err != nil {
		return "", false, fmt.Errorf("lock credential %s: %w", name, err)
	}
	return token, ok, nil
}

// unlockScript deletes the lock only if it still holds the caller's token, so that a holder
// whose lock expired cannot free someone else's.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Unlock frees the lock on user's credential name taken with token.
func (s *Store) Unlock(ctx context.Context, user state.User, name, token string) error {
	if err := unlockScript.Run(ctx, s.rdb, []string{lockKey(user.Key(), name)}, token).Err(); err != nil {
		return fmt.Errorf("unlock credential %s: %w", name, err)
	}
	return nil
}

// settle updates the key index after a write of user's credential name, and logs when it
// cannot: the write is done, and the next full pass (Reseal, Recount) repairs the index.
func (s *Store) settle(ctx context.Context, userKey, name string) {
	if err := Settle(context.WithoutCancel(ctx), s.rdb, userKey, name); err != nil {
		s.log.WarnContext(ctx, "key index not updated", "user", userKey, "credential", name, "err", err)
	}
}
