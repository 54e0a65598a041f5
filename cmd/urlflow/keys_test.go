package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

func TestKeysGeneratePrintsAnEntryThatURLFLOW_KEYSTakes(t *testing.T) {
	entries := map[string]bool{}
	for range 2 {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), []string{"keys", "generate"}, envOf(nil), nil, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		entry := strings.TrimSuffix(out.String(), "\n")
		if strings.Contains(entry, "\n") {
			t.Fatalf("stdout has more than the entry: %q", out.String())
		}
		ring, err := vault.ParseKeyRing(entry)
		if err != nil {
			t.Fatalf("entry %q does not parse as URLFLOW_KEYS: %v", entry, err)
		}
		if !strings.HasPrefix(ring.ActiveID(), "k") || !strings.Contains(errOut.String(), "URLFLOW_KEYS") {
			t.Errorf("key ID %q, stderr %q: want a k… ID and a line on how to add it", ring.ActiveID(), errOut.String())
		}
		entries[entry] = true
	}
	if len(entries) != 2 {
		t.Error("two runs printed the same key")
	}

	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "generate", "--kid", "k2"}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if ring, err := vault.ParseKeyRing(strings.TrimSpace(out.String())); err != nil || ring.ActiveID() != "k2" {
		t.Errorf("--kid k2 printed %q", out.String())
	}
	var usage *usageError
	if err := run(t.Context(), []string{"keys", "generate", "--kid", "no spaces"}, envOf(nil), nil, io.Discard, io.Discard); !errors.As(err, &usage) {
		t.Errorf("a bad --kid: %v, want a usage error", err)
	}
}

func TestTheOldServiceKeyCommandIsHiddenFromHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "service-key") || !strings.Contains(out.String(), "keys ") {
		t.Errorf("help lists service-key, or not keys:\n%s", out.String())
	}
}

// storeSealed stores credential name of user sealed with ring, as the step that completes
// a flow does.
func storeSealed(t *testing.T, rdb redis.UniversalClient, ring *vault.KeyRing, user state.User, name string) {
	t.Helper()
	ctx := t.Context()
	sealed, err := vault.NewVault(ring).Seal(user, name, state.NewSecret("value of "+name))
	if err != nil {
		t.Fatal(err)
	}
	c := &credentials.Credential{Name: name, Kind: state.KindSecret, StoredAt: time.Now().UTC(), Sealed: sealed}
	if err := credentials.NoteSealing(ctx, rdb, user.Key(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { return credentials.Queue(ctx, p, user, c) }); err != nil {
		t.Fatal(err)
	}
	if err := credentials.Settle(ctx, rdb, user.Key(), name); err != nil {
		t.Fatal(err)
	}
}

// TestUrlflowRefusesToStartWhenAStoredCredentialNeedsAKeyThatLeftTheRing stores credentials
// under k1, then rotates in order: status counts them, reseal moves them to k2, and only a
// ring without k1 before the reseal makes dev refuse to start, naming k1.
func TestUrlflowRefusesToStartWhenAStoredCredentialNeedsAKeyThatLeftTheRing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	k1, k2 := vault.GenerateKeyRing("k1"), vault.GenerateKeyRing("k2")
	old := mustRing(t, k1)
	user := state.User{Issuer: "https://issuer.example", Subject: "alice"}
	for _, name := range []string{"github", "linear", "notion"} {
		storeSealed(t, rdb, old, user, name)
	}
	keysRun := func(keys string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, envOf(map[string]string{"URLFLOW_REDIS_URL": srv.URL(), "URLFLOW_KEYS": keys}), nil, &out, io.Discard)
		return out.String(), err
	}

	out, err := keysRun(k2+","+k1, "keys", "status")
	if err != nil || !regexpMatch(`k2\s+active\s+0`, out) || !regexpMatch(`k1\s+verify-only\s+3`, out) {
		t.Fatalf("status with [k2, k1]: %v\n%s", err, out)
	}

	// Without k1, status and dev name it.
	out, err = keysRun(k2, "keys", "status")
	if !errors.Is(err, credentials.ErrKeyMissing) || !strings.Contains(err.Error(), `"k1" (3)`) || !regexpMatch(`k1\s+MISSING\s+3`, out) {
		t.Errorf("status with [k2]: %v\n%s", err, out)
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = run(ctx, []string{"dev", "--addr", "127.0.0.1:0"}, envOf(map[string]string{"URLFLOW_REDIS_URL": srv.URL(), "URLFLOW_KEYS": k2}), nil, io.Discard, io.Discard)
	if !errors.Is(err, credentials.ErrKeyMissing) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("dev with a ring without k1 = %v, want a refusal naming k1", err)
	}

	if out, err := keysRun(k2+","+k1, "keys", "reseal"); err != nil || !strings.Contains(out, "resealed 3 credentials under key k2") {
		t.Fatalf("reseal: %v\n%s", err, out)
	}
	out, err = keysRun(k2, "keys", "status")
	if err != nil || !regexpMatch(`k2\s+active\s+3`, out) || strings.Contains(out, "k1") {
		t.Errorf("status with [k2] after reseal: %v\n%s", err, out)
	}
	secret, err := vault.NewVault(mustRing(t, k2)).Open(user, "linear", mustGet(t, rdb, user, "linear").Sealed)
	if err != nil || secret.Reveal() != "value of linear" {
		t.Errorf("after reseal, [k2] opens %q, %v", secret.Reveal(), err)
	}
}

func mustRing(t *testing.T, s string) *vault.KeyRing {
	t.Helper()
	r, err := vault.ParseKeyRing(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustGet(t *testing.T, rdb redis.UniversalClient, user state.User, name string) *credentials.Credential {
	t.Helper()
	c, err := credentials.NewStore(rdb, credentials.Options{}).Get(t.Context(), user, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
