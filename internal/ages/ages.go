// Package ages writes how long ago something happened, or how long it has lasted, for
// people: the operators' pages and command line.
package ages

import (
	"fmt"
	"time"
)

// Of writes d in at most two units: "45s", "3m12s", "2h05m", "3d04h". A negative d is 0s.
func Of(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
