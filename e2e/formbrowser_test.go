package e2e

import (
	"context"
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

// formBrowser is a browser without JavaScript or rendering: net/http with a cookie jar. It
// sends exactly the requests a test wants, including ones a real browser would refuse to
// send (a wrong CSRF token, another Origin, an oversized body, another Host), and it never
// follows redirects by itself, so that tests see every Location.
type formBrowser struct {
	t    testing.TB
	s    *server
	name string
	http *http.Client
}

// newFormBrowser returns a signed-out formBrowser for development user name on s.
func newFormBrowser(t testing.TB, s *server, name string) *formBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &formBrowser{t: t, s: s, name: name, http: &http.Client{
		Jar:           jar,
		Transport:     ownTransport(t),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// webPage is one answer to a formBrowser.
type webPage struct {
	Status int
	Header http.Header
	HTML   string
}

// Location returns the Location header.
func (p webPage) Location() string { return p.Header.Get("Location") }

var (
	pageTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	pageSpace = regexp.MustCompile(`\s+`)
)

// Text returns the page's text as a person reads it: tags removed, entities decoded,
// white space collapsed.
func (p webPage) Text() string {
	return strings.TrimSpace(pageSpace.ReplaceAllString(html.UnescapeString(pageTag.ReplaceAllString(p.HTML, " ")), " "))
}

// field returns the value of the first input named name.
func (p webPage) field(name string) (string, bool) {
	re := regexp.MustCompile(`<input[^>]*\bname="` + regexp.QuoteMeta(name) + `"[^>]*>`)
	tag := re.FindString(p.HTML)
	if tag == "" {
		return "", false
	}
	m := regexp.MustCompile(`\bvalue="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return "", true
	}
	return html.UnescapeString(m[1]), true
}

// csrf returns the page's CSRF token and fails the test if it has none.
func (p webPage) csrf(t testing.TB) string {
	t.Helper()
	v, ok := p.field("csrf")
	if !ok || v == "" {
		t.Fatalf("the page (status %d) has no CSRF field:\n%s", p.Status, p.Text())
	}
	return v
}

// formRequest is one request a formBrowser sends.
type formRequest struct {
	method string
	// path is a path on the server, or a full URL.
	path   string
	form   url.Values
	body   io.Reader // instead of form; sent chunked (length unknown)
	header http.Header
	host   string
}

// send sends r with the browser's cookies and returns the answer.
func (b *formBrowser) send(r formRequest) webPage {
	b.t.Helper()
	target := r.path
	if !strings.HasPrefix(target, "http") {
		target = b.s.BaseURL + target
	}
	var body io.Reader
	switch {
	case r.form != nil:
		body = strings.NewReader(r.form.Encode())
	case r.body != nil:
		body = r.body
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if r.body != nil {
		req.ContentLength = -1
	}
	if r.form != nil || r.body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.host != "" {
		req.Host = r.host
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: read the answer: %v", r.method, r.path, err)
	}
	return webPage{Status: resp.StatusCode, Header: resp.Header, HTML: string(data)}
}

// get GETs path without following a redirect.
func (b *formBrowser) get(path string) webPage {
	b.t.Helper()
	return b.send(formRequest{method: http.MethodGet, path: path})
}

// post posts form to path without following a redirect.
func (b *formBrowser) post(path string, form url.Values) webPage {
	b.t.Helper()
	return b.send(formRequest{method: http.MethodPost, path: path, form: form})
}

// signIn signs in on the development page as the browser's user, as a person would: it
// opens /auth/login?next=next and posts the form back with the fields the page gave. It
// returns the answer to the post.
func (b *formBrowser) signIn(next string) webPage {
	b.t.Helper()
	page := b.get("/auth/login?next=" + url.QueryEscape(next))
	if page.Status != http.StatusOK {
		b.t.Fatalf("sign-in page answered %d: %s", page.Status, page.Text())
	}
	formNext, _ := page.field("next")
	return b.post("/auth/login", url.Values{"name": {b.name}, "csrf": {page.csrf(b.t)}, "next": {formNext}})
}

// open opens an elicitation URL, signing in first when sent to sign-in, and follows the
// redirects back. It returns the page it ends on.
func (b *formBrowser) open(target string) webPage {
	b.t.Helper()
	page := b.get(target)
	for range 5 {
		loc := page.Location()
		if page.Status != http.StatusSeeOther && page.Status != http.StatusFound {
			return page
		}
		if strings.HasPrefix(loc, "/auth/login") {
			u, err := url.Parse(loc)
			if err != nil {
				b.t.Fatal(err)
			}
			page = b.signIn(u.Query().Get("next"))
			continue
		}
		page = b.get(loc)
	}
	b.t.Fatalf("too many redirects opening %s", target)
	return page
}

// continueToForm posts Continue on the consent page of elicitation id and opens the form.
func (b *formBrowser) continueToForm(id string) webPage {
	b.t.Helper()
	consent := b.get("/e/" + id)
	if consent.Status != http.StatusOK {
		b.t.Fatalf("consent page answered %d: %s", consent.Status, consent.Text())
	}
	page := b.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(b.t)}})
	if page.Status != http.StatusSeeOther || page.Location() != "/e/"+id+"/secret" {
		b.t.Fatalf("continue answered %d to %q: %s", page.Status, page.Location(), page.Text())
	}
	form := b.get(page.Location())
	if form.Status != http.StatusOK {
		b.t.Fatalf("secret form answered %d: %s", form.Status, form.Text())
	}
	return form
}

// completeSecret opens the elicitation URL, signs in, continues and saves value, and fails
// the test unless the page says it is stored. It returns the form page that was posted
// (whose CSRF token a test may replay) and the answer.
func (b *formBrowser) completeSecret(elicitationURL, value string) (form, done webPage) {
	b.t.Helper()
	id := elicitationURL[strings.LastIndex(elicitationURL, "/")+1:]
	if page := b.open(elicitationURL); page.Status != http.StatusOK {
		b.t.Fatalf("opening %s answered %d: %s", elicitationURL, page.Status, page.Text())
	}
	form = b.continueToForm(id)
	done = b.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b.t)}, "secret": {value}})
	if done.Status != http.StatusOK || !strings.Contains(strings.ToLower(done.Text()), "stored") {
		b.t.Fatalf("saving the secret answered %d: %s", done.Status, done.Text())
	}
	return form, done
}
