package flow

import (
	"bytes"
	"compress/flate"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

// settle ends a new flow of user outside any MCP session (no notification owed) and
// returns it.
func settle(t *testing.T, s *Store, user state.User) *Elicitation {
	t.Helper()
	n := newElicitation(user)
	n.SessionID = ""
	e := mustCreate(t, s, n)
	mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
	mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
	return e
}

func TestASettledFlowsHistoryIsPackedAndReadsAsItWasWritten(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s, ctx := newStore(b, clk), t.Context()
		user := state.User{Issuer: "https://id.example", Subject: "packer"}
		e := settle(t, s, user)
		running := mustCreate(t, s, newElicitation(user)) // not ended: never packed
		written := mustHistory(t, s, e.ID)
		uk := user.Key()
		listBytes := 0
		for _, l := range b.Client.LRange(ctx, historyKey(uk, e.ID), 0, -1).Val() {
			listBytes += len(l)
		}

		if n, err := s.compactDue(ctx, false); err != nil || n != 0 {
			t.Fatalf("before its delay: packed %d, %v; want none", n, err)
		}
		clk.Advance(compactDelay)
		if n, err := s.compactDue(ctx, false); err != nil || n != 1 {
			t.Fatalf("after its delay: packed %d, %v", n, err)
		}
		if n := b.Client.Exists(ctx, historyKey(uk, e.ID)).Val(); n != 0 {
			t.Fatal("the sweep after the delay left the history a list")
		}
		packed := b.Client.Get(ctx, packedHistoryKey(uk, e.ID)).Val()
		if !isPacked(packed) || len(packed) >= listBytes/2 {
			t.Errorf("packed history of %d bytes, from %d bytes of JSON lines: want less than half", len(packed), listBytes)
		}
		if got := mustHistory(t, s, e.ID); !slices.EqualFunc(got, written, sameEntry) {
			t.Errorf("packed history reads %+v, was %+v", got, written)
		}
		recordTTL, packedTTL := b.Client.PTTL(ctx, elicitationKey(uk, e.ID)).Val(), b.Client.PTTL(ctx, packedHistoryKey(uk, e.ID)).Val()
		if packedTTL <= 0 || (packedTTL-recordTTL).Abs() > time.Second {
			t.Errorf("the packed history lives %v, its record %v: want the same", packedTTL, recordTTL)
		}
		if b.Client.Exists(ctx, packedHistoryKey(uk, running.ID)).Val() != 0 {
			t.Error("a running flow's history was packed")
		}

		// A late event goes to the list again; the history reads both, and packing it
		// again takes both into one.
		late := mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
		if late.Changed() {
			t.Fatalf("a late accept changed the cancelled flow: %+v", late)
		}
		after := mustHistory(t, s, e.ID)
		if len(after) != len(written)+1 || !slices.EqualFunc(after[:len(written)], written, sameEntry) || after[len(written)].Event != ClientAccept {
			t.Fatalf("history after a late event: %+v", after)
		}
		clk.Advance(compactDelay)
		if n, err := s.compactDue(ctx, false); err != nil || n != 1 {
			t.Fatalf("packing again: %d, %v", n, err)
		}
		if got := mustHistory(t, s, e.ID); !slices.EqualFunc(got, after, sameEntry) || b.Client.Exists(ctx, historyKey(uk, e.ID)).Val() != 0 {
			t.Errorf("packed again, the history reads %+v; want %+v, and no list", got, after)
		}
	})
}

func TestAFlowWhoseNotificationIsOwedIsPackedOnlyOnceItIsWritten(t *testing.T) {
	t.Parallel()
	s := newStore(redistest.StartEmbedded(t), nil)
	ctx := t.Context()
	e := mustCreate(t, s, newElicitation(state.User{Issuer: "https://id.example", Subject: "owed"}))
	mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
	if n, _ := s.compactDue(ctx, true); n != 0 {
		t.Fatalf("packed %d histories while the notification is owed", n)
	}
	if _, err := s.Deliveries().Record(ctx, e.ID, CallStream, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.compactDue(ctx, true); err != nil || n != 1 {
		t.Fatalf("once written: packed %d, %v; want its history", n, err)
	}
	if h := mustHistory(t, s, e.ID); h[len(h)-1].Event != "notified" {
		t.Errorf("the packed history ends with %+v, want the notification", h[len(h)-1])
	}
}

func TestAHistoryThatChangedWhileItWasPackedIsLeftForLater(t *testing.T) {
	t.Parallel()
	b := redistest.StartEmbedded(t)
	s, ctx := newStore(b, nil), t.Context()
	user := state.User{Issuer: "https://id.example", Subject: "racer"}
	e := settle(t, s, user)
	uk := user.Key()
	lines := b.Client.LRange(ctx, historyKey(uk, e.ID), 0, -1).Val()
	doc, err := packHistory(lines)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, e.ID, ClientAccept, state.ActorClient) // after the read
	keys := []string{historyKey(uk, e.ID), packedHistoryKey(uk, e.ID)}
	if n, err := compactScript.Run(ctx, b.Client, keys, len(lines), lines[len(lines)-1], "", doc).Int(); err != nil || n != 0 {
		t.Fatalf("the script packed a history that changed: %d, %v", n, err)
	}
	if got := mustHistory(t, s, e.ID); len(got) != len(lines)+1 {
		t.Errorf("history after the refused pack: %d entries, want %d", len(got), len(lines)+1)
	}
}

// FuzzPackedHistoriesUnpackToTheirLines packs lines (any bytes but a newline, none starting
// with the packed marker, as JSON lines are) and checks they unpack to the same lines.
func FuzzPackedHistoriesUnpackToTheirLines(f *testing.F) {
	f.Add(`{"at":"2026-12-04T09:15:17.33Z","event":"created","actor":"client","to":"pending"}`, `{"event":"notified"}`, "")
	f.Add("", "x", "\x00\xff")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var lines []string
		for _, l := range []string{a, b, c} {
			if strings.Contains(l, "\n") || isPacked(l) {
				return
			}
			lines = append(lines, l)
		}
		doc, err := packHistory(lines)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unpackHistory(string(doc))
		if err != nil || !slices.Equal(got, lines) {
			t.Fatalf("unpacked %q, %v; want %q", got, err, lines)
		}
		// A packed history among the lines is opened, not packed twice.
		again, err := packHistory(append([]string{string(doc)}, "{}"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := unpackHistory(string(again)); !slices.Equal(got, append(slices.Clone(lines), "{}")) {
			t.Fatalf("packed with a packed history: %q", got)
		}
	})
}

// sameEntry reports whether two entries say the same.
func sameEntry(a, b Entry) bool {
	return a.Event == b.Event && a.Actor == b.Actor && a.From == b.From && a.To == b.To && a.Reason == b.Reason &&
		a.At.Equal(b.At) && a.Count == b.Count
}

// TestAReusedWriterPacksAsANewOneWould: packHistory's writers come from a pool; what one
// packs after another history must be the bytes a new writer with the dictionary packs.
func TestAReusedWriterPacksAsANewOneWould(t *testing.T) {
	histories := [][]string{
		{`{"at":"2026-12-01T10:00:00Z","event":"created","actor":"client","to":"pending","reason":"Enter your Demo API key"}`},
		{`{"at":"2026-12-01T10:00:01Z","event":"client_accept","actor":"client","from":"pending","to":"consented"}`, `{"x":1}`},
	}
	for range 3 {
		for _, lines := range histories {
			got, err := packHistory(lines)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			want.WriteByte(packedMarker)
			w, _ := flate.NewWriterDict(&want, flate.BestCompression, []byte(historyDictionary))
			w.Write([]byte(strings.Join(lines, "\n")))
			w.Close()
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("a reused writer packed %x, a new one %x", got, want.Bytes())
			}
			if back, err := unpackHistory(string(got)); err != nil || !slices.Equal(back, lines) {
				t.Fatalf("unpacked %q, %v", back, err)
			}
		}
	}
}

// BenchmarkPackHistory packs the history of a whole secret flow, as the compactor does once
// per settled flow.
func BenchmarkPackHistory(b *testing.B) {
	lines := []string{
		`{"at":"2026-12-01T10:00:00.123456789Z","event":"created","actor":"client","to":"pending","reason":"Enter your Demo API key so that urlflow can use it for you."}`,
		`{"at":"2026-12-01T10:00:00.223456789Z","event":"client_accept","actor":"client","from":"pending","to":"consented","reason":"the client accepted"}`,
		`{"at":"2026-12-01T10:00:00.323456789Z","event":"browser_open","actor":"user","from":"consented","to":"in_progress","reason":"the user opened the link"}`,
		`{"at":"2026-12-01T10:00:00.423456789Z","event":"verified","actor":"user","from":"in_progress","to":"complete","reason":"the secret was verified and stored"}`,
		`{"at":"2026-12-01T10:00:00.523456789Z","event":"notified","actor":"system","from":"complete","to":"complete","reason":"completion notification written on the tool call's stream"}`,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := packHistory(lines); err != nil {
			b.Fatal(err)
		}
	}
}
