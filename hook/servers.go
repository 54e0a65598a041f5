package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// ServerDefinition is one place in Claude Code's configuration that defines an MCP server.
type ServerDefinition struct {
	// Source says where: a file, and for a local definition the project.
	Source string
	// URL is the server's URL; "" for a server Claude Code starts as a command.
	URL string
}

// ClaudeCodeConfig finds the MCP servers Claude Code's configuration defines, to tell
// whether the server named in a hook's input is the one a policy trusts. It reads the user's
// and the local scope (the global configuration file), the project's .mcp.json files (the
// project directory and every directory above it) and the managed managed-mcp.json. A
// server defined only on Claude Code's command line (--mcp-config) is found nowhere, and so
// is never trusted.
type ClaudeCodeConfig struct {
	// GlobalConfig is Claude Code's .claude.json ($CLAUDE_CONFIG_DIR/.claude.json, or
	// ~/.claude.json).
	GlobalConfig string
	// ManagedDir holds the system-wide managed-settings.json and managed-mcp.json.
	ManagedDir string
}

// ClaudeCodeConfigFromEnv returns the configuration files of the Claude Code running this
// process, as getenv (os.LookupEnv) describes it.
func ClaudeCodeConfigFromEnv(getenv func(string) (string, bool)) (ClaudeCodeConfig, error) {
	dir, ok := getenv("CLAUDE_CONFIG_DIR")
	if !ok || dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ClaudeCodeConfig{}, fmt.Errorf("find Claude Code's configuration: %w", err)
		}
		dir = home
	}
	return ClaudeCodeConfig{GlobalConfig: filepath.Join(dir, ".claude.json"), ManagedDir: ManagedDir()}, nil
}

// ManagedDir returns the directory of Claude Code's managed (system-wide) settings on this
// operating system.
func ManagedDir() string {
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/ClaudeCode"
	case "windows":
		return `C:\Program Files\ClaudeCode`
	}
	return "/etc/claude-code"
}

// mcpServers is the part of a configuration file that defines servers.
type mcpServers struct {
	MCPServers map[string]struct {
		URL string `json:"url"`
	} `json:"mcpServers"`
}

// Definitions returns every definition of the server called name that Claude Code would
// see in the project at dir. A file that cannot be read or parsed is an error: the server
// cannot then be shown to be the trusted one.
func (c ClaudeCodeConfig) Definitions(name, dir string) ([]ServerDefinition, error) {
	var defs []ServerDefinition
	add := func(source string, servers mcpServers) {
		if s, ok := servers.MCPServers[name]; ok {
			defs = append(defs, ServerDefinition{Source: source, URL: s.URL})
		}
	}
	var global struct {
		mcpServers
		Projects map[string]mcpServers `json:"projects"`
	}
	if err := readJSON(c.GlobalConfig, &global); err != nil {
		return nil, err
	}
	add(c.GlobalConfig, global.mcpServers)
	var managed mcpServers
	managedFile := filepath.Join(c.ManagedDir, "managed-mcp.json")
	if err := readJSON(managedFile, &managed); err != nil {
		return nil, err
	}
	add(managedFile, managed)
	if dir == "" {
		return defs, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("project directory: %w", err)
	}
	if local, ok := global.Projects[dir]; ok {
		add(c.GlobalConfig+" (project "+dir+")", local)
	}
	for d := dir; ; d = filepath.Dir(d) {
		var project mcpServers
		file := filepath.Join(d, ".mcp.json")
		if err := readJSON(file, &project); err != nil {
			return nil, err
		}
		add(file, project)
		if filepath.Dir(d) == d {
			return defs, nil
		}
	}
}

// readJSON decodes the JSON file at path into v; a missing file leaves v as it is.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
