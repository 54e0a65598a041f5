package hook

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
)

// The secret formats a secret scanner knows, from gitleaks' rule set (MIT licence,
// gitleaks/LICENSE), imported as data by scripts/import-gitleaks: an answer that matches
// one holds what looks like that secret.
//
//go:embed gitleaks/rules.json
var gitleaksJSON []byte

// A formatRule is one secret format: a regular expression, the keywords one of which a
// match must hold (all of them lower case; none: any text), and the least Shannon entropy
// of its secret group.
type formatRule struct {
	id       string
	re       *regexp.Regexp
	keywords []string
	entropy  float64
	group    int
}

// formatRules are gitleaks' rules, compiled on first use (about 12 ms): the server and a
// hook's decision of a request never need them.
var formatRules = sync.OnceValue(func() []formatRule { return mustFormatRules(gitleaksJSON) })

func mustFormatRules(data []byte) []formatRule {
	var f struct {
		Rules []struct {
			ID          string   `json:"id"`
			Regex       string   `json:"regex"`
			Keywords    []string `json:"keywords"`
			Entropy     float64  `json:"entropy"`
			SecretGroup int      `json:"secretGroup"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		panic(fmt.Sprintf("hook: gitleaks/rules.json: %v", err))
	}
	rules := make([]formatRule, 0, len(f.Rules))
	for _, r := range f.Rules {
		re, err := regexp.Compile(r.Regex)
		if err != nil {
			panic(fmt.Sprintf("hook: gitleaks rule %s: %v", r.ID, err))
		}
		keywords := make([]string, len(r.Keywords))
		for i, k := range r.Keywords {
			keywords[i] = strings.ToLower(k)
		}
		rules = append(rules, formatRule{id: r.ID, re: re, keywords: keywords, entropy: r.Entropy, group: r.SecretGroup})
	}
	return rules
}

// knownFormat returns the id of the first secret format s matches, or "".
func knownFormat(s string) string {
	lower := strings.ToLower(s)
	for _, r := range formatRules() {
		if len(r.keywords) > 0 && !containsAny(lower, r.keywords) {
			continue
		}
		m := r.re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		secret := m[0]
		switch {
		case r.group > 0 && r.group < len(m):
			secret = m[r.group]
		case len(m) > 1 && r.group == 0:
			// gitleaks takes the first group that matched as the secret.
			for _, g := range m[1:] {
				if g != "" {
					secret = g
					break
				}
			}
		}
		if r.entropy > 0 && shannon(secret) < r.entropy {
			continue
		}
		return r.id
	}
	return ""
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// shannon is the Shannon entropy of s, in bits per character.
func shannon(s string) float64 {
	counts := map[rune]int{}
	n := 0
	for _, r := range s {
		counts[r]++
		n++
	}
	var h float64
	for _, c := range counts {
		p := float64(c) / float64(n)
		h -= p * math.Log2(p)
	}
	return h
}
