package e2e

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/internal/redistest"
)

// TestUpgradeAndRollbackLoseNothing upgrades a running deployment, two replicas of `urlflow
// dev` on one redis-server, from the previous revision's binary (HEAD~1, or
// URLFLOW_UPGRADE_FROM) to this one, one replica at a time, with push-style tool calls
// waiting for their users on both, and then rolls one replica back. It proves that:
//
//   - a replica stopped for the upgrade drains: its waiting calls, completed through the
//     other replica's pages, answer "stored", and it exits 0 by itself;
//   - while the two binaries run side by side, each completes the flows the other started,
//     and a form page rendered by the old binary is accepted by the new one;
//   - after the upgrade every credential, stored by either binary before, during or after
//     it, works with call_api, is the value its user entered, and every flow's record says
//     complete; neither binary logs a panic, a data race or an error;
//   - rolled back, the old binary uses credentials the new one stored and completes a flow
//     the new one started: what docs/production.md ("Upgrades and rollback") relies on.
func TestUpgradeAndRollbackLoseNothing(t *testing.T) {
	t.Parallel()
	old := previousBinary(t)
	d := newDeployment(t)
	a, b := d.start(t, old), d.start(t, old)

	early := startUpgradeFlow(t, a, "early")
	early.finishOn(t, a)
	early.requireStored(t)
	onA, onB := startUpgradeFlows(t, a, "a", 3), startUpgradeFlows(t, b, "b", 3)
	onA[0].openForm(t, a) // forms rendered by the old binary, posted after the upgrade began
	onB[0].openForm(t, b)

	a = d.replace(t, a, binary, onA, b) // A's calls are completed on B while A drains
	requireSessionUnknown(t, a, onA[1]) // its session lived on A
	for _, f := range onB[:2] {         // flows of the old binary completed by the new one
		f.finishOn(t, a)
		f.requireStored(t)
	}
	mixed := startUpgradeFlow(t, a, "mixed") // a flow of the new binary completed by the old one
	mixed.finishOn(t, b)
	mixed.requireStored(t)
	b = d.replace(t, b, binary, onB[2:], a)

	flows := append(append([]*upgradeFlow{early, mixed}, onA...), onB...)
	for i, f := range flows {
		f.requireUsable(t, []*server{a, b}[i%2])
		f.requireComplete(t, b)
	}

	a = d.replace(t, a, old, nil, nil) // the rollback
	back := startUpgradeFlow(t, b, "back")
	back.finishOn(t, a)
	back.requireStored(t)
	for _, f := range append(flows, back) {
		f.requireComplete(t, a)
		if d.binaries[f.storedBy] == binary {
			f.requireUsable(t, a)
		}
	}
	back.requireUsable(t, b)
	d.requireCleanLogs(t)
}

// previousBinary builds urlflow as it was at the revision URLFLOW_UPGRADE_FROM names
// (HEAD~1 if unset) from the repository's own history, with the race detector when this
// test has it, and returns its path.
func previousBinary(t *testing.T) string {
	t.Helper()
	rev := cmp.Or(os.Getenv("URLFLOW_UPGRADE_FROM"), "HEAD~1")
	root := strings.TrimSpace(runGit(t, "..", "rev-parse", "--show-toplevel"))
	commit, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		t.Fatal(missingRevision(rev, strings.TrimSpace(runGit(t, root, "rev-parse", "--is-shallow-repository")) == "true"))
	}
	id := strings.TrimSpace(string(commit))
	t.Logf("upgrading from %s = %s", rev, strings.TrimSpace(runGit(t, root, "log", "-1", "--format=%h %s", id)))

	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", id)
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin, _ = archive.StdoutPipe()
	untar.Stderr, archive.Stderr = os.Stderr, os.Stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v", id, err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar -x of git archive %s: %v", id, err)
	}
	return buildIn(t, src)
}

// missingRevision says why the test cannot build the binary it upgrades from, and what to do.
func missingRevision(rev string, shallow bool) string {
	msg := "the upgrade test builds the binary it upgrades from at revision " + rev +
		" (URLFLOW_UPGRADE_FROM, HEAD~1 if unset), and this repository does not have it"
	if shallow {
		return msg + ": it is a shallow clone. Fetch more history (git fetch --deepen=1, or " +
			"git fetch --unshallow), or set URLFLOW_UPGRADE_FROM to a revision it has."
	}
	return msg + ". Set URLFLOW_UPGRADE_FROM to a revision it has (a tag such as v0.1.0, " +
		"after git fetch --tags, or a commit)."
}

// buildIn builds ./cmd/urlflow in the module at dir and returns the binary's path. The
// race detector is on when this test has it, as for the package's binary. -trimpath keeps
// the temporary directory's name out of the build, so that the build cache serves the next
// run of the same revision.
func buildIn(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "urlflow-old")
	args := []string{"build", "-trimpath", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/urlflow")...)
	build.Dir = dir
	started := time.Now()
	if output, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(build.Args[1:], " "), err, output)
	}
	t.Logf("built the previous binary in %s", time.Since(started).Round(time.Second))
	return out
}

// runGit runs git in dir and returns its standard output; it fails the test on an error.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// deployment is the replicas of one urlflow deployment: one Redis and one ConfigHome (the
// development keys), so that every replica reads what the others write.
type deployment struct {
	rs   *redistest.Server
	home string
	// binaries maps each replica started to the binary it runs; all of them are checked
	// by requireCleanLogs.
	binaries map[*server]string
}

// newDeployment starts the deployment's redis-server; no replica runs yet.
func newDeployment(t *testing.T) *deployment {
	return &deployment{rs: redistest.Start(t), home: t.TempDir(), binaries: map[*server]string{}}
}

// start starts a replica of the deployment on bin. Its grace is long enough for any flow
// the test completes while it drains.
func (d *deployment) start(t *testing.T, bin string) *server {
	t.Helper()
	s := startServer(t, serverConfig{Redis: d.rs, ConfigHome: d.home, Binary: bin,
		Env: []string{"URLFLOW_SHUTDOWN_GRACE=60s"}})
	d.binaries[s] = bin
	return s
}

// replace stops s with SIGTERM and starts a replica on bin in its place, as a rolling
// upgrade does. While s drains, the flows waiting on it are completed through the pages
// of through, their calls must answer "stored", and s must then exit 0 by itself.
func (d *deployment) replace(t *testing.T, s *server, bin string, waiting []*upgradeFlow, through *server) *server {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, f := range waiting {
		f.finishOn(t, through)
	}
	for _, f := range waiting {
		f.requireStored(t)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the replica at %s did not exit within 30s of its last tool call", s.BaseURL)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the replica at %s exited with status %d, want 0:\n%s", s.BaseURL, code, s.Output())
	}
	return d.start(t, bin)
}

// badLogLine matches what no replica may log during the upgrade: a panic, a data race, an
// error, a request answered 5xx, or a warning about data it could not read.
var badLogLine = regexp.MustCompile(`panic|DATA RACE|level=ERROR|status=5\d\d|` +
	`level=WARN.*(?i:decod|unmarshal|not understood|invalid|corrupt|unknown)`)

// requireCleanLogs checks that no replica, on either binary, logged a line badLogLine
// matches.
func (d *deployment) requireCleanLogs(t *testing.T) {
	t.Helper()
	for s, bin := range d.binaries {
		for _, line := range strings.Split(s.Output(), "\n") {
			if badLogLine.MatchString(line) {
				t.Errorf("the replica at %s (%s) logged: %s", s.BaseURL, filepath.Base(bin), line)
			}
		}
	}
}

// upgradeFlow is one user's push-style set_secret, started on one replica and completed
// on the pages of another.
type upgradeFlow struct {
	user string
	// value is the demo key the user enters, different for every flow, so that call_api
	// shows which one is stored.
	value  string
	c      *client
	call   <-chan callResult
	params *sdk.ElicitParams
	// browser and form are set when openForm opened the pages before the flow completes.
	browser *formBrowser
	form    *webPage
	// storedBy is the replica whose pages stored the value.
	storedBy *server
}

// startUpgradeFlows starts n flows on s for users prefix1 to prefixN.
func startUpgradeFlows(t *testing.T, s *server, prefix string, n int) []*upgradeFlow {
	t.Helper()
	flows := make([]*upgradeFlow, n)
	for i := range flows {
		flows[i] = startUpgradeFlow(t, s, fmt.Sprintf("%s%d", prefix, i+1))
	}
	return flows
}

// startUpgradeFlow connects user's MCP client to s, calls set_secret, and waits for the
// elicitation the call is waiting on.
func startUpgradeFlow(t *testing.T, s *server, user string) *upgradeFlow {
	t.Helper()
	f := &upgradeFlow{user: user, value: "demo_" + rand.Text()}
	f.c = connect(t, s, clientConfig{Token: s.devToken(user), URLMode: true})
	f.call = f.c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	f.params = f.c.nextElicitation(30 * time.Second)
	return f
}

// id returns the flow's elicitation ID.
func (f *upgradeFlow) id() string { return path.Base(f.params.URL) }

// openForm signs in on s, opens the flow's link there, continues, and keeps the secret form
// for finishOn to post.
func (f *upgradeFlow) openForm(t *testing.T, s *server) {
	t.Helper()
	f.browser = newFormBrowser(t, s, f.user)
	if page := f.browser.open(s.BaseURL + "/e/" + f.id()); page.Status != http.StatusOK {
		t.Fatalf("opening %s on %s answered %d: %s", f.id(), s.BaseURL, page.Status, page.Text())
	}
	form := f.browser.continueToForm(f.id())
	f.form = &form
}

// finishOn enters the flow's value on the pages of s: the whole way, or, after openForm,
// by posting the form opened then (with the cookie of that sign-in).
func (f *upgradeFlow) finishOn(t *testing.T, s *server) {
	t.Helper()
	f.storedBy = s
	if f.form == nil {
		newFormBrowser(t, s, f.user).completeSecret(s.BaseURL+"/e/"+f.id(), f.value)
		return
	}
	f.browser.s = s
	done := f.browser.post("/e/"+f.id()+"/secret", url.Values{"csrf": {f.form.csrf(t)}, "secret": {f.value}})
	if done.Status != http.StatusOK || !strings.Contains(strings.ToLower(done.Text()), "stored") {
		t.Fatalf("posting the form of %s opened earlier to %s answered %d: %s", f.id(), s.BaseURL, done.Status, done.Text())
	}
}

// requireStored waits for the flow's set_secret and requires "stored".
func (f *upgradeFlow) requireStored(t *testing.T) {
	t.Helper()
	res := await(t, f.call, time.Minute)
	if res.IsError || str(structured(t, res), "status") != "stored" {
		t.Fatalf("%s's set_secret answered %s, want stored", f.user, text(res))
	}
}

// requireUsable calls call_api as the flow's user on s (a new session) and requires the
// demo API to see the account of the value this flow stored.
func (f *upgradeFlow) requireUsable(t *testing.T, s *server) {
	t.Helper()
	c := connect(t, s, clientConfig{Token: s.devToken(f.user), URLMode: true})
	words, sc := whoami(t, c)
	if sc["status"] != float64(http.StatusOK) || !strings.Contains(words, `"account":"`+demoapi.Account(f.value)+`"`) {
		t.Fatalf("call_api as %s on %s: %s %v, want the account of the value stored on %s",
			f.user, s.BaseURL, words, sc, f.storedBy.BaseURL)
	}
	c.session.Close()
}

// requireComplete reads the flow's record on s with the operator token and requires it
// complete.
func (f *upgradeFlow) requireComplete(t *testing.T, s *server) {
	t.Helper()
	if e := s.status(f.id(), s.OperatorToken); e.State != "complete" {
		t.Fatalf("the record of %s's flow %s says %s, want complete (history %v)", f.user, f.id(), e.State, e.events())
	}
}

// requireSessionUnknown checks what the 2025-11-25 client of f, whose session lived on a
// replica that stopped, sees when it reaches s with its session ID: 404, upon which a
// client starts a new session.
func requireSessionUnknown(t *testing.T, s *server, f *upgradeFlow) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	req, _ := http.NewRequest(http.MethodPost, s.MCPURL, strings.NewReader(body))
	req.Header.Set("Mcp-Session-Id", f.c.SessionID())
	req.Header.Set("MCP-Protocol-Version", f.c.ProtocolVersion())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: &recorder{token: s.devToken(f.user)}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a session of the stopped replica on %s: status %d, want 404", s.BaseURL, resp.StatusCode)
	}
}
