package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The Python package (clients/python) against urlflow: its live program
// (clients/python/live/flow.py) serves the service's webhook endpoint, creates an
// elicitation, the user enters a demo key in Chromium, the program hears of it by a
// webhook that it verifies with the service's secret, and calls the demo API through the
// proxy; neither its output nor the webhooks carry the key.
func TestThePythonPackageDelegatesAgainstUrlflow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	resource := "http://127.0.0.1:1/python-mcp"
	hookAddr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	config, key := hookedService(t, dir, "pyserver", resource, "http://"+hookAddr+"/urlflow-webhook", secret)
	s := startServer(t, serverConfig{Redis: redistest.Start(t), ConfigHome: filepath.Join(dir, "home"), ConfigFile: config})
	var tok struct {
		Token string `json:"token"`
	}
	if status := s.getJSON("/dev/token?user=quinn&resource="+resource, "", &tok); status != 200 {
		t.Fatalf("dev token: %d", status)
	}

	cmd := exec.Command("python3", "../clients/python/live/flow.py")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "URLFLOW_URL=" + s.BaseURL, "URLFLOW_SERVICE_KEY=" + key,
		"URLFLOW_WEBHOOK_SECRET=" + secret, "WEBHOOK_ADDR=" + hookAddr, "USER_TOKEN=" + tok.Token}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	type line struct {
		Event, URL, ID, Type, State, Status, Account string
		New                                          bool
		APIStatus                                    int `json:"apiStatus"`
	}
	var output strings.Builder // written by next only
	raw := readLines(stdout)
	next := func(event string) line {
		t.Helper()
		for {
			select {
			case text, ok := <-raw:
				if !ok {
					t.Fatalf("the Python flow ended before %q:\n%s", event, stderr.String())
				}
				output.WriteString(text + "\n")
				var l line
				if json.Unmarshal([]byte(text), &l) == nil && l.Event == event {
					return l
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("no %q from the Python flow in 2 minutes:\n%s", event, stderr.String())
			}
		}
	}
	asked := next("url")
	if !asked.New || !strings.HasPrefix(asked.URL, s.BaseURL+"/e/") {
		t.Fatalf("the create: %+v", asked)
	}
	demo := demoKey()
	newPerson(t, sharedBrowser(t), "quinn").completeSecret(t, asked.URL, demo)
	res := next("result")
	if res.State != "complete" || res.Status != "stored" || res.APIStatus != 200 || !strings.HasPrefix(res.Account, "demo-") {
		t.Fatalf("the result: %+v", res)
	}
	for text := range raw { // the rest of its output, until it exits
		output.WriteString(text + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the Python flow: %v\n%s", err, stderr.String())
	}
	requireNoKey(t, demo, output.String(), stderr.String(), s.Output())
}

// The Python example (clients/python/example/forecast.py) with the commands of its guide
// (docs/delegating-from-python.md) next to urlflow dev: it prints the link, the user
// enters a demo key in Chromium, and it prints the forecast from the demo API; started
// without urlflow, it says to start it first and exits 1.
func TestThePythonExampleRunsNextToUrlflowDev(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t)})
	cmd := exec.Command("python3", "../clients/python/example/forecast.py", "Paris")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "URLFLOW_URL=" + s.BaseURL}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out // Wait returns once all of it is read
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	var link string
	eventually(t, firstAsk, "the example's link", func() bool {
		_, rest, ok := strings.Cut(out.String(), "forecast: open ")
		if ok {
			link = strings.Fields(rest)[0]
		}
		return ok
	})
	demo := demoKey()
	newPerson(t, sharedBrowser(t), "alice").completeSecret(t, link, demo)
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil || !strings.Contains(out.String(), "sunny in Paris, says the demo API (HTTP 200) to account demo-") {
			t.Fatalf("the example: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the example did not end after the browser step:\n%s", out.String())
	}
	requireNoKey(t, demo, out.String())

	without := exec.Command("python3", "../clients/python/example/forecast.py")
	without.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("URLFLOW_URL=http://127.0.0.1:%d", redistest.FreePort(t))}
	said, err := without.CombinedOutput()
	if without.ProcessState.ExitCode() != 1 || !strings.Contains(string(said), "start it first with go run ./cmd/urlflow dev") {
		t.Errorf("without urlflow: %v\n%s", err, said)
	}
}
