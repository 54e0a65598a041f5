package mcp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
)

// Guessing a stored secret through call_api: redaction answers whether a guess is the
// secret, so a request that carries it is refused unsent and locks the secret until its
// user enters it again; a secret too weak for today's minimum is marked.

// weakKey passes the demo API but not the strength minimum of a slot with an API.
const weakKey = "demo_aaaaaaaaaaaaaaaa"

// storeDirectly stores value for user in slot as an elicitation completed in the browser
// would, without the form's rules: a secret stored before its slot had them.
func (f *fixture) storeDirectly(user state.User, slot, value string) {
	f.t.Helper()
	e := f.create(user, state.KindSecret, slot)
	f.browserCompletes(e.ID, value)
}

func (f *fixture) counter(series string) int64 {
	f.t.Helper()
	all, err := f.opts.Counters.All(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range all {
		if c.Series == series {
			return c.Value
		}
	}
	return 0
}

func TestARequestCarryingTheStoredSecretIsRefusedAndLocksIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})
	f.storeDirectly(alice, demoSlot, demoKey)

	// Every 4-digit guess and the key among them, as a JSON body: the oracle attack.
	var guesses []string
	for i := range 10000 {
		guesses = append(guesses, fmt.Sprintf("%q", fmt.Sprintf("%04d", i)))
	}
	body := `{"guesses":[` + strings.Join(guesses, ",") + `,"` + demoKey + `"]}`
	res := c.call("call_api", map[string]any{"name": demoSlot, "method": "POST", "path": "/echo", "body": body})
	text := textOf(res)
	if !res.IsError || !strings.Contains(text, "refused this request and sent nothing: its body carries your stored Demo API key") ||
		!strings.Contains(text, "locked") {
		t.Fatalf("call_api with the key in its body: isError=%v %.300q", res.IsError, text)
	}
	if strings.Contains(wholeOf(res), demoKey) {
		t.Fatalf("the refusal quotes the request or an answer: %s", wholeOf(res))
	}
	cred, err := f.creds.Get(f.ctx, alice, demoSlot)
	if err != nil || !cred.Locked() || cred.LockReason != "a call_api request carried it in its body" {
		t.Fatalf("credential after the refusal: %+v %v", cred, err)
	}
	trail, err := f.trail.Read(f.ctx, time.Time{})
	if err != nil || len(trail) == 0 || trail[len(trail)-1].Event != audit.CredentialLocked || trail[len(trail)-1].Actor != state.ActorClient {
		t.Fatalf("audit: %+v %v", trail, err)
	}
	if n := f.counter(`urlflow_secret_in_request_total{kind="secret"}`); n != 1 {
		t.Fatalf("counted %d refusals, want 1", n)
	}
	list := c.call("list_connections", nil)
	if conns := structured[connectionsView](t, list).Connections; len(conns) != 1 || conns[0].LockedAt == nil ||
		!strings.Contains(textOf(list), "LOCKED since") {
		t.Fatalf("list_connections does not show the lock: %q", textOf(list))
	}

	// The next call asks the user to enter it again, saying why; the call goes on with it.
	call := c.start(&sdk.CallToolParams{Name: "call_api", Arguments: apiCall(demoSlot, "GET", "/whoami")})
	asked := receive(t, c.elicitations, "elicitation/create for the locked key")
	e := f.get(asked.ElicitationID)
	if !e.Replace || !strings.Contains(e.Purpose, "urlflow locked your stored Demo API key because a call_api request carried it in its body") {
		t.Fatalf("the new elicitation does not say why: replace=%v %q", e.Replace, e.Purpose)
	}
	if e.Replaced == nil || e.Replaced.LockReason != "a call_api request carried it in its body" {
		t.Fatalf("the record does not keep how the stored key stood, for the consent page: %+v", e.Replaced)
	}
	f.waitForState(e.ID, flow.Consented)
	f.browserCompletes(e.ID, otherKey)
	out := receive(t, call, "call_api result")
	if out.err != nil || out.res.IsError || apiResponseOf(t, out.res).Headers["X-Demo-Account"] != demoapi.Account(otherKey) {
		t.Fatalf("call_api after entering the key again: %v %q", out.err, textOf(out.res))
	}
	if cred, _ := f.creds.Get(f.ctx, alice, demoSlot); cred.Locked() {
		t.Fatal("the key is still locked after the user entered it again")
	}
}

func TestALockedSecretIsAskedForAgainInEveryEra(t *testing.T) {
	t.Parallel()
	t.Run("error style", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, withStyle(StyleError))
		c := f.connect(alice, clientConfig{urlMode: true})
		f.storeDirectly(alice, demoSlot, demoKey)
		c.call("call_api", map[string]any{"name": demoSlot, "method": "GET", "path": "/echo", "query": map[string]any{"k": demoKey}})
		_, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "call_api", Arguments: apiCall(demoSlot, "GET", "/whoami")})
		id := urlElicitationRequired(t, err)[0].ElicitationID
		if e := f.get(id); !e.Replace || !strings.Contains(e.Purpose, "carried it in its query") {
			t.Fatalf("elicitation: replace=%v %q", e.Replace, e.Purpose)
		}
		f.browserCompletes(id, demoKey)
		if res := c.call("call_api", apiCall(demoSlot, "GET", "/whoami")); res.IsError || apiResponseOf(t, res).Status != 200 {
			t.Fatalf("call_api after entering the key again: %q", textOf(res))
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		c := f.connectModern(alice, clientConfig{urlMode: true})
		f.storeDirectly(alice, demoSlot, demoKey)
		c.call("call_api", map[string]any{"name": demoSlot, "method": "GET", "path": "/users/" + demoKey})
		args := apiCall(demoSlot, "GET", "/whoami")
		first := c.call("call_api", args)
		id := f.idOf(inputRequired(t, first).URL)
		if e := f.get(id); !e.Replace || !strings.Contains(e.Purpose, "carried it in its path") {
			t.Fatalf("elicitation: replace=%v %q", e.Replace, e.Purpose)
		}
		f.browserCompletes(id, otherKey)
		res := c.retry("call_api", args, first.RequestState, "accept")
		if res.IsError || res.NeedsInput() || apiResponseOf(t, res).Headers["X-Demo-Account"] != demoapi.Account(otherKey) {
			t.Fatalf("the retry after entering the key again: %q", textOf(res))
		}
	})
}

func TestAWeakSecretStoredBeforeTheMinimumWorksAndIsMarked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	f.storeDirectly(alice, demoSlot, weakKey)

	res := c.call("call_api", apiCall(demoSlot, "GET", "/whoami"))
	if res.IsError || apiResponseOf(t, res).Status != 200 || !strings.Contains(textOf(res), "weaker than urlflow now requires") {
		t.Fatalf("call_api with a weak key: %q", textOf(res))
	}
	list := c.call("list_connections", nil)
	if conns := structured[connectionsView](t, list).Connections; len(conns) != 1 || !conns[0].Weak ||
		!strings.Contains(textOf(list), "WEAK") {
		t.Fatalf("list_connections does not mark the weak key: %q", textOf(list))
	}
	again := c.call("set_secret", map[string]any{"name": demoSlot})
	if again.IsError || !strings.Contains(textOf(again), "already stored") || !strings.Contains(textOf(again), "weaker") {
		t.Fatalf("set_secret on a weak key: %q", textOf(again))
	}
	_, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": demoSlot, "replace": true}})
	id := urlElicitationRequired(t, err)[0].ElicitationID
	if e := f.get(id); !strings.Contains(e.Purpose, "weaker than urlflow now requires") {
		t.Fatalf("the replacement does not say why: %q", e.Purpose)
	}
	f.browserCompletes(id, demoKey)
	list = c.call("list_connections", nil)
	if conns := structured[connectionsView](t, list).Connections; conns[0].Weak || strings.Contains(textOf(list), "WEAK") {
		t.Fatalf("a strong replacement is still marked weak: %q", textOf(list))
	}
	if res := c.call("call_api", apiCall(demoSlot, "GET", "/whoami")); strings.Contains(textOf(res), "weaker") {
		t.Fatalf("call_api with a strong key warns: %q", textOf(res))
	}
}
