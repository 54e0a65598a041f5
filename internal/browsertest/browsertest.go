// Package browsertest drives Debian's headless Chromium from tests, through chromedp, so
// that urlflow's pages are checked in a real browser: forms are filled and submitted,
// text is read back, full-page screenshots are saved for people to look at, and console
// messages (CSP violations among them) are collected for assertions.
//
// The one idea to hold: a test starts one Browser, and every simulated person in it is a
// User with a browser context of its own, so cookies and sessions never mix.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// DefaultChromium is where Debian's chromium package installs the browser.
const DefaultChromium = "/usr/bin/chromium"

// Timeout bounds each helper's work in the browser, so that a selector that never matches
// fails the test instead of hanging it.
const Timeout = 20 * time.Second

// Viewports of the screenshots.
const (
	DesktopWidth = 1280
	PhoneWidth   = 390
)

// Browser is one headless Chromium process. A test starts its own with Start; a package
// whose tests share one starts it with Launch (for example in TestMain). Users in one
// Browser never share cookies or storage, so parallel tests can share it.
type Browser struct {
	ctx   context.Context
	close func()
}

// ExecPath returns the Chromium binary to run: $URLFLOW_CHROMIUM when set, else
// /usr/bin/chromium. It returns an error that says how to install it when it is missing.
func ExecPath() (string, error) {
	path := DefaultChromium
	if env := os.Getenv("URLFLOW_CHROMIUM"); env != "" {
		path = env
	}
	found, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("chromium not found at %s (set URLFLOW_CHROMIUM, or install it: apt-get install -y chromium): %w", path, err)
	}
	return found, nil
}

// Flags returns the command-line flags Chromium starts with, given its profile directory.
// chromedp adds only what it needs to talk to the browser (--remote-debugging-pipe and
// the first page, about:blank).
func Flags(userDataDir string) []string {
	return []string{
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--user-data-dir=" + userDataDir,
	}
}

// Start starts headless Chromium with a fresh, empty profile and stops it when the test
// ends. It fails the test if Chromium is not installed (the project's test command
// installs it).
func Start(t testing.TB) *Browser {
	t.Helper()
	b, err := Launch()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// launchTimeout bounds the start of Chromium.
const launchTimeout = 60 * time.Second

// Launch starts headless Chromium with a fresh, empty profile in a new temporary directory.
// The caller stops it with Close.
func Launch() (*Browser, error) {
	path, err := ExecPath()
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "urlflow-chromium-")
	if err != nil {
		return nil, fmt.Errorf("create a Chromium profile: %w", err)
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path)}
	for _, f := range Flags(profile) {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if hasValue {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, close: func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
		os.RemoveAll(profile)
	}}
	// Start the browser with a context that lives as long as the Browser, then wait for it
	// with a deadline: Do binds the browser's life to the context of the first call.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	timeout := time.NewTimer(launchTimeout)
	defer timeout.Stop()
	select {
	case err = <-started:
	case <-timeout.C:
		err = fmt.Errorf("no answer within %s", launchTimeout)
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	return b, nil
}

// Close stops the browser and removes its profile.
func (b *Browser) Close() { b.close() }

// User is one simulated person: a browser context of its own (its own cookies and
// storage) with one tab, and the console messages that tab has logged.
type User struct {
	// Name is the label used in failure messages.
	Name string
	ctx  context.Context

	mu       sync.Mutex
	messages []Message
}

// NewUser opens a new, isolated browser context with one tab, sized like a desktop
// browser. It is closed when the test ends.
func (b *Browser) NewUser(t testing.TB, name string) *User {
	t.Helper()
	u := &User{Name: name}
	ctx, cancel := chromedp.NewContext(b.ctx,
		chromedp.WithNewBrowserContext(),
		chromedp.WithListener(u.record),
	)
	t.Cleanup(cancel)
	u.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browsertest: open a browser context for %s: %v", name, err)
	}
	u.do(t, "set the desktop viewport", chromedp.EmulateViewport(DesktopWidth, 800))
	return u
}

// Context returns the user's chromedp context, for actions the helpers do not cover.
func (u *User) Context() context.Context { return u.ctx }

// do runs actions in the user's tab within Timeout and fails the test on error.
func (u *User) do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browsertest: %s: %s: %v", u.Name, what, err)
	}
}

// run runs one action that returns a value in the user's tab within Timeout.
func run[T any](t testing.TB, u *User, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("browsertest: %s: %s: %v", u.Name, what, err)
	}
	return v
}

// Navigate opens url and waits until the page has loaded. It returns the HTTP status of
// the document.
func (u *User) Navigate(t testing.TB, url string) int {
	t.Helper()
	resp := run(t, u, "open "+url, chromedp.NavigateResponse(url))
	u.settle(t)
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// Fill types value into the field that the CSS selector matches, replacing its content:
// it focuses the field, empties it, and sends the keys to the focused element, as a person
// typing would.
//
// It does not use chromedp's SendKeys or Clear: SendKeys reads the node's attributes
// without holding the node's lock while chromedp's event loop may be writing them (a
// data race the race detector reports, chromedp v0.23.0 query.go), and Clear resets only
// the value attribute, not what was typed.
func (u *User) Fill(t testing.TB, selector, value string) {
	t.Helper()
	u.do(t, "focus "+selector, chromedp.Focus(chromedp.CSS(selector), chromedp.NodeVisible))
	quoted, _ := json.Marshal(selector) // a string always encodes
	if !Evaluate[bool](t, u, `(f => { f.value = ""; return f === document.activeElement })(document.querySelector(`+string(quoted)+`))`) {
		t.Fatalf("browsertest: %s: fill %s: the field lost the focus", u.Name, selector)
	}
	u.do(t, "type into "+selector, chromedp.KeyEvent(value))
}

// Click clicks the element that the CSS selector matches and does not wait for anything
// to follow. To submit a form and wait for the next page, use Submit.
func (u *User) Click(t testing.TB, selector string) {
	t.Helper()
	u.do(t, "click "+selector, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// Submit clicks the button that the CSS selector matches, waits until the page that the
// click loads (a form post, a redirect) has loaded, and returns its HTTP status.
func (u *User) Submit(t testing.TB, selector string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, Timeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("browsertest: %s: submit with %s: %v", u.Name, selector, err)
	}
	u.settle(t)
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// Stop is where the keyboard's focus is: the element, and whether a person sees it.
type Stop struct {
	// Element is its tag, and what names it (its text, label, or name), as in
	// "button Continue" or "input secret".
	Element string
	// Indicated: the element draws a focus indicator (an outline or a box shadow).
	Indicated bool
	// OnScreen: the element lies within the viewport.
	OnScreen bool
}

// focusedScript describes document.activeElement as a Stop.
const focusedScript = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body) return {Element: "body", Indicated: false, OnScreen: true};
	const name = (e.getAttribute("aria-label") || e.innerText || (e.labels && e.labels[0] && e.labels[0].innerText) || e.name || e.id || "").trim().replace(/\s+/g, " ");
	const st = getComputedStyle(e), r = e.getBoundingClientRect();
	return {
		Element: e.tagName.toLowerCase() + (name ? " " + name.slice(0, 60) : ""),
		Indicated: (st.outlineStyle !== "none" && parseFloat(st.outlineWidth) > 0) || st.boxShadow !== "none",
		OnScreen: r.bottom > 0 && r.right > 0 && r.top < innerHeight && r.left < innerWidth,
	};
})()`

// Focused returns where the keyboard's focus is now.
func (u *User) Focused(t testing.TB) Stop {
	t.Helper()
	return Evaluate[Stop](t, u, focusedScript)
}

// Tab presses the Tab key (Shift+Tab when back) once and returns where the focus went.
func (u *User) Tab(t testing.TB, back bool) Stop {
	t.Helper()
	var mods []chromedp.KeyOption
	if back {
		mods = append(mods, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	u.do(t, "press Tab", chromedp.KeyEvent(kb.Tab, mods...))
	return u.Focused(t)
}

// TabTo presses Tab until the focus is on the element that the CSS selector matches, at
// most max times, and returns every stop on the way, the last one that element's. It fails
// the test if the element is not reached.
func (u *User) TabTo(t testing.TB, selector string, max int) []Stop {
	t.Helper()
	quoted, _ := json.Marshal(selector) // a string always encodes
	var stops []Stop
	for range max {
		stops = append(stops, u.Tab(t, false))
		if Evaluate[bool](t, u, `document.activeElement === document.querySelector(`+string(quoted)+`)`) {
			return stops
		}
	}
	t.Fatalf("browsertest: %s: %s not reached in %d presses of Tab; the stops: %+v", u.Name, selector, max, stops)
	return nil
}

// Type sends text as key presses to the focused element.
func (u *User) Type(t testing.TB, text string) {
	t.Helper()
	u.do(t, "type", chromedp.KeyEvent(text))
}

// PressEnter presses Enter on the focused element, waits until the page it loads (a link
// followed, a form posted) has loaded, and returns its HTTP status.
func (u *User) PressEnter(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, Timeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.KeyEvent(kb.Enter))
	if err != nil {
		t.Fatalf("browsertest: %s: press Enter: %v", u.Name, err)
	}
	u.settle(t)
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// Text returns the rendered text of the first element that the CSS selector matches, as
// a person sees it (innerText).
func (u *User) Text(t testing.TB, selector string) string {
	t.Helper()
	return run(t, u, "read the text of "+selector, chromedp.Text(chromedp.CSS(selector), chromedp.NodeReady))
}

// Value returns the current value of the form field that the CSS selector matches.
func (u *User) Value(t testing.TB, selector string) string {
	t.Helper()
	return run(t, u, "read the value of "+selector, chromedp.Value(chromedp.CSS(selector), chromedp.NodeReady))
}

// HTML returns the current document as HTML.
func (u *User) HTML(t testing.TB) string {
	t.Helper()
	return run(t, u, "read the document", chromedp.OuterHTML(chromedp.CSS("html"), chromedp.NodeReady))
}

// Location returns the URL of the current page.
func (u *User) Location(t testing.TB) string {
	t.Helper()
	return run(t, u, "read the location", chromedp.Location())
}

// Evaluate runs a JavaScript expression in the page through the DevTools protocol and
// decodes its result into T. The page's CSP does not apply to it.
func Evaluate[T any](t testing.TB, u *User, expression string) T {
	t.Helper()
	return run(t, u, "evaluate "+expression, chromedp.Evaluate[T](expression))
}

// Await is Evaluate for an expression whose value is a promise: it waits for the promise
// and decodes what it resolves to.
func Await[T any](t testing.TB, u *User, expression string) T {
	t.Helper()
	what := expression
	if len(what) > 80 {
		what = what[:80] + "…"
	}
	return run(t, u, "await "+what, chromedp.Evaluate[T](expression, chromedp.EvalAwaitPromise))
}

// SetColorScheme makes the pages see prefers-color-scheme as scheme ("light" or "dark");
// an empty scheme returns to the browser's default.
func (u *User) SetColorScheme(t testing.TB, scheme string) {
	t.Helper()
	params := emulation.SetEmulatedMediaParams{}
	if scheme != "" {
		params.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	u.do(t, "set the colour scheme "+scheme, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, emulation.SetEmulatedMedia, params)
		return err
	}))
}

// ArtifactsDir returns the directory for screenshots, creating it: $URLFLOW_ARTIFACTS when
// set, else artifacts/screenshots at the root of the repository.
func ArtifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("URLFLOW_ARTIFACTS")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("browsertest: %v", err)
		}
		dir = filepath.Join(root, "artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("browsertest: create the artifacts directory: %v", err)
	}
	return dir
}

// repoRoot is the nearest directory at or above the working directory that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// AsPhone sizes the tab as a phone, PhoneWidth CSS pixels wide with mobile emulation, until
// the test ends or AsDesktop.
func (u *User) AsPhone(t testing.TB) {
	t.Helper()
	u.do(t, "set the phone viewport", chromedp.EmulateViewport(PhoneWidth, 844,
		chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait, chromedp.EmulateScale(2)))
}

// AsNarrowDesktop sizes the tab as a desktop window width CSS pixels wide, as a 1280 px
// window at 400 % zoom is 320 (WCAG 1.4.10, reflow).
func (u *User) AsNarrowDesktop(t testing.TB, width int64) {
	t.Helper()
	u.do(t, "set a narrow viewport", chromedp.EmulateViewport(width, 800))
}

// AsDesktop sizes the tab as a desktop, DesktopWidth CSS pixels wide.
func (u *User) AsDesktop(t testing.TB) {
	t.Helper()
	u.do(t, "set the desktop viewport", chromedp.EmulateViewport(DesktopWidth, 800))
}

// Screenshot saves full-page PNGs of the current page into ArtifactsDir: name-desktop.png
// at 1280 CSS pixels wide, and name-phone.png at 390 CSS pixels wide with mobile emulation
// (at twice the pixel density, as phones have). It leaves the tab at the desktop size.
func (u *User) Screenshot(t testing.TB, name string) {
	t.Helper()
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		t.Fatalf("browsertest: screenshot name %q must be a plain file name", name)
	}
	dir := ArtifactsDir(t)
	shots := []struct {
		suffix    string
		width     int64
		minHeight int64
		opts      []chromedp.EmulateViewportOption
	}{
		{"desktop", DesktopWidth, 800, nil},
		{"phone", PhoneWidth, 844, []chromedp.EmulateViewportOption{
			chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait, chromedp.EmulateScale(2),
		}},
	}
	defer u.do(t, "restore the desktop viewport", chromedp.EmulateViewport(DesktopWidth, 800))
	for _, s := range shots {
		u.do(t, "set the "+s.suffix+" viewport", chromedp.EmulateViewport(s.width, s.minHeight, s.opts...))
		height := Evaluate[int64](t, u, `Math.ceil(Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0))`)
		height = max(height, s.minHeight)
		u.do(t, "fit the "+s.suffix+" viewport to the page", chromedp.EmulateViewport(s.width, height, s.opts...))
		png := run(t, u, "take the "+s.suffix+" screenshot", chromedp.CaptureScreenshot())
		file := filepath.Join(dir, name+"-"+s.suffix+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatalf("browsertest: save %s: %v", file, err)
		}
		t.Logf("screenshot %s", file)
	}
}

// SavePicture saves the whole page, width CSS pixels wide, as a JPEG to path: a picture
// for the docs, small enough to keep in the repository.
func (u *User) SavePicture(t testing.TB, path string, width int64) {
	t.Helper()
	defer u.do(t, "restore the desktop viewport", chromedp.EmulateViewport(DesktopWidth, 800))
	u.do(t, "set the picture's width", chromedp.EmulateViewport(width, 600))
	height := Evaluate[int64](t, u, `Math.ceil(document.documentElement.scrollHeight)`)
	u.do(t, "fit the viewport to the page", chromedp.EmulateViewport(width, height))
	jpeg := run(t, u, "take the picture", chromedp.FullScreenshot(75))
	if err := os.WriteFile(path, jpeg, 0o644); err != nil {
		t.Fatalf("browsertest: save %s: %v", path, err)
	}
}
