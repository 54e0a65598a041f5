// Package servicecreds keeps, for each delegating service, the index of the credentials it
// holds across its users, so that the service can list them (GET /api/v1/credentials): a
// credential enters when the step that completes its flow stores it (as a flow.Outbox) and
// leaves when it is deleted (as a credentials.Lifecycle).
//
// The one idea to hold: the index names a credential (its user and target) and the user's
// identity, never anything of its value; the credential itself is read where it is kept,
// so what a listing shows is what is stored now, and an entry whose credential is gone is
// dropped when read.
package servicecreds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/zcursor"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

// Index keeps the services' indexes.
type Index struct {
	rdb  redis.UniversalClient
	refs flow.UserRefs
}

// New returns the Index kept in rdb, which finds users by the references refs make
// (UserOf).
func New(rdb redis.UniversalClient, refs flow.UserRefs) *Index { return &Index{rdb: rdb, refs: refs} }

// orderKey is the sorted set of the credentials of service, scored by when each was stored
// (Unix milliseconds), each member an entry (member); usersKey is the hash of the identity
// of each member's user, as JSON.
func orderKey(service string) string { return state.KeyPrefix + "svc:" + service + ":creds" }
func usersKey(service string) string { return state.KeyPrefix + "svc:" + service + ":credusers" }

// refsKey is the hash of the identity of each user of service, as JSON, by the user's
// reference at service: what lets the service name a user by reference alone (UserOf).
func refsKey(service string) string { return state.KeyPrefix + "svc:" + service + ":userrefs" }

// member names the credential of the user whose key is userKey by its target and account
// label (credentials.Labeled).
func member(userKey, target string) string { return userKey + " " + target }

// targetOf is the target of the credential name, with its account label.
func targetOf(name string) string {
	_, target := credentials.SplitName(name)
	return credentials.Labeled(target, credentials.LabelOf(name))
}

// QueueStep indexes the credential that step stored for a service (flow.Outbox).
func (x *Index) QueueStep(ctx context.Context, w flow.Writes, step flow.Step) error {
	if step.Stored == nil || step.Stored.Service() == credentials.OwnService {
		return nil
	}
	doc, err := json.Marshal(step.Stored.User)
	if err != nil {
		return fmt.Errorf("encode the user of %s: %w", step.Stored.Credential.Name, err)
	}
	c := *step.Stored
	w.Outside(func(p redis.Pipeliner) { x.add(ctx, p, c, doc) })
	return nil
}

// QueueCredentialChange takes a deleted credential out of its service's index
// (credentials.Lifecycle); other changes leave the index as it is.
func (x *Index) QueueCredentialChange(ctx context.Context, p redis.Pipeliner, c credentials.Change) error {
	if c.Type != credentials.ChangeDeleted {
		return nil
	}
	m := member(c.User.Key(), targetOf(c.Credential.Name))
	service := c.Service()
	p.ZRem(ctx, orderKey(service), m)
	p.HDel(ctx, usersKey(service), m)
	return nil
}

// add queues on p the entry of the credential that c stored, whose user is doc.
func (x *Index) add(ctx context.Context, p redis.Pipeliner, c credentials.Change, doc []byte) {
	m := member(c.User.Key(), targetOf(c.Credential.Name))
	service := c.Service()
	p.ZAdd(ctx, orderKey(service), redis.Z{Score: float64(c.Credential.StoredAt.UnixMilli()), Member: m})
	p.HSet(ctx, usersKey(service), m, doc)
	if x.refs == nil {
		return
	}
	if ref := x.refs.Of(service, c.User); ref != "" {
		p.HSet(ctx, refsKey(service), ref, doc)
	}
}

// UserOf returns the user that service knows by the reference ref, or state.ErrNotFound
// when no credential of the service was stored for such a user since urlflow kept this.
func (x *Index) UserOf(ctx context.Context, service, ref string) (state.User, error) {
	var u state.User
	err := state.DecodeJSON(x.rdb.HGet(ctx, refsKey(service), ref), "the user of a reference", &u)
	return u, err
}

// Entry is a credential of a service's index as a listing reads it: its Target and account
// Label.
type Entry struct {
	User       state.User
	Target     string
	Label      string
	Credential *credentials.Credential
}

// Page is a page of a service's credentials, oldest stored first; Next continues it.
type Page struct {
	Entries []Entry
	Next    string
}

// ErrBadCursor is List's error for a cursor it did not hand out.
var ErrBadCursor = zcursor.ErrBadCursor

// position is where a page ends: the score (when stored) and member of its last entry.
type position = zcursor.Position

// validMember reports whether m has the form of a member: a user's key, a space, a target.
func validMember(m string) bool { return strings.Contains(m, " ") }

// batch is how many index entries List reads at once.
const batch = 100

// List returns up to limit credentials of service that keep passes, oldest stored first,
// after cursor (empty for the first page; ErrBadCursor if it is not one List handed out).
// An entry whose credential is gone leaves the index.
func (x *Index) List(ctx context.Context, service, cursor string, limit int, keep func(Entry) bool) (Page, error) {
	var page Page
	after := position{At: -1}
	if cursor != "" {
		p, err := zcursor.Parse(cursor, validMember)
		if err != nil {
			return page, err
		}
		after = p
	}
	var stale []any
	// Each read starts at after's millisecond; offset skips the batches of that millisecond
	// that were all on earlier pages (more than a batch stored in one millisecond).
	offset := int64(0)
	for full := false; !full; {
		zs, err := x.rdb.ZRangeByScoreWithScores(ctx, orderKey(service), &redis.ZRangeBy{
			Min: strconv.FormatInt(max(after.At, 0), 10), Max: "+inf", Offset: offset, Count: batch}).Result()
		if err != nil {
			return page, fmt.Errorf("read the credentials of %s: %w", service, err)
		}
		var fresh []redis.Z
		for _, z := range zs {
			p := position{At: int64(z.Score), Member: fmt.Sprint(z.Member)}
			if p.At < after.At || (p.At == after.At && p.Member <= after.Member) {
				continue // on an earlier page
			}
			fresh = append(fresh, z)
		}
		entries, gone, err := x.read(ctx, service, fresh)
		if err != nil {
			return page, err
		}
		stale = append(stale, gone...)
		for i, e := range entries {
			after = position{At: int64(fresh[i].Score), Member: fmt.Sprint(fresh[i].Member)}
			if e.Credential != nil && keep(e) {
				page.Entries = append(page.Entries, e)
				if len(page.Entries) == limit {
					page.Next, full = after.Cursor(), true
					break
				}
			}
		}
		if len(zs) < batch {
			break
		}
		if len(fresh) == 0 {
			offset += batch
		} else {
			offset = 0
		}
	}
	return page, x.drop(ctx, service, stale)
}

// drop takes the members gone out of service's index.
func (x *Index) drop(ctx context.Context, service string, gone []any) error {
	if len(gone) == 0 {
		return nil
	}
	_, err := x.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, orderKey(service), gone...)
		p.HDel(ctx, usersKey(service), toStrings(gone)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop stale credentials of %s: %w", service, err)
	}
	return nil
}

// read returns the entries of zs, in order (Credential nil for one that is gone), and the
// members whose credential is gone.
func (x *Index) read(ctx context.Context, service string, zs []redis.Z) ([]Entry, []any, error) {
	if len(zs) == 0 {
		return nil, nil, nil
	}
	members := make([]string, len(zs))
	for i, z := range zs {
		members[i] = fmt.Sprint(z.Member)
	}
	users, err := x.rdb.HMGet(ctx, usersKey(service), members...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read the users of %s's credentials: %w", service, err)
	}
	entries := make([]Entry, len(zs))
	cmds := make([]*redis.StringCmd, len(zs))
	_, err = x.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			userKey, labeled, _ := strings.Cut(m, " ")
			name := credentials.Name(service, labeled) // service/target@label
			entries[i].Target, entries[i].Label = credentials.SplitTargetLabel(labeled)
			cmds[i] = p.Get(ctx, credentials.Key(userKey, name))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read the credentials of %s: %w", service, err)
	}
	var gone []any
	for i, m := range members {
		doc, _ := users[i].(string)
		var c credentials.Credential
		err := state.DecodeJSON(cmds[i], "credential", &c)
		if errors.Is(err, state.ErrNotFound) || doc == "" {
			gone = append(gone, m)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal([]byte(doc), &entries[i].User); err != nil {
			return nil, nil, fmt.Errorf("decode the user of %s: %w", m, err)
		}
		entries[i].Credential = &c
	}
	return entries, gone, nil
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return out
}

// ForgetUser deletes the identity by which each of services knew user's reference (UserOf):
// what the indexes keep of a user beyond the entries of its credentials, which leave with
// the credentials (QueueCredentialChange).
func (x *Index) ForgetUser(ctx context.Context, services []string, user state.User) error {
	if x.refs == nil || len(services) == 0 {
		return nil
	}
	_, err := x.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, service := range services {
			if ref := x.refs.Of(service, user); ref != "" {
				p.HDel(ctx, refsKey(service), ref)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete the user's references at services: %w", err)
	}
	return nil
}
