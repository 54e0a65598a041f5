package state

import (
	"strings"
	"testing"
)

func TestMetadataIsSmallAndPlain(t *testing.T) {
	ok := []Metadata{nil, {}, {"account": "42", "team.id": "a:b-c_d", "note": "déjà vu, with spaces"}}
	for _, m := range ok {
		if err := CheckMetadata(m); err != nil {
			t.Errorf("%v refused: %v", m, err)
		}
	}
	many := Metadata{}
	for i := range MetadataEntries + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	bad := map[string]Metadata{
		"at most 16 entries":                   many,
		`key ""`:                               {"": "v"},
		`key "-x"`:                             {"-x": "v"},
		`key "a b"`:                            {"a b": "v"},
		"key " + `"` + strings.Repeat("k", 41): {strings.Repeat("k", 41): "v"},
		"not UTF-8":                            {"k": "\xff"},
		"control character":                    {"k": "line\nbreak"},
		"at most 2048 bytes":                   {"k": strings.Repeat("v", 2048)},
	}
	for want, m := range bad {
		err := CheckMetadata(m)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error that says %q", m, err, want)
		}
	}
	if err := CheckMetadata(Metadata{"k": "line\nsecret"}); err != nil && strings.Contains(err.Error(), "secret") {
		t.Error("the error repeats the value")
	}
}
