package templates

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urlflow/urlflow/internal/ages"
	"github.com/urlflow/urlflow/internal/locale"
)

// titled returns p with fallback as its title when it has none, so that every page has a
// document title and a heading even when the caller sets neither.
func titled(p Page, fallback string) Page {
	if strings.TrimSpace(p.Title) == "" {
		p.Title = fallback
	}
	return p
}

// documentTitle is the text of <title>: the page's title and the product name, after
// "Error:" when the page shows a refused form again.
func documentTitle(ctx context.Context, p Page) string {
	title := product(ctx)
	if strings.TrimSpace(p.Title) != "" {
		title = p.Title + " · " + title
	}
	if len(p.Errors) > 0 {
		title = t(ctx, "layout.error_title", "Title", title)
	}
	return title
}

// t returns message id in the language of ctx's reader, with the placeholders of pairs
// (name, value, name, value…).
func t(ctx context.Context, id string, pairs ...any) string {
	var data map[string]any
	if len(pairs) > 0 {
		data = make(map[string]any, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			data[pairs[i].(string)] = pairs[i+1]
		}
	}
	return locale.From(ctx).T(id, data)
}

// withErrors returns p showing the errors of its form that are set (Message not empty).
func withErrors(p Page, errs ...FieldError) Page {
	for _, e := range errs {
		if e.Message != "" {
			p.Errors = append(p.Errors, e)
		}
	}
	return p
}

// firstOf returns the first of values that is not blank.
func firstOf(values ...string) string {
	for _, v := range values {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// stateWords says an elicitation state the way a person would.
func stateWords(state string) string {
	switch state {
	case "pending":
		return "Waiting for your client"
	case "consented":
		return "Approved in your client"
	case "in_progress":
		return "In progress"
	case "complete":
		return "Completed"
	case "declined":
		return "Declined"
	case "cancelled":
		return "Cancelled"
	case "expired":
		return "Expired"
	case "failed":
		return "Not accepted, can be tried again"
	case "unknown", "":
		return "Unknown"
	}
	return strings.ReplaceAll(state, "_", " ")
}

// stateClass is the CSS modifier that colours a state's badge.
func stateClass(state string) string {
	switch state {
	case "complete":
		return "status status-good"
	case "expired", "failed":
		return "status status-warn"
	case "pending", "consented", "in_progress":
		return "status status-active"
	}
	return "status"
}

// clientName names the requesting client, or says that it gave no name.
func clientName(name string) string {
	if strings.TrimSpace(name) == "" {
		return "An unnamed client"
	}
	return name
}

// machineTime is the datetime attribute of a <time> element.
func machineTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// clockTime is an expiry time as people read it, with the date only when it is not within
// a day. Pages cannot know the reader's time zone (there is no script), so the time is in
// UTC and expiresIn says how far away it is.
func clockTime(t, now time.Time) string { return utcTime(t, now, "15:04") }

// utcTime is t in UTC at the precision of clock ("15:04", "15:04:05"), with the date only
// when t is not within a day of now.
func utcTime(t, now time.Time, clock string) string {
	if d := t.Sub(now); d > -20*time.Hour && d < 20*time.Hour {
		return t.UTC().Format(clock + " UTC")
	}
	return t.UTC().Format(clock + " UTC, 2 Jan 2006")
}

// operatorTime is a time on the operators' pages: to the second, in UTC, with how long ago
// (or how far ahead) it is, so that two events of one minute can be told apart and read
// without a clock: "14:03:27 UTC (2m12s ago)". The date comes in when t is not within a day.
func operatorTime(t, now time.Time) string {
	if t.After(now) {
		return utcTime(t, now, "15:04:05") + " (in " + ages.Of(t.Sub(now)) + ")"
	}
	return utcTime(t, now, "15:04:05") + " (" + ages.Of(now.Sub(t)) + " ago)"
}

// stuckWords says why a flow is stuck (flow.Stuck: the state it has stayed in too long, or
// its notification) the way an operator reads it in a list.
func stuckWords(why string) string {
	switch why {
	case "pending":
		return "the client has not answered"
	case "consented":
		return "the link was not opened"
	case "in_progress":
		return "not finished on the pages"
	case "failed":
		return "failed, no new try"
	case "unknown":
		return "the client's answer is unknown"
	case "notification":
		return "the notification is owed"
	}
	return why
}

// fullTime is t in full, to the nanosecond the record holds, for the title of a time.
func fullTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// expiresIn says when t comes, rounded, as seen at now: "in about 8 minutes", or
// "already passed".
func expiresIn(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "already passed"
	case d < 90*time.Second:
		return "in about a minute"
	case d < 90*time.Minute:
		return fmt.Sprintf("in about %d minutes", int((d+30*time.Second)/time.Minute))
	case d < 36*time.Hour:
		return fmt.Sprintf("in about %d hours", int((d+30*time.Minute)/time.Hour))
	}
	return fmt.Sprintf("in about %d days", int((d+12*time.Hour)/(24*time.Hour)))
}

// secretDescribedBy lists the ids that describe the secret field: the error first, then
// the rules.
func secretDescribedBy(v SecretForm) string {
	var ids []string
	if v.Error != "" && v.ErrorField == "" {
		ids = append(ids, "secret-error")
	}
	if len(v.Rules) > 0 {
		ids = append(ids, "secret-rules")
	}
	return strings.Join(ids, " ")
}

// endedIcon picks the icon of the ended page for a state.
func endedIcon(state string) string {
	switch state {
	case "complete":
		return "check"
	case "expired":
		return "clock"
	case "declined", "cancelled":
		return "stop"
	}
	return "info"
}

// endedIconClass colours the ended page's icon for a state.
func endedIconClass(state string) string {
	switch state {
	case "complete":
		return "hero-icon-good"
	case "expired", "failed":
		return "hero-icon-warn"
	}
	return "hero-icon-neutral"
}

// endedNext tells the reader of the ended page what to do now.
func endedNext(state string) string {
	if state == "complete" {
		return "Return to your MCP client to carry on. You can close this tab."
	}
	return "To try again, start over from your MCP client. You can close this tab."
}

// shortID is the first 12 characters of an elicitation ID, enough to tell flows apart on a
// page; links and titles carry the whole ID.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return id[:12] + "…"
}

// age writes d for people (ages.Of).
func age(d time.Duration) string { return ages.Of(d) }

// parameterID is the id of the field of parameter f, and of its help and error with a
// suffix.
func parameterID(f ParameterField, suffix string) string { return "param-" + f.Name + suffix }

// secretFormError is the error of the secret form as the error summary lists it: about the
// secret's field, or the parameter's it names.
func secretFormError(v SecretForm) FieldError {
	field := "secret"
	if v.ErrorField != "" {
		field = parameterID(ParameterField{Name: v.ErrorField}, "")
	}
	return FieldError{Field: field, Message: v.Error}
}

// parameterDescribedBy lists the ids that describe the field of f: its error, its help.
func parameterDescribedBy(v SecretForm, f ParameterField) string {
	var ids []string
	if v.Error != "" && v.ErrorField == f.Name {
		ids = append(ids, parameterID(f, "-error"))
	}
	if f.Description != "" || f.Hint != "" {
		ids = append(ids, parameterID(f, "-help"))
	}
	return strings.Join(ids, " ")
}
