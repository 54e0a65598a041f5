package browsertest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Message is one thing a page wrote to its console: a console API call, an uncaught
// exception, or an entry of the browser's log (where Chromium reports CSP violations and
// failed loads).
type Message struct {
	// Level is "error", "warning", "info", "log", "debug" or "exception".
	Level string
	// Source is where the browser log entry came from ("security", "network", ...); it is
	// "console" for console API calls and "javascript" for exceptions.
	Source string
	Text   string
	URL    string
}

// String formats the message for failure output.
func (m Message) String() string {
	s := m.Level + " (" + m.Source + "): " + m.Text
	if m.URL != "" {
		s += " [" + m.URL + "]"
	}
	return s
}

// IsCSPViolation reports whether the message is Chromium reporting that the page's
// Content-Security-Policy blocked something.
func (m Message) IsCSPViolation() bool {
	return strings.Contains(m.Text, "Content Security Policy") ||
		strings.Contains(m.Text, "Content-Security-Policy")
}

// IsError reports whether the message is an error or an uncaught exception.
func (m Message) IsError() bool { return m.Level == "error" || m.Level == "exception" }

// record is the tab's event listener. chromedp calls it in the order the browser sent the
// events, before it reads the next message, so everything logged before a command's reply
// is recorded when the command returns.
func (u *User) record(ev any) {
	var m Message
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		m = Message{Level: string(ev.Type), Source: "console", Text: argsText(ev.Args)}
		if ev.StackTrace != nil && len(ev.StackTrace.CallFrames) > 0 {
			m.URL = ev.StackTrace.CallFrames[0].URL
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		m = Message{Level: "exception", Source: "javascript", Text: d.Text, URL: d.URL}
		if d.Exception != nil && d.Exception.Description != "" {
			m.Text += " " + d.Exception.Description
		}
	case *log.EventEntryAdded:
		e := ev.Entry
		level := string(e.Level)
		if e.Level == log.EntryLevelVerbose {
			level = "debug"
		}
		m = Message{Level: level, Source: string(e.Source), Text: e.Text, URL: e.URL}
	default:
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.messages = append(u.messages, m)
}

// argsText joins the arguments of a console call roughly as DevTools shows them.
func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if a == nil {
			continue
		}
		var s string
		if a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil {
			parts = append(parts, s)
			continue
		}
		switch {
		case a.Description != "":
			parts = append(parts, a.Description)
		case a.UnserializableValue != "":
			parts = append(parts, string(a.UnserializableValue))
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// settle makes one round trip to the page, so that every event the page logged before
// now (CSP reports are queued while the document loads) has reached the listener.
func (u *User) settle(t testing.TB) {
	t.Helper()
	run(t, u, "wait for the page's messages", chromedp.Evaluate[string](`document.readyState`))
}

// Console returns the messages the user's tab has logged so far, oldest first.
func (u *User) Console(t testing.TB) []Message {
	t.Helper()
	u.settle(t)
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Message(nil), u.messages...)
}

// ClearConsole forgets the messages logged so far, so that later checks see only what
// comes next.
func (u *User) ClearConsole(t testing.TB) {
	t.Helper()
	u.settle(t)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.messages = nil
}

// CSPViolations returns the CSP violations the user's tab has reported so far.
func (u *User) CSPViolations(t testing.TB) []Message {
	t.Helper()
	var out []Message
	for _, m := range u.Console(t) {
		if m.IsCSPViolation() {
			out = append(out, m)
		}
	}
	return out
}

// AssertNoCSPViolations fails the test if the tab has reported any CSP violation.
func (u *User) AssertNoCSPViolations(t testing.TB) {
	t.Helper()
	for _, m := range u.CSPViolations(t) {
		t.Errorf("%s: CSP violation: %s", u.Name, m)
	}
}

// AssertNoConsoleErrors fails the test if the tab has logged an error or thrown an
// uncaught exception.
func (u *User) AssertNoConsoleErrors(t testing.TB) {
	t.Helper()
	for _, m := range u.Console(t) {
		if m.IsError() {
			t.Errorf("%s: console error: %s", u.Name, m)
		}
	}
}
