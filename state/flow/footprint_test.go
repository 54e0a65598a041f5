package flow

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// BenchmarkFootprintOfAnEndedFlow measures what one ended secret flow holds in Redis after
// it ended: each of b.N flows (at least 1,000) is a fresh user's whole secret flow in an MCP
// session (created, accepted, opened, agreed, verified with its credential stored, its
// notification written, its history packed), then Redis' MEMORY USAGE of every key is summed by kind of key.
// It reports bytes per flow by kind, B/flow-held for what the flow retention governs
// (record, history, indexes), and B/flow for that and the credential the flow stored (the
// user's until deleted); the audit trail (B/flow:audit) is apart: it has its own retention. docs/performance.md records a run:
//
//	go test -run='^$' -bench=Footprint -benchtime=2000x ./state/flow
func BenchmarkFootprintOfAnEndedFlow(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	s := NewStore(rdb, StoreOptions{Logger: quiet, Audit: audit.New(rdb, audit.Options{Logger: quiet})})
	v := testVault(b)
	ctx := b.Context()
	n := 0
	for i := 0; b.Loop() || n < 1000; i++ {
		n++
		user := state.User{Issuer: "https://id.example", Subject: fmt.Sprint("user-", i)}
		e := mustCreate(b, s, newElicitation(user))
		mustApply(b, s, e.ID, ClientAccept, state.ActorClient)
		mustApply(b, s, e.ID, BrowserOpen, state.ActorUser)
		mustApply(b, s, e.ID, PageContinue, state.ActorUser)
		mustApply(b, s, e.ID, Verified, state.ActorUser, WithCredential(vaultCredential(b, v, user, e.ID, "s3cret-value-of-32-characters-xx", s.Now())))
		if _, err := s.Deliveries().Record(ctx, e.ID, CallStream, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if _, err := s.compactDue(ctx, true); err != nil { // what the sweeper does 10 s after each flow settled
		b.Fatal(err)
	}
	byKind := footprint(ctx, b, rdb)
	var total, flowOnly int64
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		per := float64(byKind[k]) / float64(n)
		b.ReportMetric(per, "B/flow:"+k)
		if k == "audit" {
			continue
		}
		total += byKind[k]
		if k != "credential" {
			flowOnly += byKind[k]
		}
	}
	var events int64
	for bucket := range 16 {
		events += rdb.XLen(ctx, fmt.Sprintf("urlflow:{audit:%d}", bucket)).Val()
	}
	if events > 0 {
		b.ReportMetric(float64(byKind["audit"])/float64(events), "B/audit-event")
	}
	b.ReportMetric(float64(total)/float64(n), "B/flow")
	b.ReportMetric(float64(flowOnly)/float64(n), "B/flow-held")
}

// keyKinds names the kinds of urlflow's keys, by pattern (docs/design.md, "Redis key
// layout").
var keyKinds = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"record", regexp.MustCompile(`^urlflow:\{u:[^}]+\}:e:`)},
	{"history", regexp.MustCompile(`^urlflow:\{u:[^}]+\}:hz?:`)},
	{"user-index", regexp.MustCompile(`^urlflow:\{u:[^}]+\}:(fl|flows)$`)},
	{"undelivered", regexp.MustCompile(`:undelivered$`)},
	{"credential", regexp.MustCompile(`^urlflow:(\{u:[^}]+\}:(c:|cs$|cu$|ck)|\{keyring\})`)},
	{"index", regexp.MustCompile(`^urlflow:\{flows:`)},
	{"audit", regexp.MustCompile(`^urlflow:\{audit:`)},
}

// footprint sums MEMORY USAGE of every key of rdb by kind ("other" for the rest).
func footprint(ctx context.Context, t testing.TB, rdb redis.UniversalClient) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		size, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", key, err)
		}
		kind := "other:" + strings.SplitN(strings.TrimPrefix(key, "urlflow:"), ":", 2)[0]
		for _, k := range keyKinds {
			if k.re.MatchString(key) {
				kind = k.kind
				break
			}
		}
		out[kind] += size
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
