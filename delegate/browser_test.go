package delegate_test

import (
	"context"
	"crypto/rand"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// person is a user at urlflow's pages, in a browser without JavaScript (net/http with a
// cookie jar): the pages work without it, so no Chromium is needed to finish a flow.
type person struct {
	t    testing.TB
	u    *urlflow
	name string
	http *http.Client
}

func newPerson(t testing.TB, u *urlflow, name string) *person {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &person{t: t, u: u, name: name, http: &http.Client{
		Transport:     testTransport,
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// demoKey returns a new key that urlflow dev's demo API accepts.
func demoKey() string { return "demo_" + strings.ToLower(rand.Text()) }

// page is one answer to the person's browser.
type page struct {
	Status   int
	Location string
	HTML     string
}

var (
	pageTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	pageSpace = regexp.MustCompile(`\s+`)
)

// Text returns the page's text as a person reads it.
func (p page) Text() string {
	return strings.TrimSpace(pageSpace.ReplaceAllString(html.UnescapeString(pageTag.ReplaceAllString(p.HTML, " ")), " "))
}

// field returns the value of the first input named name.
func (p page) field(name string) string {
	tag := regexp.MustCompile(`<input[^>]*\bname="` + regexp.QuoteMeta(name) + `"[^>]*>`).FindString(p.HTML)
	if m := regexp.MustCompile(`\bvalue="([^"]*)"`).FindStringSubmatch(tag); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

func (b *person) send(method, target string, form url.Values) page {
	b.t.Helper()
	if !strings.HasPrefix(target, "http") {
		target = b.u.URL + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{Status: resp.StatusCode, Location: resp.Header.Get("Location"), HTML: string(data)}
}

// open opens an elicitation URL, signing in on urlflow dev's sign-in page when sent there,
// and returns the consent page: the flow is then in_progress.
func (b *person) open(elicitationURL string) page {
	b.t.Helper()
	p := b.send(http.MethodGet, elicitationURL, nil)
	for range 5 {
		if p.Status != http.StatusSeeOther && p.Status != http.StatusFound {
			if p.Status != http.StatusOK {
				b.t.Fatalf("%s opening %s got %d: %s", b.name, elicitationURL, p.Status, p.Text())
			}
			return p
		}
		if strings.HasPrefix(p.Location, "/auth/login") {
			login := b.send(http.MethodGet, p.Location, nil)
			p = b.send(http.MethodPost, "/auth/login", url.Values{"name": {b.name}, "csrf": {login.field("csrf")}, "next": {login.field("next")}})
			continue
		}
		p = b.send(http.MethodGet, p.Location, nil)
	}
	b.t.Fatalf("too many redirects opening %s", elicitationURL)
	return p
}

// completeSecret opens the elicitation URL, continues past the consent page and saves
// value, and fails the test unless urlflow says it is stored.
func (b *person) completeSecret(elicitationURL, value string) {
	b.t.Helper()
	id := idOf(elicitationURL)
	consent := b.open(elicitationURL)
	next := b.send(http.MethodPost, "/e/"+id+"/continue", url.Values{"csrf": {consent.field("csrf")}})
	if next.Status != http.StatusSeeOther {
		b.t.Fatalf("continue answered %d: %s", next.Status, next.Text())
	}
	form := b.send(http.MethodGet, next.Location, nil)
	done := b.send(http.MethodPost, "/e/"+id+"/secret", url.Values{"csrf": {form.field("csrf")}, "secret": {value}})
	if done.Status != http.StatusOK || !strings.Contains(strings.ToLower(done.Text()), "stored") {
		b.t.Fatalf("saving the secret answered %d: %s", done.Status, done.Text())
	}
}

// decline opens the elicitation URL and declines on the consent page.
func (b *person) decline(elicitationURL string) {
	b.t.Helper()
	consent := b.open(elicitationURL)
	p := b.send(http.MethodPost, "/e/"+idOf(elicitationURL)+"/decline", url.Values{"csrf": {consent.field("csrf")}})
	if p.Status >= 400 {
		b.t.Fatalf("declining answered %d: %s", p.Status, p.Text())
	}
}

// idOf returns the elicitation ID of an elicitation URL.
func idOf(elicitationURL string) string {
	return elicitationURL[strings.LastIndex(elicitationURL, "/")+1:]
}
