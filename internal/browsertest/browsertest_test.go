package browsertest_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
)

const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// site is a tiny server with a cookie, a form and a page that breaks its own CSP.
func site(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>t</title></head><body>%s</body></html>`, body)
	}
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "who", Value: r.URL.Query().Get("name"), Path: "/"})
		page(w, `<p id="ok">signed in</p>`)
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		who := "nobody"
		if c, err := r.Cookie("who"); err == nil {
			who = c.Value
		}
		page(w, `<p id="who">`+html.EscapeString(who)+`</p>`)
	})
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<form method="post" action="/echo"><label for="n">Name</label><input id="n" name="n"><button id="go">Go</button></form>`)
	})
	mux.HandleFunc("GET /restless-form", func(w http.ResponseWriter, r *http.Request) {
		// A script (this page has no policy that forbids it) adds and removes an attribute
		// of the field all the time, so that the browser keeps sending attribute events
		// while a test types into it.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>t</title></head><body>`+
			`<form method="post" action="/echo"><label for="n">Name</label><input id="n" name="n"><button id="go">Go</button></form>`+
			`<script>let i = 0; setInterval(() => { const f = document.getElementById("n"); `+
			`if (i++ % 2) { f.removeAttribute("data-tick"); } else { f.setAttribute("data-tick", String(i)); } }, 1);</script>`+
			`</body></html>`)
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<h1 id="echo">Hello, `+html.EscapeString(r.FormValue("n"))+`</h1>`)
	})
	mux.HandleFunc("GET /inline-style", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p style="color: red">styled inline</p>`)
	})
	mux.HandleFunc("GET /console-error", func(w http.ResponseWriter, r *http.Request) {
		// No script may run under the CSP, so the error is a failed load instead.
		page(w, `<img src="/missing.png" alt="missing">`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFlagsAreExactlyTheProjectsFlags(t *testing.T) {
	want := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=/x"}
	if got := browsertest.Flags("/x"); !slices.Equal(got, want) {
		t.Errorf("Flags = %q, want %q", got, want)
	}
}

func TestExecPathFollowsURLFLOW_CHROMIUM(t *testing.T) {
	t.Setenv("URLFLOW_CHROMIUM", filepath.Join(t.TempDir(), "no-such-chromium"))
	_, err := browsertest.ExecPath()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y chromium") {
		t.Errorf("ExecPath with a missing binary = %v, want an error that says how to install chromium", err)
	}
}

func TestUsersDoNotShareCookies(t *testing.T) {
	srv := site(t)
	b := browsertest.Start(t)
	alice, bob := b.NewUser(t, "alice"), b.NewUser(t, "bob")
	alice.Navigate(t, srv.URL+"/login?name=alice")
	alice.Navigate(t, srv.URL+"/whoami")
	bob.Navigate(t, srv.URL+"/whoami")
	if got := alice.Text(t, "#who"); got != "alice" {
		t.Errorf("alice is %q, want alice", got)
	}
	if got := bob.Text(t, "#who"); got != "nobody" {
		t.Errorf("bob is %q, want nobody: the cookie leaked between users", got)
	}
}

func TestFillAndSubmitAForm(t *testing.T) {
	srv := site(t)
	u := browsertest.Start(t).NewUser(t, "ada")
	u.Navigate(t, srv.URL+"/form")
	u.Fill(t, "#n", "Ada")
	if got := u.Value(t, "#n"); got != "Ada" {
		t.Fatalf("field value %q after Fill, want Ada", got)
	}
	if status := u.Submit(t, "#go"); status != http.StatusOK {
		t.Errorf("submit status %d, want 200", status)
	}
	if got := u.Text(t, "#echo"); got != "Hello, Ada" {
		t.Errorf("echo %q, want %q", got, "Hello, Ada")
	}
	if !strings.HasSuffix(u.Location(t), "/echo") {
		t.Errorf("location %q, want the /echo page", u.Location(t))
	}
	u.AssertNoCSPViolations(t)
	u.AssertNoConsoleErrors(t)
}

// TestFillIsSafeWhileThePageChangesTheField types into a field whose attributes the page
// changes every millisecond. Run under the race detector, it caught Fill reading the
// node's attributes while chromedp's event loop wrote them.
func TestFillIsSafeWhileThePageChangesTheField(t *testing.T) {
	srv := site(t)
	u := browsertest.Start(t).NewUser(t, "restless")
	u.Navigate(t, srv.URL+"/restless-form")
	for i := range 20 {
		want := fmt.Sprintf("value %d", i)
		u.Fill(t, "#n", want)
		if got := u.Value(t, "#n"); got != want {
			t.Fatalf("field value %q after Fill, want %q (Fill must replace what was typed before)", got, want)
		}
	}
}

func TestCSPViolationsAreCollected(t *testing.T) {
	srv := site(t)
	u := browsertest.Start(t).NewUser(t, "csp")
	u.Navigate(t, srv.URL+"/inline-style")
	if v := u.CSPViolations(t); len(v) == 0 {
		t.Fatalf("no CSP violation recorded for an inline style; console: %v", u.Console(t))
	}
	t.Logf("recorded: %v", u.CSPViolations(t))
	u.ClearConsole(t)
	u.Navigate(t, srv.URL+"/whoami")
	if v := u.CSPViolations(t); len(v) != 0 {
		t.Errorf("CSP violations on a clean page: %v", v)
	}
}

func TestFailedLoadsAreConsoleErrors(t *testing.T) {
	srv := site(t)
	u := browsertest.Start(t).NewUser(t, "errors")
	u.Navigate(t, srv.URL+"/console-error")
	var errs []browsertest.Message
	for _, m := range u.Console(t) {
		if m.IsError() {
			errs = append(errs, m)
		}
	}
	if len(errs) == 0 {
		t.Errorf("no console error for a missing image; console: %v", u.Console(t))
	}
}

func TestScreenshotSavesDesktopAndPhonePNGs(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("URLFLOW_ARTIFACTS", dir)
	srv := site(t)
	u := browsertest.Start(t).NewUser(t, "shots")
	u.Navigate(t, srv.URL+"/form")
	u.Screenshot(t, "form")
	for _, name := range []string{"form-desktop.png", "form-phone.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("%s is not a PNG", name)
		}
	}
	if w := browsertest.Evaluate[int](t, u, `window.innerWidth`); w != browsertest.DesktopWidth {
		t.Errorf("viewport width %d after Screenshot, want it back at %d", w, browsertest.DesktopWidth)
	}
}
