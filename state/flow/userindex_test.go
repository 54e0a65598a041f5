package flow

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
)

// A packed entry stands for its entry, sorts as it does, and fits a listpack.
func TestPackedEntriesSortAsTheirEntriesAndComeBack(t *testing.T) {
	entries := []string{
		"1796349068316:" + strings.Repeat("A", 64),
		"1796349068316:" + strings.Repeat("2", 64),
		"1796349068316:" + strings.Repeat("7", 63) + "A",
		"1796349068316:" + strings.Repeat("Z", 64),
		"1796349068317:" + strings.Repeat("2", 64),
		"0999999999999:ABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"1796349068316:ABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"1796349068316:ABCDEFGHIJKLMNOPQRSTUVWXY2",
	}
	for _, e := range entries {
		m := packEntry(e)
		if len(m) > 64 {
			t.Errorf("%s packs into %d bytes, over a listpack's 64", e, len(m))
		}
		if back, ok := unpackEntry(m); !ok || back != e {
			t.Errorf("%s came back as %q, %v", e, back, ok)
		}
	}
	byEntry := slices.Sorted(slices.Values(entries))
	byMember := slices.Clone(entries)
	slices.SortFunc(byMember, func(a, b string) int { return strings.Compare(packEntry(a), packEntry(b)) })
	if !slices.Equal(byEntry, byMember) {
		t.Errorf("packed, they sort as\n%v\nwant\n%v", byMember, byEntry)
	}
	for _, junk := range []string{"", "short", strings.Repeat("\xff", 46), strings.Repeat("\x00", 30)} {
		if e, ok := unpackEntry(junk); ok {
			t.Errorf("%q unpacked to %s", junk, e)
		}
	}
}

func FuzzPackedEntriesSortAsTheirEntries(f *testing.F) {
	f.Add(int64(1796349068316), "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", int64(1796349068316), "ABCDEFGHIJKLMNOPQRSTUVWXYZ234566")
	f.Fuzz(func(t *testing.T, ms1 int64, id1 string, ms2 int64, id2 string) {
		a, b := fuzzEntry(ms1, id1), fuzzEntry(ms2, id2)
		if back, ok := unpackEntry(packEntry(a)); !ok || back != a {
			t.Fatalf("%s came back as %q, %v", a, back, ok)
		}
		if got, want := strings.Compare(packEntry(a), packEntry(b)), strings.Compare(a, b); got != want {
			t.Fatalf("%s vs %s: packed %d, entries %d", a, b, got, want)
		}
	})
}

// fuzzEntry makes an entry of the shape indexEntryPattern accepts from any input.
func fuzzEntry(ms int64, id string) string {
	ms = 1_000_000_000_000 + (ms%8_999_999_999_999+8_999_999_999_999)%8_999_999_999_999
	var b strings.Builder
	n := 64
	if len(id)%2 == 1 {
		n = 26
	}
	for i := range n {
		c := byte(i)
		if i < len(id) {
			c = id[i]
		}
		b.WriteByte(idAlphabetSorted[c%32])
	}
	return fmt.Sprintf("%013d:%s", ms, b.String())
}

// A user's flows listed before the index was packed are still listed, once, with the new
// ones, in order, page by page.
func TestAUsersListingReadsItsIndexOfEntriesAsTextToo(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		ctx := t.Context()
		var want []*Elicitation
		for i := range 7 {
			clk.Advance(time.Second)
			e := mustCreate(t, s, newElicitation(alice))
			want = append(want, e)
			if i < 4 { // written as the previous release wrote them
				s.flushIndexes(ctx)
				if err := b.Client.ZRem(ctx, userIndexKey(alice.Key()), packEntry(indexEntry(e))).Err(); err != nil {
					t.Fatal(err)
				}
				if err := b.Client.ZAdd(ctx, legacyUserIndexKey(alice.Key()), redis.Z{Member: indexEntry(e)}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := listAll(t, s, ListQuery{Limit: 2, Filter: Filter{UserKey: alice.Key()}}, nil)
		if !slices.Equal(got, ids(want...)) {
			t.Fatalf("listed %v, want %v", got, ids(want...))
		}
		sum, err := s.Index().Summarize(ctx, Filter{UserKey: alice.Key()})
		if err != nil || sum.Running[Pending] != 7 {
			t.Fatalf("summary %+v, %v", sum, err)
		}
	})
}
