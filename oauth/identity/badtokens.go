package identity

import (
	"crypto/sha256"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/urlflow/urlflow/internal/expiring"
)

// BadTokenLimit is how many bearer tokens that do not verify one client address may send
// per window before RequireBearer stops checking its tokens. The zero value limits
// nothing.
type BadTokenLimit struct {
	Failures int
	Window   time.Duration
}

// Bounds of what BadTokens keeps in memory.
const (
	// badTokenClients bounds the client addresses counted; past it, the one counted
	// longest ago is forgotten.
	badTokenClients = 10_000
	// goodTokens bounds the tokens remembered as verified, each for goodTokenLifetime at
	// most and never past its expiry.
	goodTokens        = 10_000
	goodTokenLifetime = time.Hour
)

// BadTokens counts, in memory and per client address, the bearer tokens that do not
// verify, for RequireBearer. Checking a token may make urlflow call the issuer (a key
// fetch, an introspection), and a stranger must not set the pace of those calls: once an
// address has sent Failures bad tokens within a Window (which starts at its first
// failure), RequireBearer answers it 429 without checking its tokens until the window
// ends. A token that verified in the last hour is still checked, so that one bad client
// behind an address that many share (a NAT, a proxy) does not lock out the users who were
// signed in before it; a token never seen before from that address waits like a bad one,
// since telling it apart would take the very check that is refused.
//
// An IPv6 client is counted by its /64, which one client usually holds whole. Nothing
// goes to Redis: each replica counts on its own, so N replicas allow N times the limit.
type BadTokens struct {
	limit      BadTokenLimit
	clientAddr func(*http.Request) netip.Addr
	now        func() time.Time

	mu       sync.Mutex
	failures *expiring.Map[netip.Prefix, *failureWindow]
	good     *expiring.Map[[sha256.Size]byte, struct{}]
}

// failureWindow counts the bad tokens of one client address in one window.
type failureWindow struct {
	start  time.Time
	count  int
	warned bool // the first refusal of the window was reported
}

// NewBadTokens returns BadTokens that count under limit, by the client address that
// clientAddr reads from a request. It returns nil, which RequireBearer takes as no limit,
// when limit limits nothing.
func NewBadTokens(limit BadTokenLimit, clientAddr func(*http.Request) netip.Addr) *BadTokens {
	if limit.Failures <= 0 || limit.Window <= 0 {
		return nil
	}
	return &BadTokens{
		limit: limit, clientAddr: clientAddr, now: time.Now,
		failures: expiring.New[netip.Prefix, *failureWindow](badTokenClients),
		good:     expiring.New[[sha256.Size]byte, struct{}](goodTokens),
	}
}

// refusal is the answer of BadTokens.check for a request whose token is not checked.
type refusal struct {
	client     netip.Prefix
	retryAfter time.Duration
	// first is set on the first refusal of the window, which RequireBearer logs.
	first bool
}

// check returns a refusal when r comes from a client address over the limit and token did
// not verify recently.
func (b *BadTokens) check(r *http.Request, token string) (refusal, bool) {
	if b == nil {
		return refusal{}, false
	}
	client, now := clientKey(b.clientAddr(r)), b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.failures.Get(client, now)
	if !ok || w.count < b.limit.Failures {
		return refusal{}, false
	}
	if _, good := b.good.Get(sha256.Sum256([]byte(token)), now); good {
		return refusal{}, false
	}
	first := !w.warned
	w.warned = true
	return refusal{client: client, retryAfter: w.start.Add(b.limit.Window).Sub(now), first: first}, true
}

// failed counts a token from r that did not verify.
func (b *BadTokens) failed(r *http.Request) {
	if b == nil {
		return
	}
	client, now := clientKey(b.clientAddr(r)), b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.failures.Get(client, now); ok {
		w.count++
		return
	}
	b.failures.Set(client, &failureWindow{start: now, count: 1}, now.Add(b.limit.Window), now)
}

// verified remembers token, which verified and expires at expiry.
func (b *BadTokens) verified(token string, expiry time.Time) {
	if b == nil {
		return
	}
	now := b.now()
	until := now.Add(goodTokenLifetime)
	if !expiry.IsZero() && expiry.Before(until) {
		until = expiry
	}
	if !until.After(now) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.good.Set(sha256.Sum256([]byte(token)), struct{}{}, until, now)
}

// clientKey is what a client address is counted by: an IPv4 address, or the /64 of an
// IPv6 one. Requests whose address is unknown share the zero Prefix.
func clientKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}
