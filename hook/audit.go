package hook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Log is the audit log: a JSON Lines file that every decision is appended to, one line
// each, readable by its owner only. Several processes (one per hook run) may append at
// once: each line is one write to a file opened for appending.
type Log struct {
	path string
	mu   sync.Mutex
}

// NewLog returns the audit log at path; a leading ~/ is the user's home.
func NewLog(path string) (*Log, error) {
	path, err := expandHome(path)
	if err != nil {
		return nil, err
	}
	return &Log{path: path}, nil
}

// Path returns the log's file.
func (l *Log) Path() string { return l.path }

// Append writes e as one line, creating the file (mode 0600) and its directory (0700)
// when they are missing.
func (l *Log) Append(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode the audit entry: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	return nil
}
