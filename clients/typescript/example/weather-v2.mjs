#!/usr/bin/env node
// The example delegating MCP server on the MCP TypeScript SDK's v2 server package
// (@modelcontextprotocol/server): the same tool as weather.mjs, served by createMcpHandler,
// one McpServer per request. A 2026-07-28 client gets input_required with urlflow's URL
// and requestState, and the forecast on its retry once the user has finished; a 2025-11-25
// client is served statelessly (the handler's fallback) and gets the link as text, to
// open before it calls again. Next to `urlflow dev`:
//
//   go run ./cmd/urlflow dev
//   node clients/typescript/example/weather-v2.mjs      (after npm ci && npm run build there)
import { Readable } from "node:stream";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import { z } from "zod";
import { Client, Delegation, callOf } from "../dist/index.js";
import { bearer, delegationOptions, exampleFlags, forecast, forecastNeed, listen, serviceKey, urlflow } from "./common.mjs";

const flags = exampleFlags();
const delegation = new Delegation(new Client({ url: urlflow, key: await serviceKey() }), delegationOptions(flags));

const handler = createMcpHandler(() => {
  const server = new McpServer({ name: "weather-ts-v2", version: "1.0.0" });
  server.registerTool("forecast", { description: "Tells the weather of a city, with the user's demo API key.", inputSchema: z.object({ city: z.string().describe("the city") }) },
    async ({ city }, ctx) => {
      const { credential, result } = await delegation.requireV2(server.server, ctx, forecastNeed(flags, callOf, city));
      if (result) return result;
      return forecast(city, await credential.call({ method: "GET", path: "/whoami" }));
    });
  return server;
});

// node:http in front of the handler's fetch face (@modelcontextprotocol/node does this too).
listen(flags, async (req, res) => {
  const token = bearer(req, res);
  if (!token) return;
  const body = req.method === "GET" || req.method === "HEAD" ? undefined : Readable.toWeb(req);
  const request = new Request(new URL(req.url, `http://${req.headers.host}`), { method: req.method, headers: req.headers, body, duplex: "half" });
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  const response = await handler.fetch(request, { authInfo: { token, clientId: "", scopes: [] } }); // urlflow checks the token
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) return res.end();
  Readable.fromWeb(response.body, { signal: abort.signal }).on("error", () => res.destroy()).pipe(res);
}, () => handler.close());
