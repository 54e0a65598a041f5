package pages

import (
	"context"
	"errors"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/upstream"
)

// ruleWords are the rules of slot's values in the reader's language, one sentence each
// (slots.Slot.Rules says them in English). A pattern's hint is the configuration's own
// words, as written.
func ruleWords(ctx context.Context, slot *slots.Slot) []string {
	v := slot.Validation
	var rules []string
	switch {
	case v.MinLength > 0 && v.MaxLength > 0:
		rules = append(rules, locale.T(ctx, "secret.rule_length", "Min", v.MinLength, "Max", v.MaxLength))
	case v.MaxLength > 0:
		rules = append(rules, locale.N(ctx, "secret.rule_max_length", v.MaxLength))
	}
	if v.PatternHint != "" {
		rules = append(rules, v.PatternHint)
	}
	if v.MinEntropyBits > 0 {
		rules = append(rules, locale.T(ctx, "secret.rule_entropy", "Bits", v.MinEntropyBits))
	}
	return rules
}

// brokenWords says in the reader's language which rule of slot the value broke.
func brokenWords(ctx context.Context, slot *slots.Slot, invalid *slots.InvalidValueError) string {
	switch invalid.Kind {
	case slots.Empty:
		return locale.T(ctx, "secret.invalid_empty", "Secret", slot.Label)
	case slots.NotText:
		return locale.T(ctx, "secret.invalid_not_text")
	case slots.TooShort:
		return locale.N(ctx, "secret.invalid_too_short", invalid.Limit)
	case slots.TooLong:
		return locale.N(ctx, "secret.invalid_too_long", invalid.Limit)
	case slots.NoMatch:
		if hint := slot.Validation.PatternHint; hint != "" {
			return locale.T(ctx, "secret.invalid_no_match_hint", "Secret", slot.Label, "Hint", hint)
		}
		return locale.T(ctx, "secret.invalid_no_match", "Secret", slot.Label)
	case slots.TooWeak:
		return locale.T(ctx, "secret.invalid_too_weak", "Bits", invalid.Limit)
	}
	return invalid.Rule
}

// brokenParameterWords says in the reader's language which rule the value of one of the
// parameters of slot's address broke.
func brokenParameterWords(ctx context.Context, slot *slots.Slot, invalid *upstream.InvalidParameterError) string {
	var label, hint string
	if slot.API != nil {
		for _, p := range slot.API.Parameters {
			if p.Name == invalid.Name {
				label, hint = p.Label, p.PatternHint
			}
		}
	}
	switch invalid.Kind {
	case upstream.ParameterEmpty:
		return locale.T(ctx, "secret.parameter_empty", "Label", label)
	case upstream.NotPathSegment:
		return locale.T(ctx, "secret.parameter_not_path_segment", "Label", label)
	case upstream.NotHostLabel:
		return locale.T(ctx, "secret.parameter_not_host_label", "Label", label)
	case upstream.ParameterNoMatch:
		if hint != "" {
			return locale.T(ctx, "secret.parameter_no_match_hint", "Label", label, "Hint", hint)
		}
		return locale.T(ctx, "secret.parameter_no_match", "Label", label)
	}
	return invalid.Rule
}

// checkWords says in the reader's language what the check of a secret at its API found
// (upstream.Caller.Check's error); the flow's history keeps the English of err. A detail
// that comes from the network (a timeout, a refused connection) stays as it came.
func checkWords(ctx context.Context, err error) string {
	var refused *upstream.RefusedError
	var unreachable *upstream.UnreachableError
	switch {
	case errors.As(err, &refused):
		return locale.T(ctx, "failed.reason_refused", "Status", refused.StatusLine())
	case errors.As(err, &unreachable):
		return locale.T(ctx, "failed.reason_unreachable", "Detail", unreachable.Detail)
	}
	return err.Error()
}
