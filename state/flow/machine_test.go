package flow

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// designDoc is the project's design document. Its state table is the specification: the
// tests read their expectations from it, not from the package's own maps, so that the
// document and the code cannot drift apart.
const designDoc = "../../docs/design.md"

// stateTable returns the state table of the design document's section "State machine": the
// lines of the one Markdown table whose header starts with "from \ event".
func stateTable(t testing.TB) string {
	t.Helper()
	doc, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatalf("read the state table: %v", err)
	}
	var table []string
	for line := range strings.Lines(string(doc)) {
		inTable := len(table) > 0 && strings.HasPrefix(line, "|")
		if strings.HasPrefix(line, `| from \ event |`) || inTable {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	if len(table) < 3 {
		t.Fatalf("%s has no state table (a Markdown table whose header starts with %q)", designDoc, `| from \ event |`)
	}
	return strings.Join(table, "")
}

// tableColumns names the event of each column header of the state table.
var tableColumns = map[string]Event{
	"client accept":              ClientAccept,
	"client decline":             ClientDecline,
	"client cancel":              ClientCancel,
	"no answer":                  NoAnswer,
	"browser opens (right user)": BrowserOpen,
	"verified":                   Verified,
	"provider/verify error":      VerifyFailed,
	"page decline":               PageDecline,
	"cancel endpoint":            CancelRequested,
	"deadline":                   DeadlinePassed,
}

// terminalStates are the states of the row "terminal" (docs/design.md: "Four are terminal:
// complete, declined, cancelled, expired").
var terminalStates = []State{Complete, Declined, Cancelled, Expired}

// historyOnlyEvents have no column in the table: they are recorded, never a change.
var historyOnlyEvents = []Event{
	Created, OtherUserOpened, PageContinue, InputRejected, LatePost, Notified, NotifyRequeued, RetriedAs,
}

// cell is one cell of the state table.
type cell struct {
	from  State
	event Event
	// to is the state after the event: from itself for "·" and "–".
	to State
	// impossible marks "–": the event cannot happen in this state.
	impossible bool
}

func (c cell) String() string {
	switch {
	case c.impossible:
		return fmt.Sprintf("%s/%s/impossible", c.from, c.event)
	case c.from == c.to:
		return fmt.Sprintf("%s/%s/no_change", c.from, c.event)
	}
	return fmt.Sprintf("%s/%s/to_%s", c.from, c.event, c.to)
}

// tableCells parses the state table into its cells, one per state and table event, with the row
// "terminal" expanded to each terminal state.
func tableCells(t testing.TB) []cell {
	t.Helper()
	var header []Event
	var cells []cell
	for line := range strings.Lines(strings.TrimSpace(stateTable(t))) {
		fields := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		switch {
		case fields[0] == `from \ event`:
			for _, name := range fields[1:] {
				ev, ok := tableColumns[name]
				if !ok {
					t.Fatalf("state table: no event for column %q", name)
				}
				header = append(header, ev)
			}
			continue
		case strings.HasPrefix(fields[0], "---"):
			continue
		}
		if len(fields) != len(header)+1 {
			t.Fatalf("state table: row %q has %d cells, want %d", fields[0], len(fields)-1, len(header))
		}
		froms := []State{State(fields[0])}
		if fields[0] == "terminal" {
			froms = terminalStates
		}
		for _, from := range froms {
			for i, v := range fields[1:] {
				c := cell{from: from, event: header[i], to: from}
				switch v {
				case "·":
				case "–":
					c.impossible = true
				default:
					c.to = State(v)
				}
				cells = append(cells, c)
			}
		}
	}
	return cells
}

func TestStateTableCoversEveryStateAndEvent(t *testing.T) {
	cells := tableCells(t)
	seen := map[State]map[Event]bool{}
	for _, c := range cells {
		if !c.from.Valid() || !c.to.Valid() {
			t.Errorf("cell %v names a state the package does not have", c)
		}
		if seen[c.from] == nil {
			seen[c.from] = map[Event]bool{}
		}
		if seen[c.from][c.event] {
			t.Errorf("cell %v appears twice", c)
		}
		seen[c.from][c.event] = true
	}
	for _, s := range States {
		for _, ev := range TableEvents {
			if !seen[s][ev] {
				t.Errorf("no cell for state %s and event %s", s, ev)
			}
		}
	}
	if len(cells) != len(States)*len(TableEvents) {
		t.Errorf("%d cells, want %d", len(cells), len(States)*len(TableEvents))
	}
	var columns []Event
	for _, c := range cells[:len(TableEvents)] {
		columns = append(columns, c.event)
	}
	if !slices.Equal(columns, TableEvents) {
		t.Errorf("TableEvents = %v, want the table's columns %v", TableEvents, columns)
	}
}

func TestNextFollowsTheStateTable(t *testing.T) {
	for _, c := range tableCells(t) {
		t.Run(c.String(), func(t *testing.T) {
			got, err := Next(c.from, c.event)
			if c.impossible {
				if !errors.Is(err, ErrImpossible) {
					t.Fatalf("Next(%s, %s) error = %v, want ErrImpossible", c.from, c.event, err)
				}
			} else if err != nil {
				t.Fatalf("Next(%s, %s) error = %v, want nil", c.from, c.event, err)
			}
			if got != c.to {
				t.Errorf("Next(%s, %s) = %s, want %s", c.from, c.event, got, c.to)
			}
		})
	}
}

func TestTerminalStatesNeverChange(t *testing.T) {
	events := append(slices.Clone(TableEvents), historyOnlyEvents...)
	for _, s := range terminalStates {
		for _, ev := range events {
			if got, err := Next(s, ev); got != s || err != nil {
				t.Errorf("Next(%s, %s) = %s, %v; want %s, nil", s, ev, got, err, s)
			}
		}
	}
}

func TestHistoryOnlyEventsNeverChangeState(t *testing.T) {
	for _, s := range States {
		for _, ev := range historyOnlyEvents {
			if got, err := Next(s, ev); got != s || err != nil {
				t.Errorf("Next(%s, %s) = %s, %v; want %s, nil", s, ev, got, err, s)
			}
		}
	}
}

func TestNextRefusesAStateThatDoesNotExist(t *testing.T) {
	for _, s := range []State{"", "PENDING", "done"} {
		got, err := Next(s, ClientAccept)
		if err == nil || errors.Is(err, ErrImpossible) {
			t.Errorf("Next(%q, accept) error = %v, want an unknown-state error", s, err)
		}
		if got != s {
			t.Errorf("Next(%q, accept) = %q, want the state unchanged", s, got)
		}
	}
}

func TestTerminalIsTrueForTheFourEndedStates(t *testing.T) {
	for _, tt := range []struct {
		state    State
		terminal bool
	}{
		{Pending, false},
		{Consented, false},
		{InProgress, false},
		{Failed, false},
		{Unknown, false},
		{Complete, true},
		{Declined, true},
		{Cancelled, true},
		{Expired, true},
		{"", false},
		{"bogus", false},
	} {
		if got := tt.state.Terminal(); got != tt.terminal {
			t.Errorf("State(%q).Terminal() = %v, want %v", tt.state, got, tt.terminal)
		}
	}
}

func TestValidAcceptsOnlyTheNineStates(t *testing.T) {
	for _, s := range []State{"pending", "consented", "in_progress", "complete", "failed", "unknown", "declined", "cancelled", "expired"} {
		if !s.Valid() {
			t.Errorf("State(%q).Valid() = false, want true", s)
		}
	}
	for _, s := range []State{"", "Pending", "in-progress", "inprogress", "canceled", " pending", "terminal"} {
		if s.Valid() {
			t.Errorf("State(%q).Valid() = true, want false", s)
		}
	}
	if len(States) != 9 {
		t.Errorf("len(States) = %d, want 9", len(States))
	}
}
