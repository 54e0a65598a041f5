package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// The command line as people meet it: the reference pages of every command under docs/cli,
// generated from the commands, and what urlflow prints and how it exits for help and for
// mistakes, kept in testdata/cli. Both are regenerated with
//
//	go test ./cmd/urlflow -run 'TestCommandReferenceIsCurrent|TestTheCommandLineAnswers' -update

const commandReference = "../../docs/cli"

// TestCommandReferenceIsCurrent: docs/cli holds one page per command, as the commands
// describe themselves.
func TestCommandReferenceIsCurrent(t *testing.T) {
	root := newRootCommand(envOf(nil), strings.NewReader(""), io.Discard, io.Discard)
	walk(root, func(c *cobra.Command) { c.DisableAutoGenTag = true })
	dir := t.TempDir()
	link := func(name string) string { return name } // pages link each other by file name
	if err := doc.GenMarkdownTreeCustom(root, dir, func(string) string { return "" }, link); err != nil {
		t.Fatal(err)
	}
	want := readTree(t, dir)
	if *update {
		if err := os.RemoveAll(commandReference); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(commandReference, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range want {
			if err := os.WriteFile(filepath.Join(commandReference, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := readTree(t, commandReference)
	for name, text := range want {
		if got[name] != text {
			t.Errorf("docs/cli/%s is not what the commands say", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s is no command's page", name)
		}
	}
	if t.Failed() {
		t.Log("regenerate docs/cli with: go test ./cmd/urlflow -run TestCommandReferenceIsCurrent -update")
	}
}

// readTree returns the files of dir by name.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// TestTheCommandLineAnswers: for help and for each kind of mistake, what urlflow prints on
// stdout and stderr and its exit status, as testdata/cli/NAME.txt holds them: help on stdout
// with status 0, a mistake in how a command was called as one line with a suggestion and
// status 2, any other error as one line with status 1.
func TestTheCommandLineAnswers(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"help", []string{"--help"}},
		{"help-command", []string{"help", "flows"}},
		{"help-flag-of-a-command", []string{"flows", "list", "--help"}},
		{"help-short-flag", []string{"serve", "-h"}},
		{"no-command", nil},
		{"group-without-command", []string{"flows"}},
		{"unknown-command", []string{"frobnicate"}},
		{"mistyped-command", []string{"flows", "lst"}},
		{"mistyped-flag", []string{"serve", "--adr", ":8080"}},
		{"mistyped-inherited-flag", []string{"flows", "list", "--sever", "http://x"}},
		{"unknown-flag", []string{"dev", "--frobnicate"}},
		{"flag-without-value", []string{"flows", "list", "--state"}},
		{"missing-argument", []string{"flows", "show"}},
		{"extra-argument", []string{"version", "now"}},
		{"version", []string{"version"}},
		{"completion-without-shell", []string{"completion"}},
		{"required-flag", []string{"flows", "cancel", "ID"}},
		{"error-is-one-line", []string{"flows", "list"}},
		{"server-without-scheme", []string{"flows", "list", "--server", "urlflow.example:8080"}},
		{"server-of-another-scheme", []string{"flows", "summary", "--server", "ftp://urlflow.example"}},
		{"config-check-without-settings", []string{"config", "check"}},
		{"config-check-mis-indented", []string{"config", "check", "--config", "testdata/config/mis-indented.yaml"}},
		{"config-check-mistakes", []string{"config", "check", "--mode", "dev", "--config", "testdata/config/mistakes.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := report(run(context.Background(), tt.args, envOf(nil), strings.NewReader(""), &stdout, &stderr), &stderr)
			got := fmt.Sprintf("$ urlflow %s\nexit status %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tt.args, " "),
				status, stdout.String(), stderr.String())
			got = strings.ReplaceAll(got, "urlflow "+version(), "urlflow VERSION")
			path := filepath.Join("testdata", "cli", tt.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil || string(want) != got {
				t.Errorf("urlflow %q answers\n%s\nwant (%s)\n%s", tt.args, got, path, want)
			}
		})
	}
}

// TestCompletionForEveryShell: urlflow completion prints the script of each shell it names.
func TestCompletionForEveryShell(t *testing.T) {
	for shell, start := range map[string]string{"bash": "# bash completion V2 for urlflow", "zsh": "#compdef urlflow",
		"fish": "# fish completion for urlflow", "powershell": "# powershell completion for urlflow"} {
		var stdout, stderr bytes.Buffer
		status := report(run(context.Background(), []string{"completion", shell}, envOf(nil), strings.NewReader(""), &stdout, &stderr), &stderr)
		if status != 0 || !strings.HasPrefix(stdout.String(), start) || stderr.Len() != 0 {
			t.Errorf("completion %s: status %d, stdout %.60q, stderr %q", shell, status, stdout.String(), stderr.String())
		}
	}
}
