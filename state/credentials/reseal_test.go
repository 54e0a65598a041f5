package credentials

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/vault"
)

// Environment of the reseal helper process (TestResealHelperProcess).
const (
	helperRedisEnv = "URLFLOW_TEST_RESEAL_REDIS"
	helperKeysEnv  = "URLFLOW_TEST_RESEAL_KEYS"
)

// resealUsers and resealNames make resealUsers × resealNames credentials.
const (
	resealUsers = 1000
	resealNames = 10
)

func resealUser(i int) state.User {
	return state.User{Issuer: "https://id.example", Subject: fmt.Sprintf("user-%04d", i)}
}

func resealValue(u, n int) string { return fmt.Sprintf("secret %d/%d", u, n) }

func mustRing(t testing.TB, text string) *vault.KeyRing {
	t.Helper()
	r, err := vault.ParseKeyRing(text)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// seedSealed stores users × names credentials sealed with ring, and indexes them, in
// pipelines, as the step that completes flows would one by one.
func seedSealed(t testing.TB, rdb redis.UniversalClient, ring *vault.KeyRing, users, names int) {
	t.Helper()
	ctx := context.Background()
	v := vault.NewVault(ring)
	for u := range users {
		user := resealUser(u)
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for n := range names {
				name := fmt.Sprintf("slot%d", n)
				sealed, err := v.Seal(user, name, state.NewSecret(resealValue(u, n)))
				if err != nil {
					return err
				}
				c := &Credential{Name: name, Kind: state.KindSecret, StoredAt: time.Now().UTC(), Sealed: sealed}
				if err := Queue(ctx, p, user, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, keyIDsKey, ring.ActiveID())
			for n := range names {
				p.SAdd(ctx, sealedKey(ring.ActiveID()), Key(user.Key(), fmt.Sprintf("slot%d", n)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// keyIDsStored counts the stored credentials by the key that wraps them, by reading each.
func keyIDsStored(t *testing.T, rdb redis.UniversalClient) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := state.ScanKeys(t.Context(), rdb, credentialKeyPattern, func(key string) error {
		doc, err := rdb.Get(t.Context(), key).Bytes()
		if err != nil {
			return err
		}
		out[sealedKeyID(doc)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResealHelperProcess is the reseal that TestResealKilledMidwayAndRunAgainLosesNothing
// runs in a process of its own, to kill it: not a test by itself.
func TestResealHelperProcess(t *testing.T) {
	addr := os.Getenv(helperRedisEnv)
	if addr == "" {
		t.Skip("run by TestResealKilledMidwayAndRunAgainLosesNothing")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	s := NewStore(rdb, Options{Logger: quiet})
	_, err := s.Reseal(context.Background(), vault.NewVault(mustRing(t, os.Getenv(helperKeysEnv))), ResealOptions{
		Batch: 100,
		Progress: func(p ResealProgress) {
			// No pause: the kill lands wherever the next batch is (reads, index, writes).
			fmt.Printf("resealed %d\n", p.Resealed)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResealKilledMidwayAndRunAgainLosesNothing stores 10,000 credentials under key old,
// makes new the active key, runs reseal in a process that is killed (SIGKILL) midway, runs
// it again to the end, and then opens every credential with a ring that no longer holds
// old: each has its value, and the key counts say new protects all of them.
func TestResealKilledMidwayAndRunAgainLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 credentials")
	}
	started := time.Now()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	oldEntry, newEntry := vault.GenerateKeyRing("old"), vault.GenerateKeyRing("new")
	seedSealed(t, rdb, mustRing(t, oldEntry), resealUsers, resealNames)
	total := resealUsers * resealNames
	s := NewStore(rdb, Options{Logger: quiet})
	if counts, err := s.KeyCounts(t.Context()); err != nil || counts.Count("old") != int64(total) {
		t.Fatalf("counts before: %+v, %v", counts, err)
	}

	// The first run, killed once it has resealed a good part.
	cmd := exec.Command(os.Args[0], "-test.run=^TestResealHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperRedisEnv+"="+srv.Addr, helperKeysEnv+"="+newEntry+","+oldEntry)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killedAt := -1
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "resealed "))
		if err == nil && n >= total/3 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killedAt = n
			break
		}
	}
	go func() { // drain what is left, so that Wait returns
		for lines.Scan() {
		}
	}()
	waitErr := cmd.Wait()
	if killedAt < 0 {
		t.Fatalf("the reseal ended before it was killed: %v", waitErr)
	}
	midway := keyIDsStored(t, rdb)
	t.Logf("killed after %d reported resealed; stored then: %v (%v)", killedAt, midway, waitErr)
	if midway["old"] == 0 || midway["new"] == 0 || midway["old"]+midway["new"] != total {
		t.Fatalf("after the kill: %v, want some under each key and %d in all", midway, total)
	}

	// The second run, to the end: what the first resealed is skipped.
	p, err := s.Reseal(t.Context(), vault.NewVault(mustRing(t, newEntry+","+oldEntry)), ResealOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Seen != total || p.Resealed != midway["old"] || p.Current != midway["new"] || p.Failed != 0 {
		t.Errorf("second run: %+v, want %d seen, %d resealed, %d already under new", p, total, midway["old"], midway["new"])
	}
	if after := keyIDsStored(t, rdb); after["new"] != total || len(after) != 1 {
		t.Errorf("after the second run: %v", after)
	}
	counts, err := s.KeyCounts(t.Context())
	if err != nil || counts.Count("new") != int64(total) || counts.Count("old") != 0 || counts.CountedAt == nil {
		t.Errorf("counts after: %+v, %v", counts, err)
	}
	withoutOld := mustRing(t, newEntry)
	if err := s.CheckKeys(t.Context(), withoutOld); err != nil {
		t.Errorf("a ring without old: %v", err)
	}

	// Every credential opens without the old key, through the store and the vault.
	v := vault.NewVault(withoutOld)
	for u := range resealUsers {
		user := resealUser(u)
		for n := range resealNames {
			name := fmt.Sprintf("slot%d", n)
			c, err := s.Get(t.Context(), user, name)
			if err != nil {
				t.Fatal(err)
			}
			secret, err := v.Open(user, name, c.Sealed)
			if err != nil || secret.Reveal() != resealValue(u, n) {
				t.Fatalf("%s of user %d: %v", name, u, err)
			}
		}
	}
	t.Logf("%d credentials: resealed %d before the kill and %d after, in %v in all", total, midway["new"], p.Resealed,
		time.Since(started).Round(time.Millisecond))

	// A third run has nothing to do.
	if p, err := s.Reseal(t.Context(), v, ResealOptions{}); err != nil || p.Resealed != 0 || p.Current != total {
		t.Errorf("third run: %+v, %v", p, err)
	}
}

// TestResealNeverOverwritesAConcurrentWrite reseals while credentials are replaced under
// the new key: every replaced credential keeps its new value.
func TestResealNeverOverwritesAConcurrentWrite(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	oldEntry, newEntry := vault.GenerateKeyRing("old"), vault.GenerateKeyRing("new")
	const users, names = 200, 5
	seedSealed(t, rdb, mustRing(t, oldEntry), users, names)
	ring := mustRing(t, newEntry+","+oldEntry)
	v := vault.NewVault(ring)
	s := NewStore(rdb, Options{Logger: quiet})

	var wg sync.WaitGroup
	wg.Go(func() {
		for u := range users {
			user := resealUser(u)
			sealed, err := v.Seal(user, "slot0", state.NewSecret("replaced"))
			if err != nil {
				t.Error(err)
				return
			}
			if err := replaceSealed(t, s, user, "slot0", sealed); err != nil {
				t.Error(err)
				return
			}
		}
	})
	if _, err := s.Reseal(t.Context(), v, ResealOptions{Batch: 50}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	for u := range users {
		user := resealUser(u)
		for n := range names {
			name := fmt.Sprintf("slot%d", n)
			c, err := s.Get(t.Context(), user, name)
			if err != nil {
				t.Fatal(err)
			}
			want := resealValue(u, n)
			if n == 0 {
				want = "replaced"
			}
			secret, err := vault.NewVault(mustRing(t, newEntry)).Open(user, name, c.Sealed)
			if err != nil || secret.Reveal() != want {
				t.Fatalf("%s of user %d: %q, %v; want %q", name, u, secret.Reveal(), err, want)
			}
		}
	}
	if counts, err := s.KeyCounts(t.Context()); err != nil || counts.Count("new") != users*names || counts.Count("old") != 0 {
		t.Errorf("counts: %+v, %v", counts, err)
	}
}

// TestAResealWithoutTheOldKeyFailsNamingItAndChangesNothing runs reseal with a ring that
// lost the key of some credentials: it says which key, and leaves them as they are.
func TestAResealWithoutTheOldKeyFailsNamingItAndChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	oldEntry, newEntry := vault.GenerateKeyRing("old"), vault.GenerateKeyRing("new")
	seedSealed(t, rdb, mustRing(t, oldEntry), 3, 2)
	s := NewStore(rdb, Options{Logger: quiet})
	p, err := s.Reseal(t.Context(), vault.NewVault(mustRing(t, newEntry)), ResealOptions{})
	if err == nil || !strings.Contains(err.Error(), "old") || p.Failed != 6 {
		t.Fatalf("reseal without old: %+v, %v", p, err)
	}
	if stored := keyIDsStored(t, rdb); stored["old"] != 6 {
		t.Errorf("stored: %v", stored)
	}
	if err := s.CheckKeys(t.Context(), mustRing(t, newEntry)); err == nil || !strings.Contains(err.Error(), `"old" (6)`) {
		t.Errorf("CheckKeys: %v", err)
	}
}

// TestTheKeyCountsFollowRefreshesAndDeletes replaces one credential under a new key and
// deletes another: the counts move with them, with no full pass.
func TestTheKeyCountsFollowRefreshesAndDeletes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	oldEntry, newEntry := vault.GenerateKeyRing("old"), vault.GenerateKeyRing("new")
	seedSealed(t, rdb, mustRing(t, oldEntry), 1, 3)
	s := NewStore(rdb, Options{Logger: quiet})
	user := resealUser(0)
	sealed, err := vault.NewVault(mustRing(t, newEntry+","+oldEntry)).Seal(user, "slot0", state.NewSecret("refreshed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := replaceSealed(t, s, user, "slot0", sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(t.Context(), user, "slot1", state.ActorUser, "test"); err != nil {
		t.Fatal(err)
	}
	counts, err := s.KeyCounts(t.Context())
	if err != nil || counts.Count("new") != 1 || counts.Count("old") != 1 {
		t.Errorf("counts: %+v, %v; want new 1 (refreshed), old 1 (slot1 deleted)", counts, err)
	}
}

// replaceSealed stores sealed as the value of user's credential name, as a refresh does.
func replaceSealed(t *testing.T, s *Store, user state.User, name string, sealed vault.Sealed) error {
	c, err := s.Get(t.Context(), user, name)
	if err != nil {
		return err
	}
	return s.Update(t.Context(), user, c, func(c *Credential) { c.Sealed = sealed })
}
