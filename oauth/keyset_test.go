package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/urlflow/urlflow/internal/issuertest"
)

// keySetOf is a KeySet of iss's JWKS.
func keySetOf(iss *issuertest.Issuer) *KeySet {
	return NewKeySet(iss.JWKSURI, nil, KeySetOptions{})
}

// signedBy returns a token of iss, signed with its current key.
func signedBy(t *testing.T, iss *issuertest.Issuer) string {
	return iss.AccessToken(t, map[string]any{"iss": iss.URL, "sub": "alice", "exp": time.Now().Add(time.Minute).Unix()})
}

// jwk is the JSON of a JWK of iss's current key, with use and alg.
func jwk(t *testing.T, iss *issuertest.Issuer, use, alg string) json.RawMessage {
	t.Helper()
	b, err := (&jose.JSONWebKey{Key: iss.Key().Public(), KeyID: iss.Key().ID, Use: use, Algorithm: alg}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveKeys makes iss's JWKS endpoint answer with keys.
func serveKeys(t *testing.T, iss *issuertest.Issuer, keys ...json.RawMessage) {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	iss.Override(iss.JWKSURI, issuertest.Reply(http.StatusOK, "application/json", string(doc)))
}

func TestKeySetSkipsKeysItCannotUse(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	token := signedBy(t, iss)
	unusable := []json.RawMessage{
		jwk(t, iss, "enc", ""),
		jwk(t, iss, "sig", "ES256K"),
		json.RawMessage(`{"kty":"oct","kid":"` + iss.Key().ID + `","k":"c2VjcmV0LWtleS1ieXRlcw"}`),
		json.RawMessage(`{"kty":"OKP","crv":"X448","kid":"x448","x":"AAAA"}`),
		json.RawMessage(`{"kty":"unknown","kid":"what"}`),
	}
	t.Run("among usable ones", func(t *testing.T) {
		serveKeys(t, iss, append(unusable, jwk(t, iss, "sig", "RS256"))...)
		if _, err := keySetOf(iss).VerifySignature(t.Context(), token); err != nil {
			t.Fatalf("VerifySignature: %v", err)
		}
	})
	t.Run("and none is left", func(t *testing.T) {
		serveKeys(t, iss, unusable...)
		if _, err := keySetOf(iss).VerifySignature(t.Context(), token); !errors.Is(err, ErrKeysUnavailable) {
			t.Fatalf("VerifySignature = %v, want ErrKeysUnavailable", err)
		}
	})
}

// TestCallersShareOneFetch: the requests that need the keys while they are being fetched
// wait for that fetch.
func TestCallersShareOneFetch(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	keys := keySetOf(iss)
	token := signedBy(t, iss)
	document := jwk(t, iss, "sig", "RS256")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	iss.Override(iss.JWKSURI, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[` + string(document) + `]}`))
	}))
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { _, errs[i] = keys.VerifySignature(t.Context(), token) })
	}
	<-entered
	close(release)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("VerifySignature: %v", err)
		}
	}
	if n := iss.Requests(iss.JWKSURI); n != 1 {
		t.Fatalf("the keys were fetched %d times, want once", n)
	}
}

// TestAFetchOutlivesTheRequestThatStartedIt: a client that gives up does not make the
// fetch fail, which would leave the keys unknown for the rest of the interval.
func TestAFetchOutlivesTheRequestThatStartedIt(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	keys := keySetOf(iss)
	token := signedBy(t, iss)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	keys.VerifySignature(gone, token)
	if _, err := keys.VerifySignature(t.Context(), token); err != nil {
		t.Fatalf("VerifySignature after a fetch started by a request that ended: %v", err)
	}
	if n := iss.Requests(iss.JWKSURI); n != 1 {
		t.Fatalf("the keys were fetched %d times, want once", n)
	}
}
