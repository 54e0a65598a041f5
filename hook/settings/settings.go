// Package settings adds urlflow's hooks to a Claude Code settings file and removes them.
// It edits the file's bytes and never encodes it anew: Install inserts urlflow's entries,
// with the hooks object or event list they need where there is none, in the file's own
// layout; Uninstall cuts exactly those bytes, so that after both the file is as it was,
// byte for byte. Installing twice is the same as installing once.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A Hook is one of urlflow's entries: the event it runs on and the command Claude Code runs.
type Hook struct {
	Event   string
	Command string
}

// Ours reports whether command is one of urlflow's hook commands: its second and third
// words are "hook" and an event's entry point, whatever the binary's path.
func Ours(command string) bool {
	w := shellWords(command)
	return len(w) >= 3 && w[1] == "hook" && (w[2] == "elicitation" || w[2] == "elicitation-result")
}

// Install adds hooks to the settings file at path, each as a matcher group of its own with
// matcher (all servers when empty), last in its event's list, after removing any of
// urlflow's groups already there. No other byte of the file changes, nor its mode or
// owner. A missing file is created (mode 0600) with its directory. Where the file alone
// cannot tell Uninstall what to leave (a missing or blank file, an empty hooks object or
// event list), Install keeps a note beside it: see note.
func Install(path, matcher string, hooks []Hook) error {
	groups := make([][]byte, len(hooks))
	for i, hk := range hooks {
		g := hookGroup{Matcher: matcher, Hooks: []hookCommand{{Type: "command", Command: hk.Command}}}
		var err error
		if groups[i], err = json.Marshal(g); err != nil {
			return err
		}
	}
	return edit(path, func(f *settingsFile) error {
		if err := f.removeOurs(); err != nil {
			return err
		}
		f.note = note{}
		for i, hk := range hooks {
			if err := f.add(hk.Event, groups[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Uninstall removes urlflow's hooks from the settings file at path: it cuts the bytes of
// urlflow's groups, then those of an event list or hooks object this empties, unless
// Install's note says it was there before, and a file Install created. After Install, it
// gives back the file Install found, byte for byte, and deletes the note. A missing file
// is left missing.
func Uninstall(path string) error {
	return edit(path, func(f *settingsFile) error {
		err := f.removeOurs()
		f.note = note{}
		return err
	})
}

// hookGroup is a matcher group of a hook event.
type hookGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

// ourGroup reports whether a matcher group is one of urlflow's: one command, Ours.
func ourGroup(group []byte) bool {
	var g hookGroup
	return json.Unmarshal(group, &g) == nil && len(g.Hooks) == 1 &&
		g.Hooks[0].Type == "command" && Ours(g.Hooks[0].Command)
}

// add inserts group last in event's list: with the list where there is none, with the
// hooks object too where there is none, in an object where the file held only whitespace,
// in a new file where there was none. It notes what Uninstall cannot tell from the file:
// that it created the file or its object, or found the hooks object or the list empty.
func (f *settingsFile) add(event string, group []byte) error {
	switch {
	case !f.exists:
		f.data, f.exists, f.note.CreatedFile = []byte("{}\n"), true, true
	case blank(f.data):
		f.data, f.note.CreatedObject = append([]byte("{}"), f.data...), true
	}
	top, err := f.object()
	if err != nil {
		return err
	}
	list := slices.Concat([]byte("["), group, []byte("]"))
	i, ok := top.member("hooks")
	if !ok {
		name, _ := jsontext.AppendQuote(nil, event)
		return f.insert(top, "hooks", slices.Concat([]byte("{"), name, []byte(":"), list, []byte("}")))
	}
	hooks, err := f.node(top.items[i].value)
	if err == nil && hooks.kind != '{' {
		err = errors.New("hooks is not a JSON object")
	}
	if err != nil {
		return err
	}
	f.note.EmptyHooks = f.note.EmptyHooks || len(hooks.items) == 0
	j, ok := hooks.member(event)
	if !ok {
		return f.insert(hooks, event, list)
	}
	events, err := f.node(hooks.items[j].value)
	if err == nil && events.kind != '[' {
		err = fmt.Errorf("hooks.%s is not a list", event)
	}
	if err != nil {
		return err
	}
	if len(events.items) == 0 && !slices.Contains(f.note.EmptyEvents, event) {
		f.note.EmptyEvents = append(f.note.EmptyEvents, event)
	}
	return f.insert(events, "", group)
}

// removeOurs cuts urlflow's groups, the last first so that each cut undoes the insert that
// came last, and what Install added for them that this leaves empty.
func (f *settingsFile) removeOurs() error {
	for {
		hooks, ok, err := f.hooks()
		if err != nil || !ok {
			return err
		}
		list, i, ok := f.lastOurs(hooks)
		if !ok {
			return nil
		}
		if err := f.cut(list, i); err != nil {
			return err
		}
		if len(list.items) == 1 {
			if err := f.removeEmptied(hooks.open, list.open); err != nil {
				return err
			}
		}
	}
}

// removeEmptied cuts the event list at offset listAt, which removeOurs emptied, then the
// hooks object at hooksAt and the object or file if this empties them in turn; but not
// what the note says was there and empty before Install, nor an object or file Install
// did not create.
func (f *settingsFile) removeEmptied(hooksAt, listAt int) error {
	hooks, err := f.node(hooksAt)
	if err != nil {
		return err
	}
	event := hooks.holding(listAt)
	if slices.Contains(f.note.EmptyEvents, hooks.items[event].name) {
		return nil
	}
	if err := f.cut(hooks, event); err != nil || len(hooks.items) > 1 || f.note.EmptyHooks {
		return err
	}
	top, err := f.object()
	if err != nil {
		return err
	}
	if err := f.cut(top, top.holding(hooksAt)); err != nil || len(top.items) > 1 {
		return err
	}
	switch {
	case f.note.CreatedFile:
		f.data, f.exists = nil, false
	case f.note.CreatedObject:
		if top, err = f.object(); err == nil {
			f.splice(top.open, top.close+1, nil)
		}
	}
	return err
}

// hooks returns the file's hooks object, if it has one.
func (f *settingsFile) hooks() (node, bool, error) {
	if !f.exists || blank(f.data) {
		return node{}, false, nil
	}
	top, err := f.object()
	if err != nil {
		return node{}, false, err
	}
	i, ok := top.member("hooks")
	if !ok {
		return node{}, false, nil
	}
	hooks, err := f.node(top.items[i].value)
	if err == nil && hooks.kind != '{' {
		err = errors.New("hooks is not a JSON object")
	}
	return hooks, err == nil, err
}

// lastOurs returns the list holding the last of urlflow's groups in the file, and its index.
func (f *settingsFile) lastOurs(hooks node) (list node, index int, found bool) {
	at := -1
	for _, event := range hooks.items {
		l, err := f.node(event.value)
		if err != nil || l.kind != '[' {
			continue // not a list: not ours to touch
		}
		for i, g := range l.items {
			if g.start > at && ourGroup(f.data[g.start:g.end]) {
				list, index, found, at = l, i, true, g.start
			}
		}
	}
	return list, index, found
}

// Quote returns s as one word for a POSIX shell: as it is when it holds nothing a shell
// would read, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWords splits a command line into words as a POSIX shell would for plain words and
// single or double quotes; enough to recognise the commands Install writes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return append(words, cur.String()+s[i+1:])
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
		case c == '\\' && i+1 < len(s):
			inWord = true
			i++
			cur.WriteByte(s[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
