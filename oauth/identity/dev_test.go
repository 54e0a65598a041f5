package identity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const audience = "http://127.0.0.1:8080/mcp"

func TestDevTokensVerifyAndNameTheUser(t *testing.T) {
	d := NewDev([]byte(strings.Repeat("k", 32)), audience)
	tok, err := d.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.User != d.User("alice") || id.User.Issuer != DevIssuer || id.Expiry.Before(time.Now().Add(DevTokenTTL-time.Minute)) {
		t.Fatalf("identity %+v", id)
	}
	ti := TokenInfo(id)
	if u, ok := UserOf(ti); !ok || u != id.User || !strings.Contains(ti.UserID, "alice") || !strings.Contains(ti.UserID, DevIssuer) {
		t.Fatalf("token info %+v", ti)
	}
}

func TestBadDevTokensAreRefusedWithoutQuotingThem(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	d := NewDev(key, audience)
	sign := func(claims jwt.Claims, method jwt.SigningMethod, k any) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	valid := jwt.RegisteredClaims{Issuer: DevIssuer, Subject: "alice", Audience: jwt.ClaimStrings{audience},
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
	with := func(change func(*jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := valid
		change(&c)
		return c
	}
	tests := map[string]string{
		"wrong audience": sign(with(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"http://other/mcp"} }), jwt.SigningMethodHS256, key),
		"wrong issuer":   sign(with(func(c *jwt.RegisteredClaims) { c.Issuer = "https://evil.example" }), jwt.SigningMethodHS256, key),
		"expired":        sign(with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour)) }), jwt.SigningMethodHS256, key),
		"no expiry":      sign(with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil }), jwt.SigningMethodHS256, key),
		"bad signature":  sign(valid, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32))),
		"alg none":       sign(valid, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType),
		"bad subject":    sign(with(func(c *jwt.RegisteredClaims) { c.Subject = "Alice Smith" }), jwt.SigningMethodHS256, key),
		"malformed":      "not-a-token",
		"empty":          "",
	}
	for name, tok := range tests {
		_, err := d.Verify(context.Background(), tok)
		if !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", name, err)
			continue
		}
		if len(tok) > 8 && strings.Contains(err.Error(), tok[:8]) {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
}

func TestDevNamesAreLimited(t *testing.T) {
	for _, bad := range []string{"", "Alice", "a b", "-x", strings.Repeat("a", 65), "a/b", "ä"} {
		if ValidDevName(bad) {
			t.Errorf("%q accepted", bad)
		}
		if _, err := NewDev([]byte("k"), audience).Issue(bad); err == nil {
			t.Errorf("issued a token for %q", bad)
		}
	}
	for _, good := range []string{"a", "alice", "bob.smith", "ci_user-2"} {
		if !ValidDevName(good) {
			t.Errorf("%q refused", good)
		}
	}
}

func TestOperatorTokensMatchExactly(t *testing.T) {
	o := NewOperators([]string{"operator-token-one-123", "", "operator-token-two-456"}, []string{"operator-token-read-789"})
	for tok, want := range map[string]bool{
		"operator-token-one-123": true, "operator-token-two-456": true, "operator-token-read-789": true,
		"operator-token-one-12": false, "operator-token-one-1234": false, "": false,
	} {
		if got := o.Is(tok); got != want {
			t.Errorf("Is(%q) = %v, want %v", tok, got, want)
		}
	}
	one, _ := o.Match("operator-token-one-123")
	two, _ := o.Match("operator-token-two-456")
	read, _ := o.Match("operator-token-read-789")
	if one.ReadOnly || two.ReadOnly || !read.ReadOnly {
		t.Errorf("read-only: %v, %v, %v; want only the third", one.ReadOnly, two.ReadOnly, read.ReadOnly)
	}
	if one.Name == two.Name || !strings.HasPrefix(one.Name, "token ") || strings.Contains(one.Name, "operator-token") {
		t.Errorf("names %q and %q: want two different names that do not hold the tokens", one.Name, two.Name)
	}
	var none *Operators
	if none.Is("anything") || NewOperators(nil, nil).Is("") {
		t.Error("no operators configured, yet a token matched")
	}
}

// FuzzVerify checks that arbitrary input never panics the verifier or passes it.
func FuzzVerify(f *testing.F) {
	d := NewDev([]byte(strings.Repeat("k", 32)), audience)
	tok, _ := d.Issue("alice")
	f.Add(tok)
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := d.Verify(context.Background(), token)
		if err == nil && token != tok && id.User.Subject == "" {
			t.Fatalf("accepted %q without a subject", token)
		}
		if err != nil && !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("error not wrapping ErrInvalidToken: %v", err)
		}
	})
}
