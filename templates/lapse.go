package templates

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// A page with a deadline warns before its link lapses, and says when it has lapsed
// (WCAG 2.2.1), without script: the page links a stylesheet made for its deadline,
// LapseStylesheetPath?soon=S&end=E, whose animations reveal the warning S seconds after the
// page is shown, until E seconds after, when the notice that the link has lapsed takes its
// place. The stylesheet depends on nothing but its query, so browsers may keep it.

// LapseStylesheetPath is where ServeLapseStylesheet answers.
const LapseStylesheetPath = "/lapse.css"

// lapseWarning is how long before the deadline the warning shows.
const lapseWarning = 2 * time.Minute

// maxLapseSeconds bounds the delays that ServeLapseStylesheet takes: a deadline a week
// away, beyond any elicitation's.
const maxLapseSeconds = 7 * 24 * 60 * 60

// lapseStylesheet returns the path of the stylesheet of a page shown at now whose link
// lapses at deadline, and "" when it has no deadline or it has passed.
func lapseStylesheet(deadline, now time.Time) string {
	left := deadline.Sub(now)
	if deadline.IsZero() || left <= 0 {
		return ""
	}
	end := min(int(math.Ceil(left.Seconds())), maxLapseSeconds)
	soon := max(0, int((left - lapseWarning).Seconds()))
	return fmt.Sprintf("%s?soon=%d&end=%d", LapseStylesheetPath, soon, end)
}

// ServeLapseStylesheet answers GET LapseStylesheetPath: the animations that reveal a
// page's warning (.lapse-soon) soon seconds after it is shown, and its notice that the link
// has lapsed (.lapse-over) end seconds after, when the warning goes.
func ServeLapseStylesheet(w http.ResponseWriter, r *http.Request) {
	seconds := func(name string) (int, bool) {
		n, err := strconv.Atoi(r.URL.Query().Get(name))
		return n, err == nil && n >= 0 && n <= maxLapseSeconds
	}
	soon, okSoon := seconds("soon")
	end, okEnd := seconds("end")
	if !okSoon || !okEnd || soon > end {
		http.Error(w, fmt.Sprintf("want soon and end, whole seconds from 0 to %d, soon not after end", maxLapseSeconds), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=604800, immutable")
	// The warning shows while its animation runs, from soon to end; the notice from end on.
	fmt.Fprintf(w, ".lapse-soon { animation: lapse-reveal %ds %ds; }\n", end-soon, soon)
	fmt.Fprintf(w, ".lapse-over { animation: lapse-reveal 0s %ds forwards; }\n", end)
}
