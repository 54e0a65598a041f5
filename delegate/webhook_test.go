package delegate

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signed returns the headers urlflow sends with body as message id at ts.
func signed(t *testing.T, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	key, err := ParseSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderWebhookSignature, SignWebhook(key, id, ts, body))
	return h
}

func TestAWebhookIsVerifiedOnceAndForgedStaleOrReplayedOnesAreRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v, err := NewWebhookVerifier(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	body := []byte(`{"type":"elicitation.complete","timestamp":"2027-01-15T08:00:00Z","data":{"elicitation":{"id":"E1","state":"complete","kind":"secret","target":"demo_api_key","service":"weather"}}}`)

	hook, err := v.Verify(signed(t, "msg_E1", now, body), body)
	if err != nil || hook.ID != "msg_E1" || hook.Type != "elicitation.complete" || hook.Elicitation.ID != "E1" || hook.Elicitation.State != "complete" {
		t.Fatalf("Verify = %+v, %v", hook, err)
	}
	if _, err := v.Verify(signed(t, "msg_E1", now.Add(time.Second), body), body); !errors.Is(err, ErrWebhookReplayed) {
		t.Errorf("the same message again: %v, want replayed", err)
	}

	other, _ := NewWebhookVerifier("whsec_" + "b3RoZXItc2VjcmV0LW9mLXR3ZW50eS1mb3VyLWJ5dGVz")
	forged := signed(t, "msg_E2", now, body)
	forged.Set(HeaderWebhookSignature, SignWebhook(other.keys[0], "msg_E2", now, body))
	changedID := signed(t, "msg_E3", now, body)
	changedID.Set(HeaderWebhookID, "msg_E4")
	rotated := signed(t, "msg_E5", now, body)
	rotated.Set(HeaderWebhookSignature, "v1,bm90LXRoaXMtb25l "+rotated.Get(HeaderWebhookSignature))
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"another secret", forged, body, ErrWebhookSignature},
		{"a changed body", signed(t, "msg_E6", now, body), []byte(`{"type":"elicitation.complete","data":{"elicitation":{"id":"E-other"}}}`), ErrWebhookSignature},
		{"a changed id", changedID, body, ErrWebhookSignature},
		{"no headers", http.Header{}, body, ErrWebhookSignature},
		{"stale", signed(t, "msg_E7", now.Add(-6*time.Minute), body), body, ErrWebhookStale},
		{"from the future", signed(t, "msg_E8", now.Add(6*time.Minute), body), body, ErrWebhookStale},
		{"one of two signatures (rotation)", rotated, body, nil},
	} {
		if _, err := v.Verify(tc.header, tc.body); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestAWebhookSecretHasItsPrefixAndEnoughBytes(t *testing.T) {
	for _, bad := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_short", "whsec_!!!!"} {
		if _, err := NewWebhookVerifier(bad); err == nil {
			t.Errorf("secret %q accepted", bad)
		}
	}
	if _, err := ParseSecret(testSecret + "\n"); err != nil {
		t.Errorf("a secret read from a file, with its newline: %v", err)
	}
}

func TestOfCopiesOfAWebhookVerifiedAtOnceExactlyOneIsAccepted(t *testing.T) {
	v, err := NewWebhookVerifier(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"elicitation.expired","data":{"elicitation":{"id":"E9","state":"expired"}}}`)
	header := signed(t, "msg_E9", time.Now(), body)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range cap(errs) {
		wg.Go(func() {
			_, err := v.Verify(header, body)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	accepted := 0
	for err := range errs {
		switch {
		case err == nil:
			accepted++
		case !errors.Is(err, ErrWebhookReplayed):
			t.Errorf("a copy: %v", err)
		}
	}
	if accepted != 1 {
		t.Errorf("%d copies accepted, want 1", accepted)
	}
}

func TestAWebhooksToleranceCanBeNarrowed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v, err := NewWebhookVerifier(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now, v.Tolerance = func() time.Time { return now }, 30*time.Second
	body := []byte(`{"type":"elicitation.complete","data":{"elicitation":{"id":"E1","state":"complete"}}}`)
	if _, err := v.Verify(signed(t, "msg_A", now.Add(-20*time.Second), body), body); err != nil {
		t.Errorf("20 seconds old: %v", err)
	}
	if _, err := v.Verify(signed(t, "msg_B", now.Add(-40*time.Second), body), body); !errors.Is(err, ErrWebhookStale) {
		t.Errorf("40 seconds old: %v, want stale", err)
	}
	// Long after, the first message is refused as stale, not remembered for ever.
	now = now.Add(time.Hour)
	if _, err := v.Verify(signed(t, "msg_A", now.Add(-20*time.Second), body), body); err != nil {
		t.Errorf("a new message reusing an ID verified an hour ago: %v", err)
	}
	if n := len(v.seen); n != 1 {
		t.Errorf("the verifier remembers %d IDs, want only the recent one", n)
	}
}

// The Standard Webhooks specification's published test vector (secret, message ID,
// timestamp, payload and signature, as its reference libraries test them): urlflow's
// signatures are what any of those libraries verifies, and the verifier takes theirs.
func TestWebhookSignaturesMatchTheStandardWebhooksTestVector(t *testing.T) {
	const (
		vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	vectorTime := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	key, err := ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := SignWebhook(key, vectorID, vectorTime, body); got != vectorSignature {
		t.Errorf("SignWebhook = %s, want the vector's %s", got, vectorSignature)
	}
	v, err := NewWebhookVerifier(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return vectorTime.Add(time.Minute) }
	header := http.Header{}
	header.Set(HeaderWebhookID, vectorID)
	header.Set(HeaderWebhookTimestamp, "1614265330")
	header.Set(HeaderWebhookSignature, vectorSignature)
	// Its signature verifies; its body, without urlflow's type, is then refused as not
	// urlflow's (the TypeScript package refuses it too: clients/conformance).
	_, err = v.Verify(header, body)
	if errors.Is(err, ErrWebhookSignature) || errors.Is(err, ErrWebhookStale) || err == nil || !strings.Contains(err.Error(), "not urlflow's") {
		t.Errorf("the vector: %v, want its signature verified and its body refused as not urlflow's", err)
	}
}

// A verifier given the old and the new secret while urlflow's signing secret rotates
// verifies a message signed with either, or with both; one signed with neither fails.
func TestAVerifierWithSeveralSecretsTakesASignatureOfAny(t *testing.T) {
	const (
		old  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		next = "whsec_bmV4dC1zZWNyZXQtb2YtdHdlbnR5LWZvdXItYnl0ZXM="
		gone = "whsec_b3RoZXItc2VjcmV0LW9mLXR3ZW50eS1mb3VyLWJ5dGVz"
	)
	keyOf := func(s string) []byte {
		k, err := ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	body := []byte(`{"type":"elicitation.complete","data":{"elicitation":{"id":"E1"}}}`)
	for i, tc := range []struct {
		name string
		keys [][]byte
		ok   bool
	}{
		{"the old one", [][]byte{keyOf(old)}, true},
		{"the new one", [][]byte{keyOf(next)}, true},
		{"both", [][]byte{keyOf(old), keyOf(next)}, true},
		{"neither", [][]byte{keyOf(gone)}, false},
	} {
		v, err := NewWebhookVerifier(old, next)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("msg_%d", i)
		header := http.Header{}
		header.Set(HeaderWebhookID, id)
		header.Set(HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		header.Set(HeaderWebhookSignature, SignWebhookWith(tc.keys, id, now, body))
		if _, err := v.Verify(header, body); (err == nil) != tc.ok {
			t.Errorf("signed with %s: %v, want verified %v", tc.name, err, tc.ok)
		}
	}
	if _, err := NewWebhookVerifier(); err == nil {
		t.Error("a verifier without a secret was made")
	}
}
