package main

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/forget"
	"github.com/urlflow/urlflow/oauth/identity"
)

// TestUsersForgetAgainstARunningServer runs urlflow dev with flows of two users and forgets
// one: a wrong or missing confirmation erases nothing, the right one erases the user's
// flow and leaves the other's, and a second run with --yes finds nothing left.
func TestUsersForgetAgainstARunningServer(t *testing.T) {
	addr, stdout, _, stop, done := startDev(t, nil)
	defer func() { stop(); <-done }()
	operator := regexp.MustCompile(`Operator token:\s+(\S+)`).FindStringSubmatch(stdout.String())[1]
	alices, bobs := devFlow(t, addr, "alice"), devFlow(t, addr, "bob")

	cli := func(stdin io.Reader, args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		env := envOf(map[string]string{"URLFLOW_SERVER": "http://" + addr, "URLFLOW_TOKEN": operator})
		err := run(t.Context(), args, env, stdin, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	forgetAlice := []string{"users", "forget", "--issuer", identity.DevIssuer, "--subject", "alice", "--reason", "erasure request 42"}

	if out, err := cli(strings.NewReader("bob\n"), forgetAlice...); err == nil || !strings.Contains(err.Error(), "nothing was erased") {
		t.Errorf("a wrong confirmation: %v\n%s", err, out)
	}
	if out, err := cli(strings.NewReader(""), forgetAlice...); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("no confirmation: %v\n%s", err, out)
	}
	if out, err := cli(nil, "users", "forget", "--subject", "alice", "--reason", "x", "--yes"); err == nil || !strings.Contains(err.Error(), "--issuer is required") {
		t.Errorf("no issuer: %v\n%s", err, out)
	}
	if out, err := cli(nil, "flows", "show", alices); err != nil {
		t.Fatalf("alice's flow is gone before she was forgotten: %v\n%s", err, out)
	}

	out, err := cli(strings.NewReader("alice\n"), forgetAlice...)
	if err != nil || !strings.Contains(out, "Forgot alice at "+identity.DevIssuer+": 1 flows, 0 credentials") ||
		!strings.Contains(out, "The audit trail names them forgotten-") {
		t.Fatalf("users forget: %v\n%s", err, out)
	}
	if out, err := cli(nil, "flows", "show", alices); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("alice's flow after she was forgotten: %v\n%s", err, out)
	}
	if out, err := cli(nil, "flows", "show", bobs); err != nil {
		t.Errorf("bob's flow after alice was forgotten: %v\n%s", err, out)
	}

	out, err = cli(nil, append(forgetAlice, "--yes", "-o", "json")...)
	var again forget.Report
	if err != nil || json.Unmarshal([]byte(out), &again) != nil || again.Flows != 0 || !strings.HasPrefix(again.Tombstone, "forgotten-") {
		t.Errorf("forgetting alice again: %v\n%s", err, out)
	}
}
