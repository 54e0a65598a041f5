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
// understands (--style push, the default, or error). weather-v2.mjs is the same on the
// SDK's v2 server package, for protocol 2026-07-28.
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { Client, Delegation, callOf } from "../dist/index.js";
import { bearer, delegationOptions, exampleFlags, forecast, forecastNeed, listen, serviceKey, urlflow } from "./common.mjs";

const flags = exampleFlags();
const delegation = new Delegation(new Client({ url: urlflow, key: await serviceKey() }), delegationOptions(flags));
const stop = new AbortController();
delegation.follow(stop.signal).catch((err) => console.error("weather: urlflow's event stream:", err.message)); // tells each session when its user has finished

// One McpServer per session: elicitation/create and the completion notification go to the
// session that called.
function newServer() {
  const server = new McpServer({ name: "weather-ts", version: "1.0.0" });
  server.registerTool("forecast", { description: "Tells the weather of a city, with the user's demo API key.", inputSchema: { city: z.string().describe("the city") } },
    async ({ city }, extra) => {
      const { credential, result } = await delegation.require(server.server, extra, forecastNeed(flags, callOf, city));
      if (result) return result;
      return forecast(city, await credential.call({ method: "GET", path: "/whoami" }));
    });
  return server;
}

const transports = new Map();
listen(flags, async (req, res) => {
  const token = bearer(req, res);
  if (!token) return;
  req.auth = { token, clientId: "", scopes: [] }; // urlflow checks it; this server passes it on
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
}, () => {
  stop.abort();
  for (const t of transports.values()) t.close();
});
