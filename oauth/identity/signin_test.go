package identity

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/issuertest"
	"github.com/urlflow/urlflow/state"
	"golang.org/x/oauth2"
)

// testCallback is urlflow's /auth/callback, registered at the issuer.
const testCallback = testPublicURL + "/auth/callback"

// newSignIn is a BrowserSignIn at iss for its registered client, with alice signed in at
// the issuer.
func newSignIn(t testing.TB, iss *issuertest.Issuer) *BrowserSignIn {
	t.Helper()
	iss.AllowRedirect(testCallback)
	iss.SetAnswer(issuertest.Answer{User: issuertest.User{Subject: "alice-sub", PreferredUsername: "alice"}})
	return NewBrowserSignIn(discover(t, iss), ClientCredentials{ClientID: iss.ClientID, ClientSecret: iss.ClientSecret}, testCallback)
}

// answerOf starts a sign-in and returns the attempt and the query the issuer sends the
// browser back to urlflow with.
func answerOf(t testing.TB, iss *issuertest.Issuer, b *BrowserSignIn) (SignInAttempt, url.Values) {
	t.Helper()
	attempt, authURL := b.Start()
	back := iss.Authorize(t, authURL)
	if got := back.Scheme + "://" + back.Host + back.Path; got != testCallback {
		t.Fatalf("the issuer sent the browser to %s, want %s", got, testCallback)
	}
	return attempt, back.Query()
}

func TestBrowserSignInNamesTheUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		user issuertest.User
		want string
	}{
		{"username first", issuertest.User{Subject: "s-1", PreferredUsername: "alice", Email: "alice@example.com", Name: "Alice A."}, "alice"},
		{"then the email", issuertest.User{Subject: "s-1", Email: "alice@example.com", Name: "Alice A."}, "alice@example.com"},
		{"then the name", issuertest.User{Subject: "s-1", Name: "Alice A."}, "Alice A."},
		{"else the subject", issuertest.User{Subject: "s-1"}, "s-1"},
	}
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One issuer answers for one user at a time: these run one after another.
			iss.SetAnswer(issuertest.Answer{User: tt.user, Iss: iss.URL})
			attempt, query := answerOf(t, iss, b)
			got, err := b.Finish(t.Context(), attempt, query)
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if want := (SignedIn{User: state.User{Issuer: iss.URL, Subject: tt.user.Subject}, Name: tt.want}); got != want {
				t.Errorf("signed in %+v, want %+v", got, want)
			}
		})
	}
}

func TestSignInAsksForACodeWithPKCEAndNonce(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	attempt, authURL := b.Start()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != iss.AuthorizationEndpoint {
		t.Errorf("authorization endpoint %s, want %s", got, iss.AuthorizationEndpoint)
	}
	query := u.Query()
	for k, want := range map[string]string{
		"response_type": "code", "client_id": iss.ClientID, "redirect_uri": testCallback, "scope": "openid profile email",
		"state": attempt.State, "nonce": attempt.Nonce, "code_challenge": oauth2.S256ChallengeFromVerifier(attempt.Verifier), "code_challenge_method": "S256",
		"code_verifier": "", "client_secret": "", // "" for absent
	} {
		if query.Get(k) != want || (want == "" && query.Has(k)) {
			t.Errorf("authorization URL: %s = %q, want %q", k, query.Get(k), want)
		}
	}
	if strings.Contains(authURL, attempt.Verifier) || strings.Contains(authURL, iss.ClientSecret) {
		t.Error("the authorization URL carries the verifier or the client secret")
	}
	other, _ := b.Start()
	if other.State == attempt.State || other.Nonce == attempt.Nonce || other.Verifier == attempt.Verifier || attempt.State == attempt.Nonce {
		t.Errorf("attempts share values: %+v and %+v", attempt, other)
	}
	for name, v := range map[string]string{"state": attempt.State, "nonce": attempt.Nonce, "verifier": attempt.Verifier} {
		if len(v) < 26 {
			t.Errorf("the %s %q is too short to be unguessable", name, v)
		}
	}
}

// An answer that does not belong to the attempt kept in this browser is refused before the
// code is exchanged.
func TestSignInAnswersThatAreNotThisBrowsersAreRefused(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	tests := []struct {
		name   string
		change func(a *SignInAttempt, q url.Values)
	}{
		{"no state", func(_ *SignInAttempt, q url.Values) { q.Del("state") }},
		{"another state", func(_ *SignInAttempt, q url.Values) { q.Set("state", "forged-state") }},
		{"no attempt kept", func(a *SignInAttempt, _ url.Values) { *a = SignInAttempt{} }},
		{"no attempt kept, no state", func(a *SignInAttempt, q url.Values) { *a = SignInAttempt{}; q.Del("state") }},
		{"another issuer", func(_ *SignInAttempt, q url.Values) { q.Set("iss", "https://evil.example") }},
		{"the issuer with a trailing slash", func(_ *SignInAttempt, q url.Values) { q.Set("iss", iss.URL+"/") }},
		{"another state and a refusal", func(_ *SignInAttempt, q url.Values) {
			q.Set("state", "forged-state")
			q.Del("code")
			q.Set("error", "access_denied")
		}},
	}
	t.Cleanup(func() { // once every case has run
		if n := iss.Requests(iss.TokenEndpoint); n != 0 {
			t.Errorf("%d codes were exchanged, want none", n)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			attempt, query := answerOf(t, iss, b)
			tt.change(&attempt, query)
			_, err := b.Finish(t.Context(), attempt, query)
			if !errors.Is(err, ErrSignInState) {
				t.Fatalf("Finish: %v, want ErrSignInState", err)
			}
		})
	}
}

func TestSignInRefusedAtTheIssuer(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	for _, answer := range []issuertest.Answer{{Error: "access_denied"}, {Error: "access_denied", Iss: iss.URL}, {}} {
		iss.SetAnswer(answer)
		attempt, query := answerOf(t, iss, b)
		_, err := b.Finish(t.Context(), attempt, query)
		if !errors.Is(err, ErrSignInDenied) {
			t.Errorf("answer %+v: Finish = %v, want ErrSignInDenied", answer, err)
		}
	}
	if n := iss.Requests(iss.TokenEndpoint); n != 0 {
		t.Errorf("%d codes were exchanged, want none", n)
	}
}

func TestSignInWithAnotherNonceIsRefused(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	attempt, query := answerOf(t, iss, b)
	attempt.Nonce = "the-nonce-of-another-attempt"
	_, err := b.Finish(t.Context(), attempt, query)
	if !errors.Is(err, ErrSignInState) || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("Finish: %v, want ErrSignInState for the nonce", err)
	}
}

func TestSignInCodeNeedsItsVerifierAndIsSpentOnce(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)

	attempt, query := answerOf(t, iss, b)
	wrong := attempt
	wrong.Verifier = strings.Repeat("v", 43)
	_, err := b.Finish(t.Context(), wrong, query)
	if err == nil || errors.Is(err, ErrSignInState) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("Finish with another verifier: %v, want the exchange refused", err)
	}
	wantNoSecret(t, err, query.Get("code"), attempt.Verifier, wrong.Verifier, iss.ClientSecret)

	attempt, query = answerOf(t, iss, b)
	if _, err := b.Finish(t.Context(), attempt, query); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	_, err = b.Finish(t.Context(), attempt, query)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("Finish replayed: %v, want the exchange refused", err)
	}
	wantNoSecret(t, err, query.Get("code"), attempt.Verifier, iss.ClientSecret)
}

// The ID token the token endpoint returns must be the issuer's, for urlflow, current and
// for this attempt; anything else fails the sign-in without naming a secret.
func TestSignInRefusesAnIDTokenThatIsNotForIt(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	b := newSignIn(t, iss)
	stranger := issuertest.NewKey(t)
	tests := []struct {
		name   string
		change func(c map[string]any) // of the claims of a good ID token
		sign   func(claims map[string]any) string
		reason string
	}{
		{name: "no ID token", sign: func(map[string]any) string { return "" }, reason: "no ID token"},
		{name: "signed by another key", sign: func(c map[string]any) string { return stranger.Sign(t, c) }, reason: "bad signature"},
		{name: "for another client", change: func(c map[string]any) { c["aud"] = "another-client" }, reason: "verify the ID token"},
		{name: "of another issuer", change: func(c map[string]any) { c["iss"] = "https://evil.example" }, reason: "wrong issuer"},
		{name: "expired", change: func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }, reason: "verify the ID token"},
		{name: "without a nonce", change: func(c map[string]any) { delete(c, "nonce") }, reason: "nonce"},
	}
	for _, tt := range tests {
		// One token endpoint answers at a time: these run one after another.
		t.Run(tt.name, func(t *testing.T) {
			attempt, query := answerOf(t, iss, b)
			claims := map[string]any{"iss": iss.URL, "sub": "alice-sub", "aud": iss.ClientID, "nonce": attempt.Nonce,
				"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix()}
			if tt.change != nil {
				tt.change(claims)
			}
			sign := tt.sign
			if sign == nil {
				sign = func(c map[string]any) string { return iss.AccessToken(t, c) }
			}
			answer := map[string]any{"access_token": "at-never-in-errors", "token_type": "Bearer", "expires_in": 600}
			idToken := sign(claims)
			if idToken != "" {
				answer["id_token"] = idToken
			}
			iss.Override(iss.TokenEndpoint, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(answer)
			}))
			_, err := b.Finish(t.Context(), attempt, query)
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Finish: %v, want an error saying %q", err, tt.reason)
			}
			wantNoSecret(t, err, "at-never-in-errors", query.Get("code"), attempt.Verifier, iss.ClientSecret)
			wantNoPartOf(t, err, idToken)
		})
	}
}
