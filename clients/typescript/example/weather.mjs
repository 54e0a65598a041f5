#!/usr/bin/env node
// The example delegating MCP server in TypeScript, the twin of examples/weather: one tool,
// forecast, that needs the user's demo API key, served on the MCP TypeScript SDK v1
// (protocol 2025-11-25, with sessions) over streamable HTTP. Next to `urlflow dev`:
//
//   go run ./cmd/urlflow dev
//   node clients/typescript/example/weather.mjs      (after npm ci && npm run build there)
//
// It takes the demo service's key from urlflow dev (or URLFLOW_SERVICE_KEY), prints a
// token of the development user alice for itself, and answers each client the way it
// understands (--style push, the default, or error).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { Client, Delegation, callOf } from "../dist/index.js";

const { values: flags } = parseArgs({
  options: {
    addr: { type: "string", default: "127.0.0.1:8092" },
    style: { type: "string", default: "push" },
    slot: { type: "string", default: "demo_api_key" },
  },
});
const urlflow = process.env.URLFLOW_URL || "http://127.0.0.1:8080";

async function devJSON(path) {
  const resp = await fetch(new URL(path, urlflow));
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

let key = process.env.URLFLOW_SERVICE_KEY;
if (!key) {
  try {
    ({ key } = await devJSON("/dev/service-key?service=demo"));
  } catch (err) {
    console.error(`weather: cannot reach urlflow dev at ${urlflow} (${err.message}): start it first with go run ./cmd/urlflow dev, or set URLFLOW_URL and URLFLOW_SERVICE_KEY for another urlflow`);
    process.exit(1);
  }
}
const delegation = new Delegation(new Client({ url: urlflow, key }), { style: flags.style });
const stop = new AbortController();
delegation.follow(stop.signal).catch((err) => console.error("weather: urlflow's event stream:", err.message)); // tells each session when its user has finished

// One McpServer per session: elicitation/create and the completion notification go to the
// session that called.
function newServer() {
  const server = new McpServer({ name: "weather-ts", version: "1.0.0" });
  server.registerTool("forecast", { description: "Tells the weather of a city, with the user's demo API key.", inputSchema: { city: z.string().describe("the city") } },
    async ({ city }, extra) => {
      const need = { slot: flags.slot, message: "Weather needs your API key to ask for forecasts.", call: callOf("forecast", { city }) };
      const { credential, result } = await delegation.require(server.server, extra, need);
      if (result) return result;
      const resp = await credential.call({ method: "GET", path: "/whoami" });
      return {
        content: [{ type: "text", text: `Sunny in ${city}, says the demo API (HTTP ${resp.status}): ${resp.body}` }],
        structuredContent: { city, forecast: "sunny", apiStatus: resp.status },
      };
    });
  return server;
}

const transports = new Map();
const http = createServer(async (req, res) => {
  if (new URL(req.url, "http://x").pathname !== "/mcp") return res.writeHead(404).end();
  const [scheme, token] = (req.headers.authorization ?? "").split(" ");
  if (scheme?.toLowerCase() !== "bearer" || !token) {
    return res.writeHead(401, { "Content-Type": "text/plain" }).end("send a bearer token of your user (urlflow dev: /dev/token?user=alice&resource=...)\n");
  }
  req.auth = { token, clientId: "", scopes: [] }; // urlflow checks it; this server passes it on
  try {
    const id = req.headers["mcp-session-id"];
    let transport = typeof id === "string" ? transports.get(id) : undefined;
    if (!transport) {
      if (id) return res.writeHead(404).end(); // a session this server does not know
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => transports.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  } catch (err) {
    console.error("weather:", err);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

const [host, port] = flags.addr.split(":");
http.listen(Number(port), host, async () => {
  const resource = `http://${host}:${http.address().port}/mcp`;
  console.log(`weather: MCP on ${resource} (delegating to urlflow at ${urlflow})`);
  try {
    const { token } = await devJSON(`/dev/token?user=alice&resource=${encodeURIComponent(resource)}`);
    console.log(`weather: a token of the development user alice for it:\n  ${token}`);
  } catch {
    // not urlflow dev, or another resource: no token to print
  }
});
const shutdown = () => {
  stop.abort();
  http.close(() => process.exit(0));
  for (const t of transports.values()) t.close();
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
