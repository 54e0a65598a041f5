// Package settings adds urlflow's hooks to a Claude Code settings file and removes them,
// leaving everything else in the file as it was: other keys in their order, other hooks,
// other events. Adding twice is the same as adding once.
package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// matcher (all servers when empty), after removing any of urlflow's hooks already there.
// A missing file is created (mode 0600) with its directory.
func Install(path, matcher string, hooks []Hook) error {
	return edit(path, func(h *object) error {
		remove(h)
		for _, hk := range hooks {
			group := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": hk.Command}}}
			if matcher != "" {
				group["matcher"] = matcher
			}
			raw, err := json.Marshal(group)
			if err != nil {
				return err
			}
			var groups []json.RawMessage
			if v, ok := h.get(hk.Event); ok {
				if err := json.Unmarshal(v, &groups); err != nil {
					return fmt.Errorf("hooks.%s is not a list: %w", hk.Event, err)
				}
			}
			groups = append(groups, raw)
			if err := h.set(hk.Event, groups); err != nil {
				return err
			}
		}
		return nil
	})
}

// Uninstall removes urlflow's hooks from the settings file at path, and an event's list or
// the hooks object that this leaves empty. A missing file is left missing.
func Uninstall(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return edit(path, func(h *object) error {
		remove(h)
		return nil
	})
}

// hookGroup is a matcher group of a hook event.
type hookGroup struct {
	Hooks []struct {
		Type    string `json:"type"`
		Command string `json:"command"`
	} `json:"hooks"`
}

// remove takes urlflow's groups out of every event of the hooks object h, and an event whose
// list it empties.
func remove(h *object) {
	for _, event := range append([]string(nil), h.keys...) {
		var groups []json.RawMessage
		if json.Unmarshal(h.values[event], &groups) != nil {
			continue // not a list: not ours to touch
		}
		kept := groups[:0]
		for _, g := range groups {
			var group hookGroup
			if json.Unmarshal(g, &group) == nil && len(group.Hooks) == 1 &&
				group.Hooks[0].Type == "command" && Ours(group.Hooks[0].Command) {
				continue
			}
			kept = append(kept, g)
		}
		if len(kept) == len(groups) {
			continue
		}
		if len(kept) == 0 {
			h.delete(event)
			continue
		}
		h.set(event, kept)
	}
}

// edit applies change to the hooks object of the settings file at path and writes the file
// back atomically, keeping its mode. A file that is not a JSON object is an error, and is
// left as it was.
func edit(path string, change func(hooks *object) error) error {
	data, err := os.ReadFile(path)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	top, err := parseObject(data)
	if err != nil {
		return fmt.Errorf("%s is not a JSON object: %w", path, err)
	}
	hooks := &object{values: map[string]json.RawMessage{}}
	if raw, ok := top.get("hooks"); ok {
		if hooks, err = parseObject(raw); err != nil {
			return fmt.Errorf("%s: hooks is not a JSON object: %w", path, err)
		}
	}
	before := len(hooks.keys)
	if err := change(hooks); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(hooks.keys) == 0 {
		if before > 0 {
			top.delete("hooks") // emptied by the change; an empty hooks object written by hand stays
		}
	} else if err := top.set("hooks", hooks); err != nil {
		return err
	}
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	out = append(out, '\n')
	if bytes.Equal(out, data) {
		return nil
	}
	return writeFile(path, out, mode)
}

// writeFile replaces the file at path with data through a temporary file in its directory.
func writeFile(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// object is a JSON object that keeps the order of its keys and its values as written.
type object struct {
	keys   []string
	values map[string]json.RawMessage
}

// parseObject parses a JSON object; empty input is an empty object.
func parseObject(data []byte) (*object, error) {
	o := &object{values: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("it does not start with {")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.values[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.values[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more follows the object")
	}
	return o, nil
}

func (o *object) get(key string) (json.RawMessage, bool) {
	v, ok := o.values[key]
	return v, ok
}

// set sets key to v, in its place if the key is there, else last.
func (o *object) set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = raw
	return nil
}

func (o *object) delete(key string) {
	if _, ok := o.values[key]; !ok {
		return
	}
	delete(o.values, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// MarshalJSON writes the object with its keys in their order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(o.values[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
