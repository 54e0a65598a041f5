package locale

import (
	"testing"
	"testing/fstest"
)

func TestHTMLLetsOnlyInlineTagsOfTheMessageThroughAndEscapesEveryValue(t *testing.T) {
	c, err := load(fstest.MapFS{"messages/en.yaml": {Data: []byte(
		`rich: "<strong>{{.Name}}</strong> asked <code>{{.Code}}</code> at {{.When}}; <script>x</script> <b>b</b>"` + "\n")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := c.localizers[0].HTML("rich", map[string]any{
		"Name": `<strong>Eve</strong> & "co"`, "Code": "a<b", "When": Markup(`<time datetime="x">12:00</time>`)})
	want := `<strong>&lt;strong&gt;Eve&lt;/strong&gt; &amp; &#34;co&#34;</strong> asked <code>a&lt;b</code> at ` +
		`<time datetime="x">12:00</time>; &lt;script&gt;x&lt;/script&gt; &lt;b&gt;b&lt;/b&gt;`
	if got != want {
		t.Errorf("HTML:\n got %s\nwant %s", got, want)
	}
}

// TestAValueThatLooksLikeAMarkerStaysAsItIs: the values go in in one pass, so a value
// holding another value's marker does not take that value.
func TestAValueThatLooksLikeAMarkerStaysAsItIs(t *testing.T) {
	c, err := load(fstest.MapFS{"messages/en.yaml": {Data: []byte(`pair: "{{.A}} and {{.B}}"` + "\n")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // the markers' order follows the map's
		got := c.localizers[0].HTML("pair", map[string]any{"A": "\x000\x00|\x001\x00", "B": "b"})
		if want := "\x000\x00|\x001\x00 and b"; got != want {
			t.Fatalf("HTML: %q, want %q", got, want)
		}
	}
}
