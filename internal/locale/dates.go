package locale

import (
	"time"

	"github.com/go-playground/locales"
	"github.com/go-playground/locales/ar"
	"github.com/go-playground/locales/de"
	"github.com/go-playground/locales/en_GB"
	"github.com/go-playground/locales/es"
	"github.com/go-playground/locales/fr"
	"github.com/go-playground/locales/ja"
)

// calendars are the CLDR formats of times and dates of each language's base, English as
// written in Britain (a 24-hour clock, the day before the month), which is how urlflow has
// always written times.
var calendars = map[string]func() locales.Translator{
	"ar": ar.New, "de": de.New, "en": en_GB.New, "es": es.New, "fr": fr.New, "ja": ja.New,
}

// calendarOf returns the formats of the localizer's language, English's when CLDR's are not
// built in.
func calendarOf(tag string) locales.Translator {
	if f, ok := calendars[tag]; ok {
		return f()
	}
	return en_GB.New()
}

// Clock writes t in UTC as the language writes a time of day, to the minute or, with
// seconds, to the second; the date comes in when t is not within 20 hours of now. Pages
// cannot know the reader's time zone (they run no script), so the text names UTC, and the
// pages say how far away the time is beside it.
func (l *Localizer) Clock(t, now time.Time, seconds bool) string {
	t = t.UTC()
	clock := l.calendar.FmtTimeShort(t)
	if seconds {
		clock = l.calendar.FmtTimeMedium(t)
	}
	if d := t.Sub(now); d > -20*time.Hour && d < 20*time.Hour {
		return l.T("time.clock_utc", map[string]any{"Clock": clock})
	}
	return l.T("time.clock_utc_date", map[string]any{"Clock": clock, "Date": l.calendar.FmtDateMedium(t)})
}

// In says when at comes, rounded, as seen at now: "in about 8 minutes", or "already
// passed".
func (l *Localizer) In(at, now time.Time) string {
	d := at.Sub(now)
	switch {
	case d <= 0:
		return l.T("time.already_passed", nil)
	case d < 90*time.Second:
		return l.T("time.in_about_a_minute", nil)
	case d < 90*time.Minute:
		return l.N("time.in_about_minutes", int((d+30*time.Second)/time.Minute), nil)
	case d < 36*time.Hour:
		return l.N("time.in_about_hours", int((d+30*time.Minute)/time.Hour), nil)
	}
	return l.N("time.in_about_days", int((d+12*time.Hour)/(24*time.Hour)), nil)
}
