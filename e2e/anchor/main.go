// Command anchor is the protocol's own cost of a push-style secret flow: a server that
// answers exactly the requests and MCP messages urlflow answers in one, and does nothing
// else. It keeps its state in maps; it does no cryptography, no rendering, no Redis (unless
// asked to, below) and no logging. The e2e package's BenchmarkLoad runs the same flows against it beside urlflow,
// so that urlflow's figures read as ratios to what the exchanges themselves cost on the
// machine at hand (docs/performance.md).
//
// What it serves, as `urlflow dev` serves it:
//
//   - GET /dev/token?user=NAME: a bearer token for NAME (here, the name behind a prefix).
//   - GET and POST /auth/login: the development sign-in, a form with csrf and next, whose
//     post sets the session cookie and sends the browser to next (303).
//   - /mcp: the go-sdk's streamable HTTP handler (2025-11-25 sessions) behind a bearer
//     check, with set_secret. The call sends elicitation/create (URL mode) and waits until
//     the page has stored the key; then it writes notifications/elicitation/complete on the
//     call's stream and answers `stored`.
//   - GET /e/ID (the consent page), POST /e/ID/continue (303 to the form), GET /e/ID/secret
//     (the form) and POST /e/ID/secret, which checks the key with the demo API (GET
//     /demo/api/whoami with the key as bearer, over HTTP to itself, as urlflow's slot
//     verification does) and answers that it is stored. Each page checks the session
//     cookie, that the flow is the session's user's, and the form's csrf; each is as long
//     as urlflow's page (consentBytes, formBytes, doneBytes).
//   - /demo/api/: urlflow's demo API (package demoapi).
//
// With -redis, it is the cost of the exchanges and of keeping the flow durably as well: it
// writes each step of a flow (asked, opened, continued, the key stored, completed) to that
// Redis with one SET of the flow's record, and the key with one more, before it answers
// the step's request. It still reads only its maps, and does no cryptography.
//
// Usage:
//
//	anchor [-addr 127.0.0.1:0] [-idle-conns-per-host 2] [-redis HOST:PORT]
//
// Once it listens, it prints "MCP URL: http://ADDR/mcp" on stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/demoapi"
)

// The lengths of urlflow's pages in a flow (`urlflow dev`, English, measured 2026-12-04),
// which the anchor's pages pad to so that both send as many bytes.
const (
	consentBytes = 5777
	formBytes    = 5403
	doneBytes    = 3034
)

const tokenPrefix = "anchor-token-"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	// The benchmark passes urlflow's upstream.IdleConnsPerHost: importing that package here
	// would bring urlflow's dependencies (gRPC, OpenTelemetry, Redis, protobuf) into the
	// anchor, whose initialised globals its collector would then scan at every cycle.
	idle := flag.Int("idle-conns-per-host", 2, "the idle connections to the demo API to keep")
	redisAddr := flag.String("redis", "", "keep each step of a flow in this Redis (HOST:PORT)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("anchor: %v", err)
	}
	a := &anchor{base: "http://" + ln.Addr().String(), sessions: map[string]*browserSession{}, flows: map[string]*secretFlow{}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = *idle
	a.verifier.Transport = tr
	if *redisAddr != "" {
		a.rdb = redis.NewClient(&redis.Options{Addr: *redisAddr})
	}
	fmt.Printf("MCP URL: %s/mcp\n", a.base)
	log.Fatalf("anchor: %v", http.Serve(ln, a.routes()))
}

// anchor is the server's state: browser sessions and flows, in memory.
type anchor struct {
	base string
	// verifier checks keys with the demo API, over HTTP.
	verifier http.Client

	// rdb, when not nil, keeps each step of a flow (keep).
	rdb *redis.Client

	mu       sync.Mutex
	next     int // numbers sessions, CSRF tokens and flows
	sessions map[string]*browserSession
	flows    map[string]*secretFlow
}

// browserSession is a signed-in browser: its user and the token of its forms.
type browserSession struct{ user, csrf string }

// secretFlow is one request for a key: whose it is, and stored once the page stored it.
type secretFlow struct {
	user   string
	stored chan struct{}
}

func (a *anchor) routes() http.Handler {
	srv := sdk.NewServer(&sdk.Implementation{Name: "anchor", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "set_secret", Description: "Ask the user for a secret."}, a.setSecret)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := strings.CutPrefix(token, tokenPrefix)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mcp := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)

	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(verify, nil)(mcp))
	mux.HandleFunc("GET /dev/token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"token\":%q}\n", tokenPrefix+r.URL.Query().Get("user"))
	})
	mux.HandleFunc("GET /auth/login", a.signInPage)
	mux.HandleFunc("POST /auth/login", a.signIn)
	mux.HandleFunc("GET /e/{id}", a.page(consentBytes, "Continue", "opened"))
	mux.HandleFunc("POST /e/{id}/continue", a.continueToForm)
	mux.HandleFunc("GET /e/{id}/secret", a.page(formBytes, "Store", ""))
	mux.HandleFunc("POST /e/{id}/secret", a.store)
	mux.Handle(demoapi.Prefix+"/", demoapi.Handler())
	return mux
}

type setSecretArgs struct {
	Name    string `json:"name"`
	Replace bool   `json:"replace,omitempty"`
}

// setSecret asks for the key with elicitation/create and answers once the page stored it.
func (a *anchor) setSecret(ctx context.Context, req *sdk.CallToolRequest, args setSecretArgs) (*sdk.CallToolResult, any, error) {
	f := &secretFlow{user: req.Extra.TokenInfo.UserID, stored: make(chan struct{})}
	a.mu.Lock()
	a.next++
	id := fmt.Sprintf("%064d", a.next) // as long as urlflow's IDs
	a.flows[id] = f
	a.mu.Unlock()
	if err := a.keep(ctx, id, f, "asked"); err != nil {
		return nil, nil, err
	}
	answered := make(chan error, 1)
	go func() {
		_, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "url", URL: a.base + "/e/" + id, ElicitationID: id,
			Message: "urlflow needs your Demo API key. Open the link to enter it in your browser; it is never shared with this conversation."})
		answered <- err
	}()
	select {
	case <-f.stored:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if err := <-answered; err != nil {
		return nil, nil, err
	}
	if err := req.Session.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: id}); err != nil {
		return nil, nil, err
	}
	if err := a.keep(ctx, id, f, "completed"); err != nil {
		return nil, nil, err
	}
	text := "Your Demo API key is stored. urlflow keeps it encrypted and uses it for you; its value is never shown in this conversation."
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}},
		map[string]any{"status": "stored", "name": args.Name, "elicitationId": id, "state": "complete", "message": text}, nil
}

func (a *anchor) signInPage(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, `<form method="post"><input name="name"><input type="hidden" name="next" value="%s">`+
		`<input type="hidden" name="csrf" value="sign-in"></form>`, r.URL.Query().Get("next"))
}

func (a *anchor) signIn(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("csrf") != "sign-in" {
		http.Error(w, "bad csrf", http.StatusForbidden)
		return
	}
	a.mu.Lock()
	a.next++
	id, csrf := "session-"+strconv.Itoa(a.next), "csrf-"+strconv.Itoa(a.next)
	a.sessions[id] = &browserSession{user: r.FormValue("name"), csrf: csrf}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "urlflow_session", Value: id, Path: "/", MaxAge: 43200, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, r.FormValue("next"), http.StatusSeeOther)
}

var errRefused = errors.New("refused")

// visit returns the session of r and the flow of its page, when both are there and the
// flow is the session's user's; a post must carry the session's csrf.
func (a *anchor) visit(r *http.Request) (*browserSession, *secretFlow, error) {
	cookie, err := r.Cookie("urlflow_session")
	if err != nil {
		return nil, nil, errRefused
	}
	a.mu.Lock()
	s, f := a.sessions[cookie.Value], a.flows[r.PathValue("id")]
	a.mu.Unlock()
	if s == nil || f == nil || f.user != s.user || (r.Method == http.MethodPost && r.FormValue("csrf") != s.csrf) {
		return nil, nil, errRefused
	}
	return s, f, nil
}

// page answers a page of size bytes with a form whose button says button, once it has
// kept the flow's step (none if "").
func (a *anchor) page(size int, button, step string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, f, err := a.visit(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if step != "" {
			if err := a.keep(r.Context(), r.PathValue("id"), f, step); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		writePage(w, size, `<form method="post"><input type="hidden" name="csrf" value="`+s.csrf+`"><button>`+button+`</button></form>`)
	}
}

func (a *anchor) continueToForm(w http.ResponseWriter, r *http.Request) {
	_, f, err := a.visit(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if err := a.keep(r.Context(), r.PathValue("id"), f, "continued"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, "/e/"+r.PathValue("id")+"/secret", http.StatusSeeOther)
}

// store checks the posted key with the demo API and, when it answers 200, marks the flow
// stored (once) and says so.
func (a *anchor) store(w http.ResponseWriter, r *http.Request) {
	_, f, err := a.visit(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	check, err := http.NewRequestWithContext(r.Context(), http.MethodGet, a.base+demoapi.Prefix+"/whoami", nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	check.Header.Set("Authorization", "Bearer "+r.FormValue("secret"))
	resp, err := a.verifier.Do(check)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		http.Error(w, "the demo API refused the key", http.StatusUnprocessableEntity)
		return
	}
	if a.rdb != nil {
		if err := a.rdb.Set(r.Context(), "anchor:key:"+f.user, r.FormValue("secret"), keptFor).Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if err := a.keep(r.Context(), r.PathValue("id"), f, "stored"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.mu.Lock()
	select {
	case <-f.stored:
	default:
		close(f.stored)
	}
	a.mu.Unlock()
	writePage(w, doneBytes, `<h1>Your Demo API key is stored.</h1>`)
}

// keptFor is how long Redis keeps what keep and store write.
const keptFor = time.Hour

// keep writes the record of flow id, at step, to Redis when the anchor keeps its flows
// there (-redis): one SET, as a server that keeps each step durably makes at least.
func (a *anchor) keep(ctx context.Context, id string, f *secretFlow, step string) error {
	if a.rdb == nil {
		return nil
	}
	record := `{"id":"` + id + `","user":"` + f.user + `","step":"` + step + `","at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
	if err := a.rdb.Set(ctx, "anchor:flow:"+id, record, keptFor).Err(); err != nil {
		return fmt.Errorf("keep flow %s at %s: %w", id, step, err)
	}
	return nil
}

// writePage writes an HTML page of size bytes around body.
func writePage(w http.ResponseWriter, size int, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page := "<!doctype html><html lang=\"en\"><body>" + body
	const end = "</body></html>"
	if pad := size - len(page) - len(end) - len("<!---->"); pad > 0 {
		page += "<!--" + strings.Repeat(" ", pad) + "-->"
	}
	w.Write([]byte(page + end))
}
