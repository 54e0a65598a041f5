package credentials

import (
	"testing"
)

// FuzzLabeledNames: a service's credential name with an account label splits back into its
// service, target and label, and the unlabelled one is the default account's name.
func FuzzLabeledNames(f *testing.F) {
	f.Add("weather", "github", "work")
	f.Add("weather", "demo_api_key", "")
	f.Add("urlflow", "demo_api_key", "")
	f.Fuzz(func(t *testing.T, service, target, label string) {
		valid := func(s string) bool {
			for _, r := range s {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
					return false
				}
			}
			return s != ""
		}
		if !valid(service) || !valid(target) || CheckLabel(label) != nil || service == OwnService {
			t.Skip("not names urlflow makes")
		}
		name := Labeled(Name(service, target), label)
		gotService, gotTarget := SplitName(name)
		if gotService != service || gotTarget != target || LabelOf(name) != label {
			t.Fatalf("%q splits into %q, %q, %q; want %q, %q, %q", name, gotService, gotTarget, LabelOf(name), service, target, label)
		}
		if label == "" && name != Name(service, target) {
			t.Fatalf("the default account's name %q is not the name %q", name, Name(service, target))
		}
	})
}
