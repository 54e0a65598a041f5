package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state/vault"
)

// devState is what `urlflow dev` keeps between runs in the user's configuration directory,
// so that its tokens and stored secrets survive a restart: the key that signs development
// tokens, the key ring (unless URLFLOW_KEYS is set), the operator token and the demo
// service's key.
type devState struct {
	SigningKey    []byte `json:"signingKey"`
	Keys          string `json:"keys"`
	OperatorToken string `json:"operatorToken"`
	// DemoServiceKey is the key of the development delegating service "demo" (added to
	// files written before it existed).
	DemoServiceKey string `json:"demoServiceKey"`
	// UserReferenceKey is the key of the user references, base64 (added to files written
	// before it existed).
	UserReferenceKey string `json:"userReferenceKey"`
}

// devStatePath returns the file of devState: $XDG_CONFIG_HOME/urlflow/dev.json or the
// platform's equivalent.
func devStatePath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the configuration directory for development keys: %w", err)
	}
	return filepath.Join(dir, "urlflow", "dev.json"), nil
}

// loadDevState reads the development state at path, creating it (mode 0600) on first use.
func loadDevState(path string) (*devState, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		var st devState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("development state %s is damaged (delete it to start afresh): %w", path, err)
		}
		if _, err := vault.ParseKeyRing(st.Keys); err != nil || len(st.SigningKey) < 32 || st.OperatorToken == "" {
			return nil, fmt.Errorf("development state %s is incomplete (delete it to start afresh)", path)
		}
		if st.DemoServiceKey != "" && st.UserReferenceKey != "" {
			return &st, nil
		}
		st.fillIn()
		return &st, saveDevState(path, &st)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read development state: %w", err)
	}
	st := &devState{
		SigningKey:    randomKey(),
		Keys:          vault.GenerateKeyRing("dev1"),
		OperatorToken: "uf_op_" + base64.RawURLEncoding.EncodeToString(randomKey()),
	}
	st.fillIn()
	return st, saveDevState(path, st)
}

// fillIn makes what st lacks of what later versions added: the demo service's key and the
// key of the user references.
func (st *devState) fillIn() {
	if st.DemoServiceKey == "" {
		st.DemoServiceKey, _ = services.NewKey()
	}
	if st.UserReferenceKey == "" {
		st.UserReferenceKey = base64.StdEncoding.EncodeToString(randomKey())
	}
}

// saveDevState writes st to path (mode 0600).
func saveDevState(path string, st *devState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create development state directory: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write development state: %w", err)
	}
	return nil
}

func randomKey() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}
