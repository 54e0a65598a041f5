package main

import (
	"fmt"
	"io"
	"strings"
)

// fileSections are the sections of the configuration file that their packages decode
// (fileConfig), with the guide that describes each: its title and its link from docs/.
var fileSections = []struct{ key, what, guide, link string }{
	{"secrets", "secret slots: what urlflow asks users for, how a value is checked, and how `call_api` uses it", "Configuring urlflow", "configuring.md#the-configuration-file"},
	{"providers", "third-party OAuth providers", "Configuring urlflow", "configuring.md#third-party-providers"},
	{"services", "delegating MCP servers: what each may ask for, and how it authenticates", "Delegating from your MCP server", "delegation.md"},
	{"branding", "the end users' pages in the deployment's look: `product_name`, `logo`, `colors` (`accent`, `accent_dark`; checked for contrast) and `support` (`url`, `label`)", "Branding", "branding.md"},
	{"messages", "the pages' wording in your own words: by language (`en`, `de`, …), by message ID, the text that replaces urlflow's (checked: the language, the ID, the placeholders)", "Languages", "languages.md#your-own-wording"},
	{"operators", "operators in the browser (`subjects`, `claim`; `readonly_subjects` may only look) and the thresholds of stuck flows (`stuck_after`)", "Operating urlflow", "operating.md"},
}

// configurationDocHeader opens docs/configuration.md.
const configurationDocHeader = `# Configuration

<!-- Generated from the settings table, cmd/urlflow/settings.go. Do not edit: change the
     table and run  go test ./cmd/urlflow -run TestConfigurationDocIsCurrent -update  -->

Every setting of urlflow is read the same way: its flag if given, else its environment
variable, else its key in the configuration file (` + "`URLFLOW_CONFIG`" + `), else its default.
A flag or variable set to the empty string counts as not set. A setting that holds a secret
also accepts ` + "`NAME_FILE`" + `, the path of a file that holds the value (its trailing newline
is dropped); setting both is an error, and no error ever shows the value. ` + "`urlflow dev`" + ` and
` + "`urlflow serve`" + ` check every setting at start and name every problem at once;
` + "`urlflow config check`" + ` does the same without starting, and prints the configuration in
effect with the source of each setting. [` + "`urlflow.schema.json`" + `](urlflow.schema.json), the JSON
Schema of the file, lets an editor check it as you type ([how](configuring.md#your-editor-checks-the-file-the-json-schema)).

Flags take two dashes (` + "`--addr`" + `); one dash (` + "`-addr`" + `) works too, as with earlier versions.
Each command lists its flags with ` + "`--help`" + `.

`

// writeConfigurationDoc writes docs/configuration.md: an overview of every setting, then
// each section with its settings, then the sections of the configuration file.
func writeConfigurationDoc(w io.Writer) error {
	var b strings.Builder
	b.WriteString(configurationDocHeader)
	b.WriteString("| environment | flag | YAML | default | secret |\n|---|---|---|---|---|\n")
	for _, s := range settingsTable {
		secret := "–"
		if s.Secret {
			secret = "yes"
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s | %s |\n", s.Env, strings.ToLower(s.Env), code(flagName(s.Flag)), code(s.YAML), s.defaultText(), secret)
	}
	for _, sec := range sections {
		fmt.Fprintf(&b, "\n## %s\n", sec.Title)
		if sec.Intro != "" {
			fmt.Fprintf(&b, "\n%s\n", sec.Intro)
		}
		for _, s := range settingsTable {
			if s.Section == sec.Name {
				s.writeDoc(&b)
			}
		}
	}
	b.WriteString("\n## Sections of the configuration file\n\nBeside the settings above that have a YAML key, the file has these sections, each\ndescribed in a guide:\n\n")
	for _, f := range fileSections {
		fmt.Fprintf(&b, "- `%s:` %s ([%s](%s)).\n", f.key, f.what, f.guide, f.link)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDoc writes the part of the docs about s: a heading, the facts, the description.
func (s *setting) writeDoc(b *strings.Builder) {
	fmt.Fprintf(b, "\n### `%s`\n\n", s.Env)
	var facts []string
	if s.Flag != "" {
		facts = append(facts, "flag "+code(flagName(s.Flag)))
	}
	if s.YAML != "" {
		facts = append(facts, "YAML "+code(s.YAML))
	}
	facts = append(facts, s.Type, "default "+s.defaultText())
	if s.Example != "" {
		facts = append(facts, "e.g. "+code(s.Example))
	}
	if s.Secret {
		facts = append(facts, "secret: also "+code(s.Env+"_FILE"))
	}
	if s.TestOnly {
		facts = append(facts, "test only: refused by "+commandList(s.RefusedBy))
	}
	facts = append(facts, "read by "+commandList(s.Commands))
	fmt.Fprintf(b, "%s.\n\n%s\n", strings.Join(facts, " · "), s.Description)
}

// defaultText is s's default in the docs: the value (and a command's own), or what the
// note says, and which commands require it.
func (s *setting) defaultText() string {
	text := s.DefaultNote
	switch {
	case len(s.DefaultIn) > 0:
		var each []string
		for _, c := range s.Commands {
			each = append(each, c+" "+code(s.defaultFor(c)))
		}
		text = strings.Join(each, ", ")
	case s.Default != "":
		text = code(s.Default)
	}
	if len(s.Required) > 0 {
		if text != "" {
			text += "; "
		}
		text += "required by " + commandList(s.Required)
	}
	if text == "" {
		return "none"
	}
	return text
}

// flagName is --name, or nothing.
func flagName(name string) string {
	if name == "" {
		return ""
	}
	return "--" + name
}

// code is s as code, or a dash when empty.
func code(s string) string {
	if s == "" {
		return "–"
	}
	return "`" + s + "`"
}

// commandList names commands as people type them.
func commandList(commands []string) string {
	out := make([]string, len(commands))
	for i, c := range commands {
		out[i] = "`urlflow " + c + "`"
	}
	return strings.Join(out, ", ")
}
