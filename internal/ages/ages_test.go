package ages

import (
	"testing"
	"time"
)

func TestAgesArePrintedInTwoUnits(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 3*time.Minute + 12*time.Second: "3m12s", 2*time.Hour + 5*time.Minute: "2h5m",
		50 * time.Hour: "2d2h", -time.Second: "0s", 1500 * time.Millisecond: "1s", 10 * time.Minute: "10m",
		time.Hour + 30*time.Second: "1h", 48 * time.Hour: "2d",
	} {
		if got := Of(d); got != want {
			t.Errorf("Of(%s) = %q, want %q", d, got, want)
		}
	}
}
