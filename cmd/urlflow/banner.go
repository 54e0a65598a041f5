package main

import (
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"

	"github.com/urlflow/urlflow/mcp"
)

// devBanner is what `urlflow dev` prints once on stdout: the one place urlflow ever prints
// a credential.
type devBanner struct {
	MCPURL        string
	Listen        string
	Token         string
	OperatorToken string
	SignIn        string
	TokenURL      string
	DemoAPI       string
	Redis         string
	Slots         []string
	Style         mcp.Style
	TTL           time.Duration
	StatePath     string
	// DemoService is the development delegating service, when urlflow dev added it.
	DemoService *demoServiceBanner
}

// demoServiceBanner tells a developer how to call the API as the demo service.
type demoServiceBanner struct {
	Name, Key, Resource, API string
}

var bannerTemplate = template.Must(template.New("banner").Funcs(template.FuncMap{
	"join": strings.Join,
}).Parse(`
urlflow dev: a development server with a development identity. Not for production.

  MCP URL:         {{.MCPURL}}
  Listening on:    {{.Listen}}
  Bearer token:    {{.Token}}
                   (development user "dev"; others: {{.TokenURL}}?user=NAME)
  Operator token:  {{.OperatorToken}}
  Browser sign-in: {{.SignIn}}
                   (a development page: type a name, e.g. dev, to be that user)
  Redis:           {{.Redis}}
  Secret slots:    {{join .Slots ", "}}
  Elicitation:     {{.Style}} style, links valid for {{.TTL}}
  Keys and tokens: kept in {{.StatePath}} so that they survive a restart
{{- with .DemoService}}

Delegating MCP server (service "{{.Name}}", docs/delegation.md):
  Service key:     {{.Key}}
  Its resource:    {{.Resource}}
                   (its users' tokens: {{$.TokenURL}}?user=NAME&resource={{.Resource}})
  API:             {{.API}} (Authorization: Bearer <service key>,
                   Urlflow-User-Token: <the user's token>)
  Example server:  go run ./examples/weather (in urlflow's repository; it serves that resource)
{{- end}}

Claude Code:
  claude mcp add --scope user --transport http urlflow {{.MCPURL}} --header "Authorization: Bearer {{.Token}}"

VS Code (.vscode/mcp.json):
  {
    "servers": {
      "urlflow": {
        "type": "http",
        "url": "{{.MCPURL}}",
        "headers": { "Authorization": "Bearer {{.Token}}" }
      }
    }
  }

MCP Inspector (npx @modelcontextprotocol/inspector):
  Transport Type: Streamable HTTP    URL: {{.MCPURL}}
  Authentication: header Authorization, value: Bearer {{.Token}}

Try it: ask your assistant to call the demo API's /whoami with your demo API key (tool call_api,
name demo_api_key, GET /whoami). It asks for the key first: open the link it shows, sign in as
dev, and enter demo_ followed by 16 or more letters or digits. The demo API lives at
{{.DemoAPI}}.

`))

func printDevBanner(w io.Writer, b devBanner) {
	if err := bannerTemplate.Execute(w, b); err != nil {
		fmt.Fprintf(w, "MCP URL: %s\nBearer token: %s\n", b.MCPURL, b.Token)
	}
}
