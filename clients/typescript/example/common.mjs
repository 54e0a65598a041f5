// What the two example servers share: urlflow dev's demo service key, the development
// user's token for the server, the bearer token of each request, listening, and stopping.
import { createServer } from "node:http";
import { parseArgs } from "node:util";

/** The flags of both examples. */
export function exampleFlags() {
  return parseArgs({
    options: {
      // urlflow dev's demo service has this resource (URLFLOW_DEV_DEMO_RESOURCE moves it):
      // its users' tokens are for it.
      addr: { type: "string", default: "127.0.0.1:8090" },
      style: { type: "string", default: "push" },
      slot: { type: "string", default: "demo_api_key" },
      "retry-wait": { type: "string" }, // a duration such as 25s or 300ms; tests shorten it
      "progress-interval": { type: "string" }, // a duration; tests shorten it
    },
  }).values;
}

/** The Delegation options the flags set. */
export function delegationOptions(flags) {
  const opts = { style: flags.style };
  if (flags["retry-wait"] !== undefined) opts.retryWaitMs = milliseconds("retry-wait", flags["retry-wait"]);
  if (flags["progress-interval"] !== undefined) opts.progressIntervalMs = milliseconds("progress-interval", flags["progress-interval"]);
  return opts;
}

/** The milliseconds of a duration written as Go writes them, in ms, s or m (300ms, 1.5s, 2m). */
function milliseconds(flag, value) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(value);
  if (!m) throw new Error(`--${flag}: ${JSON.stringify(value)} is not a duration such as 300ms, 25s or 2m`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[m[2]];
}

export const urlflow = process.env.URLFLOW_URL || "http://127.0.0.1:8080";

async function devJSON(path) {
  const resp = await fetch(new URL(path, urlflow));
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

/** The demo service's key: URLFLOW_SERVICE_KEY, or urlflow dev's; exits when there is none. */
export async function serviceKey() {
  if (process.env.URLFLOW_SERVICE_KEY) return process.env.URLFLOW_SERVICE_KEY;
  try {
    return (await devJSON("/dev/service-key?service=demo")).key;
  } catch (err) {
    console.error(`weather: cannot reach urlflow dev at ${urlflow} (${err.message}): start it first with go run ./cmd/urlflow dev, or set URLFLOW_URL and URLFLOW_SERVICE_KEY for another urlflow`);
    process.exit(1);
  }
}

/** The bearer token of req, or undefined after answering 401. */
export function bearer(req, res) {
  const [scheme, token] = (req.headers.authorization ?? "").split(" ");
  if (scheme?.toLowerCase() === "bearer" && token) return token;
  res.writeHead(401, { "Content-Type": "text/plain" }).end("send a bearer token of your user (urlflow dev: /dev/token?user=alice&resource=...)\n");
  return undefined;
}

/**
 * Serves serve(req, res) for /mcp on flags.addr, prints where and a token of the
 * development user alice for it, and stops on SIGINT or SIGTERM after onStop.
 */
export function listen(flags, serve, onStop) {
  const http = createServer(async (req, res) => {
    if (new URL(req.url, "http://x").pathname !== "/mcp") return res.writeHead(404).end();
    try {
      await serve(req, res);
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
      // not urlflow dev, or urlflow dev's demo service is for another resource
      const demo = await devJSON("/dev/service-key?service=demo").catch(() => undefined);
      if (demo?.resource && demo.resource !== resource) {
        console.log(`weather: urlflow dev's demo service is for ${demo.resource}, not ${resource}: its users' tokens will not do here; start urlflow dev with URLFLOW_DEV_DEMO_RESOURCE=${resource}`);
      }
    }
  });
  const shutdown = () => {
    onStop();
    http.close(() => process.exit(0));
    http.closeAllConnections();
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}

/** The forecast the tool answers once it has called the demo API with the user's key. */
export function forecast(city, resp) {
  return {
    content: [{ type: "text", text: `Sunny in ${city}, says the demo API (HTTP ${resp.status}): ${resp.body}` }],
    structuredContent: { city, forecast: "sunny", apiStatus: resp.status },
  };
}

/** What the forecast tool needs, for the call of city. */
export function forecastNeed(flags, callOf, city) {
  return { slot: flags.slot, message: "Weather needs your API key to ask for forecasts.", call: callOf("forecast", { city }) };
}
