package mcp

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

func TestSetSecretReusesTheOpenElicitationOfTheSameUserSlotAndSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withPushWait(200*time.Millisecond))
	c := f.connect(alice, clientConfig{urlMode: true})

	first := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot}))
	receive(t, c.elicitations, "elicitation/create")
	if first.Status != "waiting" || first.State != flow.Consented {
		t.Fatalf("first call: %+v", first)
	}

	// The same user, slot and session: the same flow, which the client is shown again
	// (TestACallThatPicksUpAnAcceptedFlowAsksAgain).
	second := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot}))
	if second.ElicitationID != first.ElicitationID || second.Status != "waiting" {
		t.Fatalf("second call: %+v, first %+v", second, first)
	}
	if again := receive(t, c.elicitations, "elicitation/create of the second call"); again.ElicitationID != first.ElicitationID {
		t.Fatalf("the second call asked for %s, want %s", again.ElicitationID, first.ElicitationID)
	}

	// Another slot, another session of the same user, or another user: a flow of its own.
	other := f.connect(alice, clientConfig{urlMode: true})
	bobs := f.connect(bob, clientConfig{urlMode: true})
	for _, tt := range []struct {
		name string
		c    *testClient
		slot string
	}{
		{"another slot", c, notesSlot},
		{"another session", other, demoSlot},
		{"another user", bobs, demoSlot},
	} {
		got := flowOf(t, tt.c.call("set_secret", map[string]any{"name": tt.slot}))
		asked := receive(t, tt.c.elicitations, "elicitation/create of "+tt.name)
		if got.ElicitationID == first.ElicitationID || asked.ElicitationID != got.ElicitationID {
			t.Errorf("%s reused the flow %s: %+v", tt.name, first.ElicitationID, got)
		}
	}
}

func TestSetSecretAnswersAStoredSecretWithoutAskingUnlessReplace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	f.browserCompletes(urlElicitationRequired(t, err)[0].ElicitationID, demoKey)

	res := c.call("set_secret", map[string]any{"name": demoSlot})
	got := flowOf(t, res)
	if res.IsError || got.Status != "stored" || got.ElicitationID != "" || !strings.Contains(textOf(res), "nothing was asked") {
		t.Fatalf("stored already: %+v %q", got, textOf(res))
	}

	_, err = c.CallTool(t.Context(), &sdk.CallToolParams{Name: "set_secret",
		Arguments: map[string]any{"name": demoSlot, "replace": true}})
	els := urlElicitationRequired(t, err)
	e := f.get(els[0].ElicitationID)
	if !e.Replace || !strings.Contains(e.Purpose, "replace") {
		t.Fatalf("the new flow does not say it replaces: %+v", e)
	}
	if f.secretOf(alice, demoSlot) != demoKey {
		t.Fatal("asking for a replacement changed the stored secret")
	}
	f.browserCompletes(e.ID, otherKey)
	if f.secretOf(alice, demoSlot) != otherKey {
		t.Fatal("the secret was not replaced")
	}
}

func TestSetSecretRefusesAnUnknownSlotAndNamesTheKnownOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})

	res := c.call("set_secret", map[string]any{"name": "nope"})
	if !res.IsError || !strings.Contains(textOf(res), `no secret named "nope"`) ||
		!strings.Contains(textOf(res), demoSlot+", "+notesSlot) {
		t.Fatalf("isError=%v %q", res.IsError, textOf(res))
	}
	nothingIn(t, c.elicitations, "elicitation/create")
}

func TestToolsRefuseARequestWithoutAVerifiedUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})
	c.actAs(state.User{})

	res := c.call("set_secret", map[string]any{"name": demoSlot})
	if !res.IsError || textOf(res) != errNoUser.Error() {
		t.Fatalf("isError=%v %q", res.IsError, textOf(res))
	}
	nothingIn(t, c.elicitations, "elicitation/create")
}
