package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A settingsFile is a settings file being edited: its text, whether it is there, and its
// note.
type settingsFile struct {
	doc
	exists bool
	note   note
}

// A note is what Install keeps beside a settings file (its name with ".urlflow" added) when
// the file alone cannot tell Uninstall how to give back the file Install found: that the
// file was not there or held only whitespace, or that the hooks object or an event's list
// was there and empty, so that Uninstall leaves it. Without a note, Uninstall removes a
// list or hooks object that it empties. Uninstall deletes the note.
type note struct {
	CreatedFile   bool     `json:"created_file,omitempty"`
	CreatedObject bool     `json:"created_object,omitempty"`
	EmptyHooks    bool     `json:"empty_hooks,omitempty"`
	EmptyEvents   []string `json:"empty_events,omitempty"`
}

// text returns the note as written to its file; nil when there is nothing to note.
func (n note) text() []byte {
	if !n.CreatedFile && !n.CreatedObject && !n.EmptyHooks && len(n.EmptyEvents) == 0 {
		return nil
	}
	b, _ := json.Marshal(n)
	return append(b, '\n')
}

func notePath(path string) string { return path + ".urlflow" }

// edit reads the settings file at path (the file itself where path is a symbolic link) and
// its note, lets change edit them, and writes back what changed, each through a temporary
// file that takes the old one's mode and owner. A file that is not a JSON object, or that
// change refuses, is left as it was.
func edit(path string, change func(*settingsFile) error) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	f, meta, err := readSettings(path)
	if err != nil {
		return err
	}
	oldNote, err := readNote(path, &f.note)
	if err != nil {
		return err
	}
	was := *f
	if err := change(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// The note goes first and away last: a note without urlflow's entries makes Uninstall
	// remove nothing more, while entries without their note may make it remove too much.
	newNote := f.note.text()
	if newNote != nil && !bytes.Equal(newNote, oldNote) {
		if err := writeFile(notePath(path), newNote, meta); err != nil {
			return err
		}
	}
	switch {
	case f.exists && (!was.exists || !bytes.Equal(f.data, was.data)):
		err = writeFile(path, f.data, meta)
	case !f.exists && was.exists:
		err = os.Remove(path)
	}
	if err == nil && newNote == nil && oldNote != nil {
		err = os.Remove(notePath(path))
	}
	return err
}

// readNote reads the note of the settings file at path into n, and returns its text: nil
// when there is none.
func readNote(path string, n *note) ([]byte, error) {
	text, err := os.ReadFile(notePath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", notePath(path), err)
	}
	if err := json.Unmarshal(text, n); err != nil {
		return nil, fmt.Errorf("%s is not urlflow's note (%v): remove it to go on", notePath(path), err)
	}
	return text, nil
}

// readSettings reads the settings file at path, and the mode and owner a new version of it
// keeps: 0600 and whoever writes it for a file that is not there.
func readSettings(path string) (*settingsFile, fileMeta, error) {
	meta := fileMeta{perm: 0o600}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &settingsFile{}, meta, nil
	case err != nil:
		return nil, meta, fmt.Errorf("read %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, meta, fmt.Errorf("read %s: %w", path, err)
	}
	meta.perm = st.Mode().Perm()
	meta.owner, meta.owned = ownerOf(st)
	f := &settingsFile{doc: doc{data: data}, exists: true}
	if !blank(data) {
		if _, err := f.object(); err != nil {
			return nil, meta, fmt.Errorf("%s is not a JSON object: %w", path, err)
		}
	}
	return f, meta, nil
}

// fileMeta is what a new version of a file keeps of the old one.
type fileMeta struct {
	perm  fs.FileMode
	owner owner
	owned bool // owner is known, and kept
}

// An owner is the user and group that own a file.
type owner struct{ uid, gid int }

// writeFile replaces the file at path with data through a temporary file in its
// directory, which it creates if need be.
func writeFile(path string, data []byte, meta fileMeta) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = fill(tmp, data, meta)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fill writes data to tmp and gives it meta's owner and mode.
func fill(tmp *os.File, data []byte, meta fileMeta) error {
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if meta.owned {
		st, err := tmp.Stat()
		if err != nil {
			return err
		}
		if now, _ := ownerOf(st); now != meta.owner {
			if err := tmp.Chown(meta.owner.uid, meta.owner.gid); err != nil {
				return fmt.Errorf("keep the file's owner: %w", err)
			}
		}
	}
	if err := tmp.Chmod(meta.perm); err != nil {
		return err
	}
	return tmp.Sync()
}
