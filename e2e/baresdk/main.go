// Command baresdk is a bare go-sdk MCP server: the SDK's streamable HTTP handler with its
// defaults (2025-11-25 sessions) serving the tools whose definitions it reads, and nothing
// else: no authentication, no storage, no logging. The e2e package's BenchmarkOverhead
// feeds it urlflow's own tool definitions, as urlflow lists them, and compares urlflow's
// memory per idle session and CPU per ping and tools/list with this server's.
//
// Usage:
//
//	baresdk -tools tools.json [-addr 127.0.0.1:0] [-debug-addr 127.0.0.1:6062]
//
// tools.json holds a JSON array of tools (the "tools" of a tools/list result). Once it
// listens, baresdk prints "MCP URL: http://ADDR/mcp" on stdout. Every tool answers with
// the text "bare". With -debug-addr, it serves net/http/pprof there, as urlflow does with
// URLFLOW_DEBUG_ADDR, so that both processes' memory can be read the same way.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	toolsFile := flag.String("tools", "", "a JSON file with the tools to serve")
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	debugAddr := flag.String("debug-addr", "", "an address to serve net/http/pprof on")
	flag.Parse()
	if *debugAddr != "" {
		go serveProfiles(*debugAddr)
	}
	if err := run(*toolsFile, *addr); err != nil {
		log.Fatalf("baresdk: %v", err)
	}
}

func run(toolsFile, addr string) error {
	raw, err := os.ReadFile(toolsFile)
	if err != nil {
		return err
	}
	var tools []*sdk.Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return fmt.Errorf("%s: %w", toolsFile, err)
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "baresdk", Version: "1"}, nil)
	for _, t := range tools {
		srv.AddTool(t, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "bare"}}}, nil
		})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	fmt.Printf("MCP URL: http://%s/mcp\n", ln.Addr())
	return http.Serve(ln, mux)
}

// serveProfiles serves net/http/pprof on addr.
func serveProfiles(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	log.Fatalf("baresdk: debug listener: %v", http.ListenAndServe(addr, mux))
}
