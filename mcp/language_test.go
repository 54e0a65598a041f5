package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/locale"
)

func TestTheWordsOfAFlowComeInTheLanguageItsUserLastReadThePagesIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	de := locale.Default().Negotiate("de", "")
	slot, _ := f.opts.Slots.Lookup(demoSlot)
	name := locale.Placeholders("Name", slot.Label)
	if err := f.opts.Languages.Remember(f.ctx, alice, "de"); err != nil { // as the pages do
		t.Fatal(err)
	}

	c := f.connect(alice, clientConfig{urlMode: true})
	calls := c.start(&sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": demoSlot}})
	asked := receive(t, c.elicitations, "elicitation/create")
	if want := de.T("mcp.message_secret", name); asked.Message != want {
		t.Errorf("the elicitation's message: %q, want %q", asked.Message, want)
	}
	e, err := f.store.Read(f.ctx, asked.ElicitationID)
	if err != nil {
		t.Fatal(err)
	}
	if want := de.T("mcp.purpose_secret_use", name); e.Purpose != want {
		t.Errorf("the purpose the pages show: %q, want %q", e.Purpose, want)
	}
	f.browserCompletes(asked.ElicitationID, demoKey)
	out := receive(t, calls, "the result of set_secret")
	if want := de.T("mcp.stored", name); out.err != nil || textOf(out.res) != want {
		t.Errorf("the result: %q, %v; want %q", textOf(out.res), out.err, want)
	}
	if english := locale.Default().Negotiate("en", "").T("mcp.stored", name); textOf(out.res) == english {
		t.Errorf("the German result is the English one: the German catalog lacks mcp.stored")
	}

	// Bob never read the pages: his results come in the deployment's default, English.
	b := f.connect(bob, clientConfig{noElicitation: true})
	if text := textOf(b.call("set_secret", map[string]any{"name": demoSlot})); !strings.HasPrefix(text, "To continue, please open this link") {
		t.Errorf("a user without a language: %q", text)
	}
}

func TestAUserWhoNeverReadThePagesReadsTheDeploymentsDefaultLanguage(t *testing.T) {
	t.Parallel()
	french, err := locale.Default().WithDefault("fr")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *testOptions) { o.Catalog = french })
	c := f.connect(alice, clientConfig{noElicitation: true})
	want := french.Negotiate("", "").T("mcp.no_connections", nil)
	if text := textOf(c.call("list_connections", nil)); text != want || text == "You have no stored secrets." {
		t.Errorf("list_connections: %q, want %q", text, want)
	}
}
