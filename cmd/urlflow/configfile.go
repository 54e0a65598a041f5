package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

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
	Settings  fileSettings       `yaml:",inline"`
}

// operatorsConfig is the operators: section of the YAML file.
type operatorsConfig struct {
	// Subjects are the users who are operators in the browser (the /admin pages): their
	// subjects at the deployment's issuer.
	Subjects []string `yaml:"subjects"`
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

// stuckAfter returns the thresholds of c over the defaults, and names every problem.
func (c operatorsConfig) stuckAfter() (flow.StuckAfter, []error) {
	t := flow.DefaultStuckAfter
	fields := map[string]*time.Duration{
		string(flow.Pending): &t.Pending, string(flow.Consented): &t.Consented, string(flow.InProgress): &t.InProgress,
		string(flow.Failed): &t.Failed, string(flow.Unknown): &t.Unknown, string(flow.StuckNotification): &t.Notification,
	}
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(c.StuckAfter)) {
		field, ok := fields[name]
		d, err := time.ParseDuration(c.StuckAfter[name])
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("operators.stuck_after: %q is not a running state nor notification (want %s)",
				name, strings.Join(slices.Sorted(maps.Keys(fields)), ", ")))
		case err != nil || d < 0:
			problems = append(problems, fmt.Errorf("operators.stuck_after.%s: want a duration such as 5m, got %q", name, c.StuckAfter[name]))
		default:
			*field = d
		}
	}
	return t, problems
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
	where := describeFile(c.ConfigFile)
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		l.problemf("configuration file %s: %v", where, err)
		return fileConfig{}
	}
	// Keys no setting takes, each with where it is and what was probably meant; the
	// decoder's own "field not found" would name a Go type instead.
	var settingKeys []string
	for _, s := range settingsTable {
		if s.YAML != "" && s.readBy(l.mode) {
			settingKeys = append(settingKeys, s.YAML)
		}
	}
	for _, p := range unknownKeys(&doc, reflect.TypeFor[fileConfig](), settingKeys) {
		l.problemf("configuration file %s:%s", where, p)
	}
	var file fileConfig
	if err := doc.Decode(&file); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) {
			l.problemf("configuration file %s: %v", where, err)
		}
		for _, e := range typeErrors(typeErr) {
			l.problemf("configuration file %s: %s", where, e)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(file.Settings)) {
		node := file.Settings[key]
		switch {
		case !slices.Contains(settingKeys, key): // reported above
		case node.Kind != yaml.ScalarNode:
			l.problemf("configuration file %s:%d:%d: %s: want a single value", where, node.Line, node.Column, key)
		default:
			continue
		}
		delete(file.Settings, key)
	}
	return file
}

// typeErrors returns the decoder's complaints of a value of the wrong type, each as
// "LINE: what" ("3: cannot unmarshal !!seq into string"); unknown keys are unknownKeys'.
func typeErrors(err *yaml.TypeError) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range err.Errors {
		if !strings.Contains(e, " not found in type ") {
			out = append(out, strings.TrimPrefix(e, "line "))
		}
	}
	return out
}
