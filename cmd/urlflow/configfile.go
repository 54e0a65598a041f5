package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
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
	var file fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		l.problemf("configuration file %s: %v", describeFile(c.ConfigFile), err)
	}
	for _, key := range slices.Sorted(maps.Keys(file.Settings)) {
		node := file.Settings[key]
		switch {
		case !slices.ContainsFunc(settingsTable, func(s setting) bool { return s.YAML == key && s.readBy(l.mode) }):
			l.problemf("configuration file %s: line %d: field %s not found", describeFile(c.ConfigFile), node.Line, key)
		case node.Kind != yaml.ScalarNode:
			l.problemf("configuration file %s: line %d: %s: want a single value", describeFile(c.ConfigFile), node.Line, key)
		default:
			continue
		}
		delete(file.Settings, key)
	}
	return file
}
