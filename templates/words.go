package templates

import (
	"context"
	"html"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"

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
	title := Product(ctx)
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
func t(ctx context.Context, id string, pairs ...any) string { return locale.T(ctx, id, pairs...) }

// tn is t for the plural form of count, which the message reads as {{.Count}}.
func tn(ctx context.Context, id string, count int, pairs ...any) string {
	return locale.From(ctx).N(id, count, locale.Placeholders(pairs...))
}

// tm is t for a message with inline markup (locale.HTML): its values escaped, its own
// <strong>, <code> and the like kept.
func tm(ctx context.Context, id string, pairs ...any) templ.Component {
	return templ.Raw(locale.From(ctx).HTML(id, locale.Placeholders(pairs...)))
}

// tnm is tm for the plural form of count.
func tnm(ctx context.Context, id string, count int, pairs ...any) templ.Component {
	return templ.Raw(locale.From(ctx).NHTML(id, count, locale.Placeholders(pairs...)))
}

// timeTag is t as a <time> element in running text, written as the reader's language
// writes a time (locale.Localizer.Clock), for a message's placeholder.
func timeTag(ctx context.Context, at, now time.Time) locale.Markup {
	return timeElement(at, clockTime(ctx, at, now))
}

// secondsTag is timeTag to the second.
func secondsTag(ctx context.Context, at, now time.Time) locale.Markup {
	return timeElement(at, locale.From(ctx).Clock(at, now, true))
}

// timeElement is a <time> element of at that reads text.
func timeElement(at time.Time, text string) locale.Markup {
	return locale.Markup(`<time datetime="` + html.EscapeString(machineTime(at)) + `">` + html.EscapeString(text) + `</time>`)
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
func stateWords(ctx context.Context, state string) string {
	switch state {
	case "pending":
		return t(ctx, "state.pending")
	case "consented":
		return t(ctx, "state.consented")
	case "in_progress":
		return t(ctx, "state.in_progress")
	case "complete":
		return t(ctx, "state.complete")
	case "declined":
		return t(ctx, "state.declined")
	case "cancelled":
		return t(ctx, "state.cancelled")
	case "expired":
		return t(ctx, "state.expired")
	case "failed":
		return t(ctx, "state.failed")
	case "unknown", "":
		return t(ctx, "state.unknown")
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
func clientName(ctx context.Context, name string) string {
	if strings.TrimSpace(name) == "" {
		return t(ctx, "common.an_unnamed_client")
	}
	return name
}

// machineTime is the datetime attribute of a <time> element.
func machineTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// clockTime is a time as the reader's language writes it, to the minute, with the date
// only when it is not within a day. Pages cannot know the reader's time zone (there is no
// script), so the time is in UTC and expiresIn says how far away it is.
func clockTime(ctx context.Context, t, now time.Time) string {
	return locale.From(ctx).Clock(t, now, false)
}

// operatorTime is a time on the operators' pages: to the second, in UTC, with how long ago
// (or how far ahead) it is, so that two events of one minute can be told apart and read
// without a clock: "14:03:27 UTC (2m12s ago)". The date comes in when t is not within a day.
func operatorTime(ctx context.Context, at, now time.Time) string {
	clock := locale.From(ctx).Clock(at, now, true)
	if at.After(now) {
		return t(ctx, "admin.time_ahead", "Time", clock, "Age", ages.Of(at.Sub(now)))
	}
	return t(ctx, "admin.time_ago", "Time", clock, "Age", ages.Of(now.Sub(at)))
}

// stuckWords says why a flow is stuck (flow.Stuck: the state it has stayed in too long, or
// its notification) the way an operator reads it in a list.
func stuckWords(ctx context.Context, why string) string {
	switch why {
	case "pending":
		return t(ctx, "admin.stuck_pending")
	case "consented":
		return t(ctx, "admin.stuck_consented")
	case "in_progress":
		return t(ctx, "admin.stuck_in_progress")
	case "failed":
		return t(ctx, "admin.stuck_failed")
	case "unknown":
		return t(ctx, "admin.stuck_unknown")
	case "notification":
		return t(ctx, "admin.stuck_notification")
	}
	return t(ctx, "admin.stuck_other", "Why", why)
}

// noMatchWords says that no flow matches the filters; on a page other than the first, that
// none does on this page (the flows may be on other pages).
func noMatchWords(ctx context.Context, v Admin) string {
	if v.FirstURL != "" {
		return t(ctx, "admin.no_match_here")
	}
	return t(ctx, "admin.no_match")
}

// fullTime is t in full, to the nanosecond the record holds, for the title of a time.
func fullTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// expiresIn says when t comes, rounded, as seen at now: "in about 8 minutes", or
// "already passed".
func expiresIn(ctx context.Context, at, now time.Time) string { return locale.From(ctx).In(at, now) }

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
func endedNext(ctx context.Context, state string) string {
	if state == "complete" {
		return t(ctx, "ended.next_complete")
	}
	return t(ctx, "ended.next_other")
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

// doneWhoUses says who can use what the user provided and who can see it: the client
// through urlflow's tools; a delegating service through urlflow, which is never given it;
// or a service with release, which may receive it itself (the consent page's promise).
func doneWhoUses(ctx context.Context, v Done) string {
	product, service := Product(ctx), v.ServiceLabel
	switch {
	case service == "" && v.Account != "":
		return t(ctx, "done.client_uses_account", "Product", product)
	case service == "":
		return t(ctx, "done.client_uses", "Product", product)
	case v.ServiceReceives && v.Account != "":
		return t(ctx, "done.service_receives_account", "Service", service)
	case v.ServiceReceives:
		return t(ctx, "done.service_receives", "Service", service)
	case v.Account != "":
		return t(ctx, "done.service_uses_account", "Product", product, "Service", service)
	}
	return t(ctx, "done.service_uses", "Product", product, "Service", service)
}

type queryKey struct{}

// WithQuery returns ctx rendering the page of a request for u, whose query the language
// switcher keeps when it reloads the page in another language (read only then).
func WithQuery(ctx context.Context, u *url.URL) context.Context {
	return context.WithValue(ctx, queryKey{}, u)
}

// keptQuery is the query of the page's request (WithQuery) as the language switcher posts
// it again: every parameter but the language, in the order of their names.
func keptQuery(ctx context.Context) [][2]string {
	u, _ := ctx.Value(queryKey{}).(*url.URL)
	if u == nil || u.RawQuery == "" {
		return nil
	}
	query := u.Query()
	var kept [][2]string
	for _, name := range slices.Sorted(maps.Keys(query)) {
		if name == "lang" {
			continue
		}
		for _, v := range query[name] {
			kept = append(kept, [2]string{name, v})
		}
	}
	return kept
}
