package pages

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/upstream"
)

// TestWhatTheCheckFoundIsSaidInTheReadersLanguage: the failed page words what the key's
// check at its API found in the reader's language, as the English of the error says it;
// an error it does not know stays as it is.
func TestWhatTheCheckFoundIsSaidInTheReadersLanguage(t *testing.T) {
	// As a Caller's check wraps it.
	unreachable := fmt.Errorf("verify: %w", &upstream.UnreachableError{Detail: "dial tcp 10.0.0.1:443: i/o timeout"})
	for _, tc := range []struct {
		err                error
		english, germanRef string
	}{
		{&upstream.RefusedError{Status: 401}, "the API answered 401 Unauthorized", "die API antwortete mit 401 Unauthorized"},
		{unreachable, "the API could not be reached (dial tcp 10.0.0.1:443: i/o timeout)", "die API war nicht erreichbar (dial tcp 10.0.0.1:443: i/o timeout)"},
		{errors.New("something else"), "something else", "something else"},
	} {
		en := locale.With(context.Background(), locale.Default().Negotiate("en", ""))
		de := locale.With(context.Background(), locale.Default().Negotiate("de", ""))
		if got := checkWords(en, tc.err); got != tc.english {
			t.Errorf("%v in English: %q, want %q", tc.err, got, tc.english)
		}
		if got := checkWords(de, tc.err); got != tc.germanRef {
			t.Errorf("%v in German: %q, want %q", tc.err, got, tc.germanRef)
		}
	}
	if got := (&upstream.RefusedError{Status: 401}).Error(); got != "the API answered 401 Unauthorized" {
		t.Errorf("the history's English: %q", got)
	}
}
