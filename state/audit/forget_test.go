package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

// BenchmarkForgetInAFullBucket measures what forgetting a user costs Redis when the trail
// is at its default bound: one bucket of DefaultMaxEntries/Buckets events of about 470
// bytes, one of them about the user, which Forget rewrites whole in one script. It reports
// the script's time (Redis is busy for that long) beside the whole Forget's.
//
//	go test -run='^$' -bench=ForgetInAFullBucket -benchtime=3x ./state/audit
func BenchmarkForgetInAFullBucket(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	ctx := b.Context()
	t := New(rdb, Options{Retention: 365 * 24 * time.Hour})
	bucketFull := int(DefaultMaxEntries / Buckets)
	var rewrite time.Duration
	for i := range b.N {
		b.StopTimer()
		forgotten := state.User{Issuer: "https://id.example", Subject: fmt.Sprintf("forgotten-%d", i)}
		rdb.Del(ctx, Key(0))
		fillBucket(b, t, rdb, bucketFull, forgotten, 10)
		b.StartTimer()
		docs, err := t.tombstoned(ctx, Key(0), forgotten.Key(), forgotten.Subject, state.User{Issuer: "urn:t", Subject: "t"})
		if err != nil || len(docs) != 2 {
			b.Fatalf("found %d, %v; want one event", len(docs)/2, err)
		}
		began := time.Now()
		if n, err := t.rewrite(ctx, 0, docs); err != nil || n != 1 {
			b.Fatalf("rewrote %d, %v", n, err)
		}
		rewrite += time.Since(began)
		if n, _ := rdb.XLen(ctx, Key(0)).Result(); n != int64(bucketFull) {
			b.Fatalf("%d events after the rewrite, want %d", n, bucketFull)
		}
	}
	parts := (bucketFull + rewritePart - 1) / rewritePart
	b.ReportMetric(float64(rewrite.Milliseconds())/float64(b.N), "rewrite-ms")
	b.ReportMetric(float64(rewrite.Microseconds())/1000/float64(b.N*parts), "part-ms")
	b.ReportMetric(float64(bucketFull), "events/bucket")
}

// fillBucket appends n events of about 470 bytes (a transition, as the trail holds most) to
// bucket 0 of t: the one at index at about the user about, the others about someone else.
func fillBucket(tb testing.TB, t *Trail, rdb redis.UniversalClient, n int, about state.User, at int) {
	tb.Helper()
	ctx := tb.Context()
	other := state.User{Issuer: "https://id.example", Subject: "someone-else"}
	subject := zeroBucketSubject()
	for done := 0; done < n; {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 1000 && done < n; i++ {
				u := other
				if done == at {
					u = about
				}
				t.Queue(ctx, p, Event{Event: "transition", Actor: state.ActorClient, Elicitation: subject, Kind: "secret",
					Target: "demo_api_key", From: "pending", To: "consented", Cause: "client_accept", Client: "claude-code 2.1.0",
					Address: "192.0.2.1", Reason: "the client accepted the elicitation"}.About(u))
				done++
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// zeroBucketSubject returns an elicitation ID whose events go to bucket 0.
func zeroBucketSubject() string {
	for i := 0; ; i++ {
		if s := fmt.Sprintf("E%063d", i); bucketOf(s) == 0 {
			return s
		}
	}
}

func TestForgetRewritesInPartsAndKeepsWhatIsAppendedMeanwhile(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		trail := New(b.Client, Options{Retention: 365 * 24 * time.Hour})
		carol := state.User{Issuer: "https://id.example", Subject: "carol-q8z"}
		const events = rewritePart*3 + 17
		fillBucket(t, trail, b.Client, events, carol, rewritePart*2+5) // in the third part
		before, err := b.Client.XRange(ctx, Key(0), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}

		// Another replica appends while the bucket is rewritten.
		stop, appended := make(chan struct{}), make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					appended <- n
					return
				default:
				}
				trail.Record(context.WithoutCancel(ctx), Event{Event: "signed_in", Elicitation: zeroBucketSubject()})
				n++
			}
		}()
		tombstone := state.User{Issuer: "urn:urlflow:forgotten", Subject: "forgotten-x"}
		changed, err := trail.Forget(ctx, carol.Key(), carol.Subject, tombstone)
		close(stop)
		added := <-appended
		if err != nil || changed != 1 {
			t.Fatalf("Forget = %d, %v; want the one event about carol", changed, err)
		}

		after, err := b.Client.XRange(ctx, Key(0), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != events+added {
			t.Fatalf("%d events after, want the %d before and the %d appended meanwhile", len(after), events, added)
		}
		for i, m := range before {
			if after[i].ID != m.ID {
				t.Fatalf("event %d moved from %s to %s", i, m.ID, after[i].ID)
			}
			doc := after[i].Values["e"].(string)
			if i == rewritePart*2+5 {
				if strings.Contains(doc, carol.Subject) || strings.Contains(doc, carol.Key()) || !strings.Contains(doc, tombstone.Subject) ||
					strings.Contains(doc, "192.0.2.1") {
					t.Errorf("carol's event after Forget: %s", doc)
				}
			} else if doc != m.Values["e"] {
				t.Errorf("event %d changed: %s", i, doc)
			}
		}
		if n, _ := b.Client.Exists(ctx, Key(0)+":rewrite", Key(0)+":rewriting").Result(); n != 0 {
			t.Errorf("the rewrite left its copy or its lock")
		}
		if ttl, _ := b.Client.PTTL(ctx, Key(0)).Result(); ttl > 0 {
			t.Errorf("the bucket expires in %v after its rewrite", ttl)
		}
	})
}

func TestForgetWaitsForNoOtherRewrite(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	trail := New(rdb, Options{})
	carol := state.User{Issuer: "https://id.example", Subject: "carol-q8z"}
	fillBucket(t, trail, rdb, 10, carol, 3)
	rdb.Set(t.Context(), Key(0)+":rewriting", "another", time.Minute)
	if _, err := trail.Forget(t.Context(), carol.Key(), carol.Subject, state.User{Issuer: "urn:t", Subject: "t"}); !errors.Is(err, ErrRewriting) {
		t.Fatalf("Forget while another rewrites: %v, want ErrRewriting", err)
	}
	if doc, _ := rdb.XRange(t.Context(), Key(0), "-", "+").Val()[3].Values["e"].(string); !strings.Contains(doc, carol.Subject) {
		t.Errorf("the event changed though the bucket was locked: %s", doc)
	}
}
