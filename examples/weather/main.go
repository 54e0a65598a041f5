// Command weather is a small delegating MCP server: its tool needs the user's key of the
// development demo API, and it hands the asking, the storing and the calling to urlflow
// with package delegate. Run it next to urlflow dev:
//
//	go run ./cmd/urlflow dev
//	go run ./examples/weather
//
// It serves MCP on http://127.0.0.1:8090/mcp, the resource of urlflow dev's demo service,
// and prints a token of a development user for it. It takes urlflow's URL from
// URLFLOW_URL (http://127.0.0.1:8080) and the demo service's key from URLFLOW_SERVICE_KEY,
// or, next to urlflow dev, from its /dev/service-key.
//
// It checks no token itself: every token it receives goes to urlflow as the evidence of
// who its user is, and urlflow checks it for this server's resource. A server that serves
// anything else must check its tokens itself.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "where to listen")
	style := flag.String("style", "push", "how a 2025-11-25 client is asked: push or error")
	slot := flag.String("slot", "demo_api_key", "the secret slot of urlflow whose API answers GET /whoami")
	var opts delegate.Options
	flag.DurationVar(&opts.RetryWait, "retry-wait", 0, "delegate.Options.RetryWait (tests shorten it)")
	flag.DurationVar(&opts.ProgressInterval, "progress-interval", 0, "delegate.Options.ProgressInterval (tests shorten it)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *style == "error" {
		opts.Style = delegate.StyleError
	}
	if err := run(ctx, *addr, opts, *slot); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
	// Ctrl-C or SIGTERM: a stop asked for, which exits 0.
}

func run(ctx context.Context, addr string, opts delegate.Options, slot string) error {
	urlflowURL := os.Getenv("URLFLOW_URL")
	if urlflowURL == "" {
		urlflowURL = "http://127.0.0.1:8080"
	}
	key := os.Getenv("URLFLOW_SERVICE_KEY")
	if key == "" {
		var err error
		if key, err = devServiceKey(ctx, urlflowURL); err != nil {
			return fmt.Errorf("cannot reach urlflow dev at %s (%w): start it first with go run ./cmd/urlflow dev, "+
				"or set URLFLOW_URL and URLFLOW_SERVICE_KEY for another urlflow", urlflowURL, err)
		}
	}
	opts.URL, opts.Key = urlflowURL, key
	uf, err := delegate.New(opts)
	if err != nil {
		return err
	}
	go uf.Follow(ctx) // tells each session when its user has finished

	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "forecast", Description: "Tells the weather of a city, with the user's demo API key."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			City string `json:"city" jsonschema:"the city"`
		}) (*mcp.CallToolResult, any, error) {
			cred, res, err := uf.Require(ctx, req, delegate.Need{Slot: slot, Message: "Weather needs your API key to ask for forecasts."})
			if err != nil || res != nil {
				return res, nil, err
			}
			resp, err := cred.Call(ctx, delegate.Request{Method: "GET", Path: "/whoami"})
			if err != nil {
				return nil, nil, err
			}
			text := fmt.Sprintf("Sunny in %s, says the demo API (HTTP %d): %s", in.City, resp.Status, resp.Body)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
				StructuredContent: map[string]any{"city": in.City, "forecast": "sunny", "apiStatus": resp.Status}}, nil, nil
		})

	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	handler := bothEras(server)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "send a bearer token of your user (urlflow dev: /dev/token?user=alice&resource=...)", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})}
	go func() { <-ctx.Done(); srv.Close() }()
	resource := "http://" + listener.Addr().String() + "/mcp"
	fmt.Printf("weather: MCP on %s (delegating to urlflow at %s)\n", resource, urlflowURL)
	if token, err := devToken(ctx, urlflowURL, resource); err == nil {
		fmt.Printf("weather: a token of the development user alice for it:\n  %s\n", token)
		fmt.Printf("weather: Claude Code: claude mcp add --scope user --transport http weather %s --header \"Authorization: Bearer %s\"\n", resource, token)
	}
	return srv.Serve(listener)
}

// bothEras serves protocol 2026-07-28 statelessly and earlier versions with sessions: a
// request whose MCP-Protocol-Version is 2026-07-28 or later, or a server/discover without
// one, goes to the stateless handler.
func bothEras(server *mcp.Server) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return server }
	sessions := mcp.NewStreamableHTTPHandler(getServer, nil)
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modern := r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
		if r.Header.Get("Mcp-Protocol-Version") == "" && r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			modern = json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover"
		}
		if modern {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// devWait is how long weather waits for urlflow dev to answer, when started first.
const devWait = 10 * time.Second

// devServiceKey asks urlflow dev for its demo service's key, waiting up to 30 seconds for
// it to start.
func devServiceKey(ctx context.Context, urlflowURL string) (string, error) {
	var answer struct {
		Key string `json:"key"`
	}
	deadline := time.Now().Add(devWait)
	for said := false; ; said = true {
		err := getJSON(ctx, urlflowURL+"/dev/service-key?service=demo", &answer)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return answer.Key, err
		}
		if !said {
			fmt.Fprintf(os.Stderr, "weather: waiting %s for urlflow dev at %s (start it with go run ./cmd/urlflow dev)\n", devWait, urlflowURL)
		}
		time.Sleep(time.Second)
	}
}

// devToken asks urlflow dev for a token of the development user alice for resource.
func devToken(ctx context.Context, urlflowURL, resource string) (string, error) {
	var answer struct {
		Token string `json:"token"`
	}
	return answer.Token, getJSON(ctx, urlflowURL+"/dev/token?user=alice&resource="+url.QueryEscape(resource), &answer)
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
