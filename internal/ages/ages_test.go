package ages

import (
	"testing"
	"time"
)

func TestAgesArePrintedInTwoUnits(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 3*time.Minute + 12*time.Second: "3m12s", 2*time.Hour + 5*time.Minute: "2h05m",
		50 * time.Hour: "2d02h", -time.Second: "0s", 1500 * time.Millisecond: "1s",
	} {
		if got := Of(d); got != want {
			t.Errorf("Of(%s) = %q, want %q", d, got, want)
		}
	}
}
