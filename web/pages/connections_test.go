package pages

import (
	"context"
	"errors"
	"testing"

	"github.com/urlflow/urlflow/oauth/providers"
)

// TestWhatARemovalSaysInEnglishIsWhatTheProvidersSay: in English, the page words each
// outcome of a disconnection as providers.Disconnection.Text does for the MCP tools and
// the API, after the holder. (Text's provider label is unexported, so both leave it
// empty.)
func TestWhatARemovalSaysInEnglishIsWhatTheProvidersSay(t *testing.T) {
	for _, d := range []providers.Disconnection{
		{},
		{Deleted: true},
		{Deleted: true, RevokeErr: providers.ErrNoRevocation},
		{Deleted: true, RevokeErr: errors.New("the provider answered 500")},
	} {
		if got, want := disconnectionWords(context.Background(), d, "Weather MCP", ""), "Weather MCP: "+d.Text(); got != want {
			t.Errorf("deleted %t, revocation %v:\n got %q\nwant %q", d.Deleted, d.RevokeErr, got, want)
		}
	}
}
