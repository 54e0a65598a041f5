// Package ages writes how long ago something happened, or how long it has lasted, for
// people: the operators' pages and command line.
package ages

import (
	"fmt"
	"time"
)

// Of writes d in at most two units, the second left out when it is zero, with no padding,
// as Go writes durations: "45s", "3m12s", "10m", "2h5m", "3d4h". A negative d is 0s.
func Of(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units[:len(units)-1] {
		if d < u.size {
			continue
		}
		out := fmt.Sprintf("%d%s", d/u.size, u.name)
		next := units[i+1]
		if rest := (d % u.size) / next.size; rest > 0 {
			out += fmt.Sprintf("%d%s", rest, next.name)
		}
		return out
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
