package delegate_test

import (
	"context"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

// A tool that needs its user's key of an API configured in urlflow as the slot
// "weather_api_key": Require returns the credential once the user has entered it on
// urlflow's pages, or the answer that asks the calling client to send its user there.
func ExampleClient_Require() {
	uf, err := delegate.New(delegate.Options{URL: "https://urlflow.example.com", Key: os.Getenv("URLFLOW_SERVICE_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	go uf.Follow(context.Background()) // tells each client session when its user has finished

	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "forecast", Description: "Tells the weather."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{ City string }) (*mcp.CallToolResult, any, error) {
			cred, res, err := uf.Require(ctx, req, delegate.Need{Slot: "weather_api_key"})
			if err != nil || res != nil {
				return res, nil, err // the user is asked first, the way this client understands
			}
			resp, err := cred.Call(ctx, delegate.Request{Method: "GET", Path: "/forecast", Query: map[string]string{"city": in.City}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: resp.Body}}}, nil, nil
		})
	// Serve server over streamable HTTP behind your own bearer authentication: Require
	// forwards the user's token to urlflow as the evidence of who the user is.
}
