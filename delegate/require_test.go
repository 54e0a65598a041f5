package delegate

import "testing"

func TestOnlyADatedVersionFrom20260728IsModern(t *testing.T) {
	for version, want := range map[string]bool{
		"2026-07-28": true, "2027-01-01": true, "2025-11-25": false, "": false, "draft": false, "2026-07-28-rc": false,
	} {
		if got := modernVersion(version); got != want {
			t.Errorf("modernVersion(%q) = %v, want %v", version, got, want)
		}
	}
}
