package browser

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/gorilla/sessions"

	"github.com/urlflow/urlflow/internal/expiring"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/browsersession"
)

// Lifetimes of a browser session from its last save, in Redis and in its cookie.
const (
	// SessionTTL is how long a browser stays signed in without coming back.
	SessionTTL = 12 * time.Hour
	// SignInWindow is how long a session that names nobody is kept: long enough to sign in
	// (the development form, or the round trip to the issuer). A visitor who never signs in
	// costs Redis this long at most; the 12 hours start at sign-in.
	SignInWindow = 15 * time.Minute
)

// sessionStore is a gorilla/sessions Store whose data lives in Redis (through package
// state); the cookie holds only the session ID, signed. Values are strings.
type sessionStore struct {
	store  *browsersession.Store
	codecs []securecookie.Codec // the first signs, every one verifies
	name   string
	secure bool

	// seen remembers the data of each signed-in session as this replica last read or wrote
	// it, for sessionHintTTL: a page whose write checks that the session still holds it
	// (Browser.PageVisitor, flow.IfStill) starts from it instead of reading it.
	mu   sync.Mutex
	seen *expiring.Map[string, []byte]
}

// Bounds of sessionStore.seen: a few megabytes at most, for as long as a person takes
// between two pages of a flow.
const (
	sessionHintSize = 10_000
	sessionHintTTL  = 2 * time.Minute
)

func newSessionStore(store *browsersession.Store, hashKeys [][]byte, secure bool) *sessionStore {
	codecs := make([]securecookie.Codec, len(hashKeys))
	for i, k := range hashKeys {
		codecs[i] = securecookie.New(k, nil).MaxAge(int(SessionTTL / time.Second))
	}
	name := "urlflow_session"
	if secure {
		name = "__Host-urlflow_session" // pinned to this host, Secure, Path=/
	}
	return &sessionStore{store: store, codecs: codecs, name: name, secure: secure,
		seen: expiring.New[string, []byte](sessionHintSize)}
}

// remember notes data as what session id holds now (nil: it does not exist). Only sessions
// in their user's slot are kept: a step can check only those (flow.IfStill).
func (s *sessionStore) remember(id string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data == nil || !browsersession.InUserSlot(id) {
		s.seen.Delete(id)
		return
	}
	now := time.Now()
	s.seen.Set(id, data, now.Add(sessionHintTTL), now)
}

// hint returns the data of session id as this replica last read or wrote it, if it did in
// the last sessionHintTTL.
func (s *sessionStore) hint(id string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.Get(id, time.Now())
}

func (s *sessionStore) options() *sessions.Options {
	return &sessions.Options{
		Path:     "/",
		MaxAge:   int(SessionTTL / time.Second),
		Secure:   s.secure,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
}

// Get returns the session of r, cached for the request.
func (s *sessionStore) Get(r *http.Request, name string) (*sessions.Session, error) {
	return sessions.GetRegistry(r).Get(s, name)
}

// New loads the session named by r's cookie, or returns a new empty one. A cookie that does
// not verify or names a session that no longer exists gives a new session, not an error.
func (s *sessionStore) New(r *http.Request, name string) (*sessions.Session, error) {
	sess := sessions.NewSession(s, name)
	sess.Options = s.options()
	sess.IsNew = true
	id, ok := s.verifiedID(r)
	if !ok {
		return sess, nil
	}
	data, err := s.load(r, id)
	if errors.Is(err, state.ErrNotFound) {
		return sess, nil
	}
	if err != nil {
		return sess, err
	}
	values := map[string]string{}
	if err := json.Unmarshal(data, &values); err != nil {
		return sess, nil
	}
	for k, v := range values {
		sess.Values[k] = v
	}
	sess.ID = id
	sess.IsNew = false
	return sess, nil
}

// cookieID returns the session ID that r's cookie names, if it verifies.
func (s *sessionStore) cookieID(r *http.Request) (string, bool) {
	cookie, err := r.Cookie(s.name)
	if err != nil {
		return "", false
	}
	return s.decode(cookie.Value)
}

// verifiedID is cookieID, but without verifying the cookie again when the page read the
// session it names already (PageVisitor did, for the same request).
func (s *sessionStore) verifiedID(r *http.Request) (string, bool) {
	if p, ok := r.Context().Value(prefetchedKey{}).(prefetchedSession); ok {
		return p.id, true
	}
	return s.cookieID(r)
}

// decode returns the session ID that a session cookie's value names, if one of the
// codecs signed it.
func (s *sessionStore) decode(value string) (string, bool) {
	var id string
	if err := securecookie.DecodeMulti(s.name, value, &id, s.codecs...); err != nil {
		return "", false
	}
	return id, true
}

// prefetchedSession is the data of a browser session read before the session was asked
// for, together with the elicitation of the page (Browser.Visitor).
type prefetchedSession struct {
	id   string
	data []byte // nil: the session does not exist
}

type prefetchedKey struct{}

// withPrefetched returns r carrying the data of session id, read already.
func withPrefetched(r *http.Request, id string, data []byte) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), prefetchedKey{}, prefetchedSession{id: id, data: data}))
}

// load returns the data of session id: read with the page's elicitation (or taken from
// what this replica read before, for a page whose write checks it), or from Redis.
func (s *sessionStore) load(r *http.Request, id string) ([]byte, error) {
	if p, ok := r.Context().Value(prefetchedKey{}).(prefetchedSession); ok && p.id == id {
		if p.data == nil {
			return nil, state.ErrNotFound
		}
		return p.data, nil
	}
	data, err := s.store.Load(r.Context(), id)
	if err == nil || errors.Is(err, state.ErrNotFound) {
		s.remember(id, data)
	}
	return data, err
}

// Save writes sess to Redis and sets its cookie, both for SessionTTL once sess names
// a user and for SignInWindow before; a negative MaxAge deletes both.
func (s *sessionStore) Save(r *http.Request, w http.ResponseWriter, sess *sessions.Session) error {
	if sess.Options.MaxAge < 0 {
		if sess.ID != "" {
			s.remember(sess.ID, nil)
			if err := s.store.Delete(r.Context(), sess.ID); err != nil {
				return err
			}
		}
		http.SetCookie(w, sessions.NewCookie(sess.Name(), "", sess.Options))
		return nil
	}
	if sess.ID == "" {
		sess.ID = rand.Text()
		if u, signedIn := sessionUser(sess); signedIn {
			sess.ID = browsersession.UserSessionID(u.Key()) // kept in the user's slot
		}
	}
	values := map[string]string{}
	for k, v := range sess.Values {
		ks, kok := k.(string)
		vs, vok := v.(string)
		if !kok || !vok {
			return fmt.Errorf("save browser session: only string values are kept (key %v)", k)
		}
		values[ks] = vs
	}
	data, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("save browser session: %w", err)
	}
	ttl := SignInWindow
	if _, signedIn := sessionUser(sess); signedIn {
		ttl = SessionTTL
	}
	s.remember(sess.ID, nil) // until the save is known to have worked
	if err := s.store.Save(r.Context(), sess.ID, data, ttl); err != nil {
		return err
	}
	s.remember(sess.ID, data)
	encoded, err := securecookie.EncodeMulti(sess.Name(), sess.ID, s.codecs...)
	if err != nil {
		return fmt.Errorf("encode session cookie: %w", err)
	}
	options := *sess.Options
	options.MaxAge = int(ttl / time.Second)
	http.SetCookie(w, sessions.NewCookie(sess.Name(), encoded, &options))
	return nil
}

// rotate gives sess a new ID at its next Save and deletes the old one, so that a session
// ID known before sign-in is worthless after it.
func (s *sessionStore) rotate(r *http.Request, sess *sessions.Session) error {
	if sess.ID != "" {
		s.remember(sess.ID, nil)
		if err := s.store.Delete(r.Context(), sess.ID); err != nil {
			return err
		}
	}
	sess.ID = ""
	return nil
}

// Session values.
const (
	valueIssuer   = "iss"
	valueSubject  = "sub"
	valueName     = "name"
	valueSignedIn = "signed_in_at"
	// valueOperator is "1" when the sign-in's ID token made the user an operator.
	valueOperator = "operator"
	// A sign-in in progress (production identity).
	valueSignInState    = "signin_state"
	valueSignInNonce    = "signin_nonce"
	valueSignInVerifier = "signin_verifier"
	valueSignInNext     = "signin_next"
)

func sessionUser(sess *sessions.Session) (state.User, bool) {
	iss, _ := sess.Values[valueIssuer].(string)
	sub, _ := sess.Values[valueSubject].(string)
	u := state.User{Issuer: iss, Subject: sub}
	return u, iss != "" && sub != ""
}

// csrfKeys derive the CSRF token of a browser session. The token is an HMAC of the session
// ID, so it changes when the session rotates and needs no storage. The first key makes
// tokens; a token made by any of them is valid, so that a form opened before a key
// rotation can still be sent after it.
type csrfKeys [][]byte

func csrfToken(key []byte, sessionID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("csrf\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (k csrfKeys) token(sessionID string) string { return csrfToken(k[0], sessionID) }

func (k csrfKeys) valid(sessionID, token string) bool {
	if sessionID == "" || token == "" {
		return false
	}
	for _, key := range k {
		if hmac.Equal([]byte(csrfToken(key, sessionID)), []byte(token)) {
			return true
		}
	}
	return false
}
