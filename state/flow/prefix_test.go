package flow

import (
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
)

func TestPrefixedFindsTheElicitationsAnIDBeginningNames(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, newClock())
		var ids []string
		for range 40 {
			ids = append(ids, mustCreate(t, s, newElicitation(alice)).ID)
		}
		s.flushIndexes(t.Context())
		x := s.Index()
		one := ids[7]
		for _, prefix := range []string{one[:MinPrefix], strings.ToLower(one[:20]), one[:63]} {
			got, err := x.Prefixed(t.Context(), prefix, 10)
			if err != nil || len(got) != 1 || got[0] != one {
				t.Errorf("Prefixed(%q) = %v, %v; want %s alone", prefix, got, err, one)
			}
		}
		// Two IDs that share their first ten characters, in two buckets of the index.
		twins := []string{"QQQQQQQQQQ" + strings.Repeat("A", 54), "QQQQQQQQQQ" + strings.Repeat("B", 54)}
		for i, id := range twins {
			if err := b.Client.ZAdd(t.Context(), flowsKey(i), redis.Z{Member: "1764649587413:" + id}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := x.Prefixed(t.Context(), "QQQQQQQQQQ", 10); err != nil || !slices.Equal(got, twins) {
			t.Errorf("an ambiguous prefix: %v, %v; want both", got, err)
		}
		if got, err := x.Prefixed(t.Context(), "QQQQQQQQQQ", 1); err != nil || len(got) != 1 {
			t.Errorf("limit 1: %v, %v", got, err)
		}
		if got, err := x.Prefixed(t.Context(), "QQQQQQQQQQB", 10); err != nil || !slices.Equal(got, twins[1:]) {
			t.Errorf("the longer prefix: %v, %v; want the second", got, err)
		}
		if got, err := x.Prefixed(t.Context(), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 10); err != nil || len(got) != 0 {
			t.Errorf("a prefix of no ID: %v, %v", got, err)
		}
		for _, bad := range []string{"ABC", "ABCDEFG1", "*:*", "ABCD?EFGH", one} {
			if _, err := x.Prefixed(t.Context(), bad, 10); err == nil {
				t.Errorf("Prefixed(%q) looked up", bad)
			}
		}
	})
}
