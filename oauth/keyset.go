package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/urlflow/urlflow/internal/resend"
)

// DefaultRefetchInterval is the least time between two fetches of an issuer's keys by a
// KeySet whose options name none. Two fetches a minute cost an issuer nothing, and a
// token signed with a key published since the last fetch waits at most this long.
const DefaultRefetchInterval = 30 * time.Second

// keysFetchTimeout bounds one fetch of the keys. The fetch does not end with the request
// that started it, because other requests wait for its answer too.
const keysFetchTimeout = 10 * time.Second

// maxKeySetBytes bounds the JWKS document that urlflow reads.
const maxKeySetBytes = 1 << 20

// signingAlgorithms are the JWS algorithms a KeySet verifies: asymmetric ones only, as
// go-oidc allows. The verifier in front of it narrows them to the issuer's.
var signingAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

// ErrKeysUnavailable is wrapped by the errors of KeySet.VerifySignature and Server.Verify
// when the issuer's keys could not be fetched: the token may well be valid, but it cannot
// be checked now.
var ErrKeysUnavailable = errors.New("the issuer's signing keys could not be fetched")

// KeySetOptions configure a KeySet.
type KeySetOptions struct {
	// RefetchInterval is the least time between two fetches of the keys, failed ones
	// included; DefaultRefetchInterval if zero.
	RefetchInterval time.Duration
	// Now is time.Now if nil.
	Now func() time.Time
}

// KeySet holds the keys an issuer signs its tokens with, as its JWKS publishes them, and
// verifies signatures with them; it is a go-oidc oidc.KeySet. It fetches the keys when a
// token first needs them, and again when a token names a key ID it does not know or no
// key verifies it, but never sooner than RefetchInterval after the last fetch: tokens
// that anyone can make up do not set the pace of urlflow's calls to the issuer. Callers
// that need the keys while a fetch is under way wait for that fetch. Keys rotate: a token
// signed with a key the issuer published since the last fetch is accepted once the
// interval has passed.
type KeySet struct {
	url      string
	client   *http.Client
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys []jose.JSONWebKey
	// last is when the last fetch started; zero before the first one.
	last time.Time
	// lastErr is why the last fetch failed (wrapping ErrKeysUnavailable); nil after one that
	// succeeded. The keys of an earlier fetch are kept.
	lastErr error
	// fetching is the fetch under way, if any.
	fetching *keyFetch
}

// keyFetch is one fetch of the keys, which several callers may wait for. keys and err are
// set before done is closed.
type keyFetch struct {
	done chan struct{}
	keys []jose.JSONWebKey
	err  error
}

// NewKeySet returns a KeySet of the JWKS at jwksURL, fetched with client
// (resend.Client() if nil). It fetches nothing until a token needs the keys.
func NewKeySet(jwksURL string, client *http.Client, opts KeySetOptions) *KeySet {
	if client == nil {
		client = resend.Client()
	}
	if opts.RefetchInterval <= 0 {
		opts.RefetchInterval = DefaultRefetchInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &KeySet{url: jwksURL, client: client, interval: opts.RefetchInterval, now: opts.Now}
}

// VerifySignature returns the payload of jwt, a compact JWS, if one of the issuer's keys
// verifies its signature. It checks nothing else: use it through an oidc.IDTokenVerifier
// (Server.Verify), which checks the algorithm, the issuer and the claims. When the keys it
// needs could not be fetched, the error wraps ErrKeysUnavailable.
func (s *KeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("malformed jwt: not one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	s.mu.Lock()
	keys := s.keys
	s.mu.Unlock()
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	keys, err = s.refetch(ctx)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, errors.New("no key of the issuer verifies the signature")
}

// verifyWith returns the payload of jws if one of keys with ID kid (any key when kid is
// empty) verifies it.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for _, k := range keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&k); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// refetch returns the keys of a fetch: a new one if none is under way and the last one
// started at least the interval ago, the one under way, or else the last one's outcome.
func (s *KeySet) refetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	f := s.fetching
	if f == nil && !s.last.IsZero() && s.now().Sub(s.last) < s.interval {
		keys, err := s.keys, s.lastErr
		s.mu.Unlock()
		return keys, err
	}
	if f == nil {
		f = &keyFetch{done: make(chan struct{})}
		s.fetching, s.last = f, s.now()
		s.mu.Unlock()
		s.fetch(ctx, f)
		return f.keys, f.err
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.keys, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for them: %w", ErrKeysUnavailable, ctx.Err())
	}
}

// fetch runs f: it reads the keys, keeps them (or the failure), and then lets the callers
// that wait for f go. The request of ctx may end before the fetch does: the fetch keeps
// only ctx's values.
func (s *KeySet) fetch(ctx context.Context, f *keyFetch) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keysFetchTimeout)
	defer cancel()
	keys, err := s.get(ctx)
	s.mu.Lock()
	if err != nil {
		s.lastErr = fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	} else {
		s.keys, s.lastErr = keys, nil
	}
	f.keys, f.err = s.keys, s.lastErr
	s.fetching = nil
	s.mu.Unlock()
	close(f.done)
}

// get reads the JWKS document. It keeps the signing keys it can use and skips the others
// (another use, an algorithm or key type go-jose does not know), as RFC 7517, section 5,
// asks; a document without any usable key is an error.
func (s *KeySet) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the JWKS URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %d", s.url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("GET %s: the key set is larger than %d bytes", s.url, maxKeySetBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET %s: not a JWKS: %w", s.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if k.Algorithm != "" && !slices.Contains(signingAlgorithms, jose.SignatureAlgorithm(k.Algorithm)) {
			continue
		}
		if k = k.Public(); !k.Valid() { // a symmetric key has no public half
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: no signing key urlflow can use", s.url)
	}
	return keys, nil
}
