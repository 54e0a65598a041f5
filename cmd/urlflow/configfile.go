package main

import (
	"errors"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state/flow"
)

// fileConfig is the YAML configuration file: its sections, decoded into their packages'
// types, and its top-level settings (the settings table's YAML keys), kept as nodes for
// readSettings. A key that is neither is an error.
type fileConfig struct {
	Secrets   []slots.Slot       `yaml:"secrets"`
	Providers []providers.Config `yaml:"providers"`
	Services  []services.Config  `yaml:"services"`
	Operators operatorsConfig    `yaml:"operators"`
	Branding  brand.Config       `yaml:"branding"`
	Messages  locale.Overrides   `yaml:"messages"`
	Settings  fileSettings       `yaml:",inline"`
}

// operatorsConfig is the operators: section of the YAML file.
type operatorsConfig struct {
	// Subjects are the users who are operators in the browser (the /admin pages): their
	// subjects at the deployment's issuer.
	Subjects []string `yaml:"subjects"`
	// ReadOnlySubjects are the users who may look at the operators' pages in the browser
	// and never act on a flow.
	ReadOnlySubjects []string `yaml:"readonly_subjects"`
	// Claim makes operators of the users whose ID token (urlflow serve's browser sign-in)
	// has the claim Name with Value, or Value among its values (a group).
	Claim struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"claim"`
	// StuckAfter maps a running state, or "notification", to how long a flow may stay in
	// it (or owe its notification) before it is stuck: a Go duration.
	StuckAfter map[string]string `yaml:"stuck_after"`
}

// stuckAfter returns the thresholds of c over the defaults, and adds every problem at its
// path in the file.
func (c operatorsConfig) stuckAfter(problemf func(path, format string, a ...any)) flow.StuckAfter {
	t := flow.DefaultStuckAfter
	fields := map[string]*time.Duration{
		string(flow.Pending): &t.Pending, string(flow.Consented): &t.Consented, string(flow.InProgress): &t.InProgress,
		string(flow.Failed): &t.Failed, string(flow.Unknown): &t.Unknown, string(flow.StuckNotification): &t.Notification,
	}
	for _, name := range slices.Sorted(maps.Keys(c.StuckAfter)) {
		field, ok := fields[name]
		d, err := time.ParseDuration(c.StuckAfter[name])
		path := "operators.stuck_after." + name
		switch {
		case !ok:
			problemf(path, "not a running state nor notification: want one of %s, e.g. pending: 30m",
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		case err != nil || d < 0:
			problemf(path, "want a duration such as 5m or 1h30m, got %q", c.StuckAfter[name])
		default:
			*field = d
		}
	}
	return t
}

// readFile reads the configuration file that the config setting names (urlflow dev's
// built-in demo when it names none; serve has no secret slots until the file names some)
// and decodes it. It drops, as problems, the top-level keys that are no setting of the
// mode and the values that are not a single value.
func (c *config) readFile(l *loading, flags *pflag.FlagSet, getenv env) fileConfig {
	v, err := lookupSetting("config").read(l.mode, flags, getenv, nil)
	if err != nil {
		l.problems = append(l.problems, err)
	}
	l.v = values{"config": v} // until readSettings reads them all, for the problems of this file
	c.ConfigFile = v.Raw
	var raw []byte
	if l.mode == cmdDev {
		raw = demoConfig
	}
	if c.ConfigFile != "" {
		b, err := os.ReadFile(c.ConfigFile)
		if err != nil {
			l.fail("config", "%v", err)
		}
		raw = b
	}
	l.file = describeFile(c.ConfigFile)
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		l.problemf("configuration file %s:%s", l.file, syntaxError(raw, err))
		return fileConfig{}
	}
	l.doc = &doc
	file := l.decode(&doc)
	for _, key := range slices.Sorted(maps.Keys(file.Settings)) {
		node := file.Settings[key]
		switch {
		case !slices.Contains(l.fileSettingKeys(), key): // reported by decode
		case node.Kind != yaml.ScalarNode:
			l.problemf("configuration file %s:%d:%d: %s: want a single value, e.g. %s: %s",
				l.file, node.Line, node.Column, key, key, yamlExample(key))
		default:
			continue
		}
		delete(file.Settings, key)
	}
	return file
}

// fileSettingKeys are the top-level keys of the settings the mode reads.
func (l *loading) fileSettingKeys() []string {
	var keys []string
	for _, s := range settingsTable {
		if s.YAML != "" && s.readBy(l.mode) {
			keys = append(keys, s.YAML)
		}
	}
	return keys
}

// decode decodes doc, adding as problems the keys no setting takes, each with where it is
// and what was probably meant (the decoder's own "field not found" would name a Go type),
// and the values of the wrong type.
func (l *loading) decode(doc *yaml.Node) fileConfig {
	for _, p := range unknownKeys(doc, reflect.TypeFor[fileConfig](), l.fileSettingKeys()) {
		l.problemf("configuration file %s:%s", l.file, p)
	}
	var file fileConfig
	if err := doc.Decode(&file); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) {
			l.problemf("configuration file %s: %v", l.file, err)
		}
		for _, e := range typeErrors(doc, typeErr) {
			l.problemf("configuration file %s:%s", l.file, e)
		}
	}
	return file
}

// yamlExample is the example of the setting whose YAML key is key, quoted when YAML would
// not read it as one string.
func yamlExample(key string) string {
	for _, s := range settingsTable {
		if s.YAML == key {
			return yamlScalar(s.Example)
		}
	}
	return ""
}
