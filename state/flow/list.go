package flow

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// StuckAfter says how long an elicitation may stay in each running state, and an ended one
// owe its completion notification, before operators should look at it: it is then stuck.
// A zero field means at once; DefaultStuckAfter holds the defaults.
type StuckAfter struct {
	Pending      time.Duration
	Consented    time.Duration
	InProgress   time.Duration
	Failed       time.Duration
	Unknown      time.Duration
	Notification time.Duration
}

// DefaultStuckAfter are the thresholds of docs/design.md ("Operations").
var DefaultStuckAfter = StuckAfter{
	Pending:      2 * time.Minute,
	Consented:    5 * time.Minute,
	InProgress:   10 * time.Minute,
	Failed:       10 * time.Minute,
	Unknown:      0,
	Notification: time.Minute,
}

// Stuck is why an elicitation is stuck.
type Stuck string

// The reasons an elicitation is stuck: a running state held too long (named by the state),
// or a completion notification owed too long.
const StuckNotification Stuck = "notification"

// For returns the threshold of running state st, and false for an ended state.
func (t StuckAfter) For(st State) (time.Duration, bool) {
	switch st {
	case Pending:
		return t.Pending, true
	case Consented:
		return t.Consented, true
	case InProgress:
		return t.InProgress, true
	case Failed:
		return t.Failed, true
	case Unknown:
		return t.Unknown, true
	}
	return 0, false
}

// Check returns why e is stuck at now, and "" if it is not: a running state held at least
// its threshold, or a notification owed at least the notification threshold since it was
// queued.
func (t StuckAfter) Check(e *Elicitation, now time.Time) Stuck {
	if limit, running := t.For(e.State); running {
		if now.Sub(e.UpdatedAt) >= limit {
			return Stuck(e.State)
		}
		return ""
	}
	if e.NotificationOwed() && now.Sub(*e.Delivery.QueuedAt) >= t.Notification {
		return StuckNotification
	}
	return ""
}

// Era returns the way e was asked for: "2025-11-25" by urlflow's tools in an MCP session,
// "2026-07-28" by its tools without one, "api" by a delegating service.
func (e *Elicitation) Era() string {
	switch {
	case e.Service != "":
		return "api"
	case e.SessionID != "":
		return "2025-11-25"
	}
	return "2026-07-28"
}

// Eras lists the values of Elicitation.Era.
var Eras = []string{"2025-11-25", "2026-07-28", "api"}

// Filter selects elicitations of a listing. Zero fields select everything; the others must
// all match. It is applied to the records as they are read.
type Filter struct {
	// States are the states to list; empty lists every state.
	States []State
	// Stuck lists only stuck elicitations (StuckAfter); Owed only ended ones whose
	// completion notification is owed (NotificationOwed).
	Stuck bool
	Owed  bool
	// OlderThan lists only those created at least this long ago.
	OlderThan time.Duration
	// UserKey lists only one user's (state.User.Key); Subject, only those whose user has
	// this subject, at any issuer.
	UserKey string
	Subject string
	Kind    state.Kind
	// Target is the secret slot or provider.
	Target  string
	Service string
	// Client is the name the MCP client gave.
	Client  string
	Era     string
	Replica string
}

// match reports whether e passes f at now.
func (f Filter) match(e *Elicitation, now time.Time, t StuckAfter) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, e.State),
		f.Stuck && t.Check(e, now) == "",
		f.Owed && !e.NotificationOwed(),
		f.OlderThan > 0 && now.Sub(e.CreatedAt) < f.OlderThan,
		f.UserKey != "" && e.User.Key() != f.UserKey,
		f.Subject != "" && e.User.Subject != f.Subject,
		f.Kind != "" && e.Kind != f.Kind,
		f.Target != "" && e.Target != f.Target,
		f.Service != "" && e.Service != f.Service,
		f.Client != "" && e.Client.Name != f.Client,
		f.Era != "" && e.Era() != f.Era,
		f.Replica != "" && e.Replica != f.Replica:
		return false
	}
	return true
}

// needsAttention reports whether every elicitation f selects is running or owes its
// notification: then the deadline and owed indexes hold all of them.
func (f Filter) needsAttention() bool {
	if f.Stuck || f.Owed {
		return true
	}
	if len(f.States) == 0 {
		return false
	}
	for _, st := range f.States {
		if st.Terminal() {
			return false
		}
	}
	return true
}

// The bounds of a listing page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
	// listScan bounds how many index entries one page reads: a page of a filter that
	// matches few may come back short, or empty, with a cursor to go on from.
	listScan = 2000
)

// ListQuery asks for one page of a listing.
type ListQuery struct {
	Filter
	// Cursor is a page's Next or Prev, to list the page after it or before it; empty
	// starts with the oldest.
	Cursor string
	// Limit is the most elicitations to return: DefaultListLimit when 0, at most MaxListLimit.
	Limit int
}

// Page is one page of a listing, ordered by creation time, then ID.
type Page struct {
	Elicitations []*Elicitation
	// Next continues the listing after this page, and Prev before it; each is empty when
	// the listing is known to end there.
	Next, Prev string
	// Total is how many elicitations the query selects on all pages together, when Counted:
	// a listing of those that need attention (stuck, owed, running states) counts them, as
	// it reads them all; a listing of every flow of the retention does not.
	Total   int
	Counted bool
}

// List returns a page of the elicitations q selects, oldest first by (createdAt, ID).
// Listing page after page with each page's Next returns every elicitation that exists
// from the first page to the last exactly once, whatever changes meanwhile; one created
// meanwhile is listed when it sorts after the cursor. A page's Prev lists the page before
// it the same way, back to the oldest. When q selects one user's (UserKey), only that
// user's index is read. A page may hold fewer than q.Limit elicitations, or none, and
// still a Next (or Prev): it read as many entries as a page may.
func (x *Index) List(ctx context.Context, q ListQuery) (Page, error) {
	s := x.s
	from, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	now := s.now()
	keep := func(e *Elicitation) bool { return q.match(e, now, s.stuckAfter) }
	if q.needsAttention() && q.UserKey == "" {
		// A user's own index is smaller than the deployment's running flows.
		return s.listAttention(ctx, from, limit, keep)
	}
	s.flushIndexes(ctx)
	var keys []string
	if q.UserKey != "" {
		keys = userIndexKeys(q.UserKey)
	} else {
		for b := range IndexBuckets {
			keys = append(keys, flowsKey(b))
		}
	}
	return s.walk(ctx, keys, from, limit, keep)
}

// walk lists the elicitations of the indexes keys that keep accepts, on the side of from
// that it admits, reading the entries in batches in their order (from the cursor back,
// for a previous page).
func (s *Store) walk(ctx context.Context, keys []string, from position, limit int, keep func(*Elicitation) bool) (Page, error) {
	var page []*Elicitation
	batch := min(max(limit, 100), MaxListLimit)
	at := from
	for read := 0; read < listScan; {
		entries, exhausted, err := s.nextEntries(ctx, keys, at, batch)
		if err != nil {
			return Page{}, err
		}
		if len(entries) == 0 {
			return pageOf(page, from, false, at.entry), nil // nothing but members that are not entries
		}
		records, err := s.loadEntries(ctx, entries)
		if err != nil {
			return Page{}, err
		}
		if _, err := s.forget(ctx, entries, records); err != nil {
			return Page{}, fmt.Errorf("list elicitations: %w", err)
		}
		for i, e := range records {
			at = position{entry: entries[i].entry, before: from.before}
			if e == nil || !keep(e) {
				continue
			}
			page = append(page, e)
			if len(page) == limit {
				return pageOf(page, from, i < len(entries)-1 || !exhausted, at.entry), nil
			}
		}
		if exhausted {
			return pageOf(page, from, false, at.entry), nil
		}
		read += len(entries)
	}
	return pageOf(page, from, true, at.entry), nil
}

// pageOf returns the page of the elicitations es that a walk from from found in its order,
// last reading entry at; more says whether entries remain beyond it.
func pageOf(es []*Elicitation, from position, more bool, at string) Page {
	page := Page{Elicitations: es}
	if !from.before {
		if more {
			page.Next = cursorAfter(at)
		}
		if from.entry != "" {
			page.Prev = cursorThrough(from.entry)
		}
		return page
	}
	// A walk back finds the newest first.
	if len(es) > 0 {
		page.Next = cursorAfter(indexEntry(es[0]))
	}
	if more {
		page.Prev = cursorBefore(at)
	}
	slices.Reverse(page.Elicitations)
	return page
}

// nextEntries returns the first n entries of the indexes keys together on the side of from
// that it admits, nearest first, and whether they are the last.
func (s *Store) nextEntries(ctx context.Context, keys []string, from position, n int) ([]indexed, bool, error) {
	cmds := make([]*redis.StringSliceCmd, len(keys))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			r := &redis.ZRangeBy{Min: "-", Max: "+", Count: int64(n)}
			switch {
			case from.entry == "":
			case !from.before:
				r.Min = "(" + indexMember(key, from.entry)
			case from.through:
				r.Max = "[" + indexMember(key, from.entry)
			default:
				r.Max = "(" + indexMember(key, from.entry)
			}
			if from.before {
				cmds[i] = p.ZRevRangeByLex(ctx, key, r)
			} else {
				cmds[i] = p.ZRangeByLex(ctx, key, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list elicitations: %w", err)
	}
	var all []indexed
	exhausted := true
	for i, cmd := range cmds {
		if len(cmd.Val()) == n {
			exhausted = false
		}
		for _, m := range cmd.Val() {
			if entry, ok := memberEntry(keys[i], m); ok {
				all = append(all, indexed{entry: entry, key: keys[i], member: m})
			}
		}
	}
	slices.SortFunc(all, func(a, b indexed) int { return strings.Compare(a.entry, b.entry) })
	if from.before {
		slices.Reverse(all)
	}
	if len(all) > n {
		all, exhausted = all[:n], false
	}
	return all, exhausted, nil
}

// listAttention lists, from the deadline and owed indexes, the running elicitations and
// those that owe their notification which keep accepts, on the side of from that it
// admits. It reads them all, so it counts them too.
func (s *Store) listAttention(ctx context.Context, from position, limit int, keep func(*Elicitation) bool) (Page, error) {
	all, err := s.attention(ctx)
	if err != nil {
		return Page{}, err
	}
	var matches []*Elicitation
	start := 0 // the first match that from admits
	for _, e := range all {
		if !keep(e) {
			continue
		}
		if !from.before && !from.admits(indexEntry(e)) {
			start++
		}
		matches = append(matches, e)
	}
	end := min(start+limit, len(matches))
	if from.before {
		end = 0
		for end < len(matches) && from.admits(indexEntry(matches[end])) {
			end++
		}
		start = max(end-limit, 0)
	}
	page := Page{Elicitations: matches[start:end], Total: len(matches), Counted: true}
	if start > 0 {
		page.Prev = cursorThrough(indexEntry(matches[start-1]))
	}
	if end < len(matches) && end > start {
		page.Next = cursorAfter(indexEntry(matches[end-1]))
	}
	return page, nil
}

// attention returns every running elicitation and every ended one that owes its
// notification, ordered by (createdAt, ID).
func (s *Store) attention(ctx context.Context) ([]*Elicitation, error) {
	s.flushIndexes(ctx)
	running := s.rdb.ZRange(ctx, deadlinesKey, 0, -1)
	if err := running.Err(); err != nil {
		return nil, fmt.Errorf("read running elicitations: %w", err)
	}
	ids := running.Val()
	owed := make([]*redis.StringSliceCmd, IndexBuckets)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range IndexBuckets {
			owed[b] = p.ZRange(ctx, owedKey(b), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read owed notifications: %w", err)
	}
	for _, cmd := range owed {
		ids = append(ids, cmd.Val()...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var all []*Elicitation
	for chunk := range slices.Chunk(ids, MaxListLimit) {
		records, err := s.loadIDs(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, e := range records {
			if e != nil && (!e.State.Terminal() || e.NotificationOwed()) {
				all = append(all, e)
			}
		}
	}
	slices.SortFunc(all, func(a, b *Elicitation) int { return cmp.Compare(indexEntry(a), indexEntry(b)) })
	return all, nil
}

// userAttention returns the running elicitations of the user whose key is userKey and
// those that owe their notification, from the user's own index.
func (s *Store) userAttention(ctx context.Context, userKey string) ([]*Elicitation, error) {
	var all []*Elicitation
	keep := func(e *Elicitation) bool { return !e.State.Terminal() || e.NotificationOwed() }
	for from := (position{}); ; {
		page, err := s.walk(ctx, userIndexKeys(userKey), from, MaxListLimit, keep)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Elicitations...)
		if page.Next == "" {
			return all, nil
		}
		if from, err = decodeCursor(page.Next); err != nil {
			return nil, err
		}
	}
}

// Summary counts the elicitations that need attention now.
type Summary struct {
	// Running counts the running elicitations by state (every running state is present).
	Running map[State]int `json:"running"`
	// Stuck counts the stuck ones by why (every running state and "notification").
	Stuck map[Stuck]int `json:"stuck"`
	// OwedNotifications counts the ended ones whose notification is owed.
	OwedNotifications int `json:"owedNotifications"`
	// At is when it was counted.
	At time.Time `json:"at"`
	// StuckAfterSeconds are the thresholds, by running state and "notification".
	StuckAfterSeconds map[Stuck]float64 `json:"stuckAfterSeconds"`
}

// Summarize counts the running elicitations, the owed notifications and the stuck ones
// among those f selects (f.States and f.Stuck are ignored).
func (x *Index) Summarize(ctx context.Context, f Filter) (Summary, error) {
	s := x.s
	var all []*Elicitation
	var err error
	if f.UserKey != "" {
		all, err = s.userAttention(ctx, f.UserKey)
	} else {
		all, err = s.attention(ctx)
	}
	if err != nil {
		return Summary{}, err
	}
	return s.summarize(all, f, s.now()), nil
}

// Overview returns the Summary of every elicitation and the stuck ones, oldest first and at
// most limit of them, from one read of those that need attention: the top of the
// operators' page.
func (x *Index) Overview(ctx context.Context, limit int) (Summary, []*Elicitation, error) {
	s := x.s
	all, err := s.attention(ctx)
	if err != nil {
		return Summary{}, nil, err
	}
	now := s.now()
	var stuck []*Elicitation
	for _, e := range all {
		if len(stuck) < limit && s.stuckAfter.Check(e, now) != "" {
			stuck = append(stuck, e)
		}
	}
	return s.summarize(all, Filter{}, now), stuck, nil
}

// summarize counts, at now, the elicitations of all (running ones and those that owe their
// notification) that f selects, ignoring f.States and f.Stuck.
func (s *Store) summarize(all []*Elicitation, f Filter, now time.Time) Summary {
	f.States, f.Stuck = nil, false
	sum := Summary{Running: map[State]int{}, Stuck: map[Stuck]int{StuckNotification: 0}, At: now.UTC(),
		StuckAfterSeconds: map[Stuck]float64{StuckNotification: s.stuckAfter.Notification.Seconds()}}
	for _, st := range States {
		if limit, running := s.stuckAfter.For(st); running {
			sum.Running[st], sum.Stuck[Stuck(st)] = 0, 0
			sum.StuckAfterSeconds[Stuck(st)] = limit.Seconds()
		}
	}
	for _, e := range all {
		if !f.match(e, now, s.stuckAfter) {
			continue
		}
		if e.State.Terminal() {
			sum.OwedNotifications++
		} else {
			sum.Running[e.State]++
		}
		if why := s.stuckAfter.Check(e, now); why != "" {
			sum.Stuck[why]++
		}
	}
	return sum
}

// StuckAfter returns the store's thresholds.
func (x *Index) StuckAfter() StuckAfter { return x.s.stuckAfter }

// Listed is an elicitation as a listing shows it (the API, the command line): its view
// without the history, and what an operator looks for in a list.
type Listed struct {
	View
	// User and Session (the MCP session that asked, 2025-11-25) are shown to operators only.
	User    *state.User      `json:"user,omitempty"`
	Session string           `json:"session,omitempty"`
	Client  state.ClientInfo `json:"client"`
	Replica string           `json:"replica,omitempty"`
	Era     string           `json:"era"`
	// Stuck says why the flow is stuck (StuckAfter.Check); empty when it is not.
	Stuck Stuck `json:"stuck,omitempty"`
}

// Listing is the JSON of one page of a listing.
type Listing struct {
	Elicitations []Listed `json:"elicitations"`
	// Next continues the listing, Prev lists the page before; each absent at its end.
	Next string `json:"next,omitempty"`
	Prev string `json:"prev,omitempty"`
	// Total is how many the query selects on all pages, when the listing counted them
	// (Page.Counted).
	Total *int `json:"total,omitempty"`
}

// Listed returns e as a listing shows it at now: url is its elicitation URL, refs make the
// user reference of a service's flow, and withUser says whether to show its user and
// session (to an operator).
func (x *Index) Listed(e *Elicitation, refs UserRefs, url string, now time.Time, withUser bool) Listed {
	s := x.s
	l := Listed{View: e.ViewFor(refs, url, nil), Client: e.Client, Replica: e.Replica, Era: e.Era(), Stuck: s.stuckAfter.Check(e, now)}
	if withUser {
		u := e.User
		l.User, l.Session = &u, e.SessionID
	}
	return l
}
