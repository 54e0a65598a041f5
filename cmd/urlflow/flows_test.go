package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/cmd/urlflow/internal/opsclient"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// devFlow asks, as urlflow dev's demo service, for user's demo API key, and returns the
// new elicitation's ID.
func devFlow(t *testing.T, addr, user string) string {
	t.Helper()
	get := func(path string, out any) {
		t.Helper()
		resp, err := testClient.Get("http://" + addr + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(out)
	}
	var key, token struct{ Key, Token string }
	get("/dev/service-key", &key)
	get("/dev/token?user="+user+"&resource=http://127.0.0.1:8090/mcp", &token)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/elicitations",
		strings.NewReader(`{"slot": "demo_api_key", "message": "to show the weather", "client": {"name": "flows-test"}}`))
	req.Header.Set("Authorization", "Bearer "+key.Key)
	req.Header.Set("Urlflow-User-Token", token.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Elicitation struct{ ID string } `json:"elicitation"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &answer); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	return answer.Elicitation.ID
}

// TestTheFlowsCommandsWorkAgainstARunningServer runs urlflow dev, starts two flows through
// its demo service, and runs the operators' commands against it: a table and JSON, a
// timeline, a cancel and a retry with reasons, and the refusals as one line each.
func TestTheFlowsCommandsWorkAgainstARunningServer(t *testing.T) {
	const reader = "reader-token-0123456789abcdef"
	addr, stdout, _, stop, done := startDev(t, map[string]string{"URLFLOW_OPERATOR_READONLY_TOKENS": reader})
	defer func() { stop(); <-done }()
	operator := regexp.MustCompile(`Operator token:\s+(\S+)`).FindStringSubmatch(stdout.String())[1]
	alices := devFlow(t, addr, "alice")
	time.Sleep(5 * time.Millisecond)
	bobs := devFlow(t, addr, "bob")

	flows := func(token string, args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		env := envOf(map[string]string{"URLFLOW_SERVER": "http://" + addr, "URLFLOW_TOKEN": token})
		err := run(t.Context(), append([]string{"flows"}, args...), env, nil, &out, &errOut)
		return out.String() + errOut.String(), err
	}

	table, err := flows(operator, "list")
	if err != nil {
		t.Fatalf("flows list: %v\n%s", err, table)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], alices[:shortID]+" ") || !strings.HasPrefix(lines[2], bobs[:shortID]+" ") ||
		!strings.Contains(lines[1], "pending") || !strings.Contains(lines[1], "alice") || !strings.Contains(lines[1], "flows-test") ||
		strings.Contains(table, "\x1b[") {
		t.Errorf("flows list printed\n%s\nwant a header and alice's then bob's flow, without colour", table)
	}
	// The columns line up: every row has its state where the header has STATE.
	if col := strings.Index(lines[0], "STATE"); lines[1][col:col+7] != "pending" || lines[2][col:col+7] != "pending" {
		t.Errorf("columns do not line up:\n%s", table)
	}

	if wide, err := flows(operator, "list", "--wide"); err != nil || !strings.Contains(wide, alices) || !strings.Contains(wide, "ERA") {
		t.Errorf("flows list --wide: %v\n%s\nwant whole IDs and every column", err, wide)
	}
	if out, err := flows(operator, "list", "--output", "yaml", "--fields", "id,state"); err != nil ||
		out != "- id: "+alices+"\n  state: pending\n- id: "+bobs+"\n  state: pending\n" {
		t.Errorf("flows list --output yaml --fields id,state: %v\n%s", err, out)
	}
	if _, err := flows(operator, "list", "--output", "json", "--fields", "id,colour"); err == nil ||
		!strings.Contains(err.Error(), `no field "colour"`) || !strings.Contains(err.Error(), "state") {
		t.Errorf("an unknown field: %v, want the fields there are", err)
	}

	out, err := flows(operator, "list", "--user", "bob", "--json")
	var items []opsclient.Listed
	if err != nil || json.Unmarshal([]byte(out), &items) != nil || len(items) != 1 || items[0].ID != bobs || items[0].User.Subject != "bob" {
		t.Errorf("flows list --user bob --json: %v\n%s", err, out)
	}

	out, err = flows(reader, "cancel", bobs, "--reason", "user asked on the helpdesk")
	if err == nil || strings.Count(strings.TrimSpace(err.Error()), "\n") > 0 || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "read") {
		t.Errorf("a cancel with a read-only token: %v\n%s; want one line saying 403 and read-only", err, out)
	}
	if _, err := flows(operator, "cancel", bobs); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Errorf("a cancel without a reason: %v, want an error naming --reason", err)
	}
	out, err = flows(operator, "cancel", bobs, "--reason", "user asked on the helpdesk")
	if err != nil || !strings.Contains(out, "cancelled") || !strings.Contains(out, "user asked on the helpdesk") ||
		!regexp.MustCompile(`operator \(token [0-9a-f]{8}\)`).MatchString(out) {
		t.Errorf("flows cancel: %v\n%s\nwant the timeline with the operator's cancel and reason", err, out)
	}
	if _, err := flows(operator, "retry", bobs, "--reason", "tell the client"); err == nil ||
		!strings.Contains(err.Error(), "no client session") || !strings.HasSuffix(err.Error(), "add --new") {
		t.Errorf("a retry without --new of a flow without a session: %v, want the refusal and a pointer to --new", err)
	}
	out, err = flows(operator, "retry", bobs, "--new", "--reason", "second try")
	if err != nil || !strings.Contains(out, "Retry of") || !strings.Contains(out, bobs) || !strings.Contains(out, "pending") {
		t.Errorf("flows retry --new: %v\n%s\nwant the new attempt", err, out)
	}

	out, err = flows(operator, "show", alices)
	if err != nil || !strings.Contains(out, "TIME") || !strings.Contains(out, "created") || !strings.Contains(out, "service") {
		t.Errorf("flows show: %v\n%s\nwant the timeline", err, out)
	}
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`(?m)^User\s+alice \(issuer \S+\)$`),
		regexp.MustCompile(`(?m)^Client\s+flows-test$`), regexp.MustCompile(`(?m)^Service\s+demo \(verified by its key\)$`),
		regexp.MustCompile(`(?m)^Era\s+api$`)} {
		if !want.MatchString(out) {
			t.Errorf("flows show does not say %s:\n%s", want, out)
		}
	}
	if out, err := flows(operator, "show", strings.ToLower(alices[:10])); err != nil || !strings.Contains(out, alices) {
		t.Errorf("flows show with the beginning of the ID: %v\n%s", err, out)
	}
	out, err = flows(operator, "summary")
	if err != nil || !regexp.MustCompile(`(?m)^pending\s+2\s+0\s+2m$`).MatchString(out) {
		t.Errorf("flows summary: %v\n%s\nwant 2 pending, none stuck, after 2m", err, out)
	}

	for name, args := range map[string][]string{
		"unknown ID":   {"show", "AAAAAAAAAAAAAAAAAAAAAAAAAA"},
		"bad filter":   {"list", "--state", "stuck"},
		"two IDs":      {"show", alices, bobs},
		"bad token":    {"list"},
		"no such verb": {"frobnicate"},
	} {
		token := operator
		if name == "bad token" {
			token = "not-a-token"
		}
		if out, err := flows(token, args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v\n%s; want an error of one line", name, err, out)
		}
	}
	if _, err := flows("", "list"); err == nil || !strings.Contains(err.Error(), "URLFLOW_TOKEN") {
		t.Errorf("no token: %v, want an error naming URLFLOW_TOKEN", err)
	}

	// The audit trail holds the operator's cancel, with the reason.
	var out2, errOut bytes.Buffer
	env := envOf(map[string]string{"URLFLOW_SERVER": "http://" + addr, "URLFLOW_TOKEN": reader})
	if err := run(t.Context(), []string{"audit", "export", "--since", "1h"}, env, nil, &out2, &errOut); err != nil {
		t.Fatalf("audit export: %v\n%s", err, errOut.String())
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(out2.String()), "\n") {
		var e struct{ Event, Cause, Reason, By, ElicitationID string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit export line %q: %v", line, err)
		}
		found = found || e.Event == "operator_action" && e.Cause == "cancel" && e.Reason == "user asked on the helpdesk" && e.ElicitationID == bobs
	}
	if !found {
		t.Errorf("the audit export has no operator action for the cancel:\n%s", out2.String())
	}
	if err := run(t.Context(), []string{"audit", "export"}, env, nil, &out2, &errOut); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Errorf("audit export without --since: %v", err)
	}
}

// TestTheFlowsCommandsSayWhyTheTokenCannotBeRead: a token file that cannot be read, or a
// token set twice, is the error, not "no token".
func TestTheFlowsCommandsSayWhyTheTokenCannotBeRead(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"URLFLOW_TOKEN_FILE": filepath.Join(t.TempDir(), "missing")}, "URLFLOW_TOKEN_FILE"},
		{map[string]string{"URLFLOW_TOKEN": "uf_op_x", "URLFLOW_TOKEN_FILE": "/dev/null"}, "both set"},
	} {
		err := run(context.Background(), []string{"flows", "summary", "--server", "http://127.0.0.1:1"}, envOf(tt.env), nil, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("with %v: %v", tt.env, err)
		}
	}
}

// TestTheFlowTableFitsAHundredColumns: however long the users, targets and clients, the
// narrow table's rows fit 100 columns; --wide shows them whole.
func TestTheFlowTableFitsAHundredColumns(t *testing.T) {
	long := strings.Repeat("x", 60)
	now := time.Now()
	e := opsclient.Listed{User: &state.User{Subject: "someone-with-a-long-name@example.com"}, Stuck: flow.StuckNotification,
		Client: state.ClientInfo{Name: long}, Era: "2025-11-25", Replica: long}
	e.ID, e.State, e.Target, e.Service = strings.Repeat("A", 64), flow.InProgress, long, long
	e.CreatedAt, e.UpdatedAt = now.Add(-100*24*time.Hour), now.Add(-99*24*time.Hour)
	var out bytes.Buffer
	if err := (&terminal{w: &out}).flowTable([]opsclient.Listed{e, e}, now, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("a row of %d columns:\n%s", n, line)
		}
	}
	out.Reset()
	if err := (&terminal{w: &out}).flowTable([]opsclient.Listed{e}, now, true); err != nil || !strings.Contains(out.String(), long) {
		t.Errorf("--wide: %v\n%s", err, out.String())
	}
}
