#!/usr/bin/env python3
"""The Python example, next to `urlflow dev`: a forecast that needs the user's demo API key,
asked for with urlflow_delegate and used through urlflow's proxy, never seen here.

    go run ./cmd/urlflow dev
    python3 clients/python/example/forecast.py [city]

It takes the demo service's key from urlflow dev (or URLFLOW_SERVICE_KEY) and a token of the
development user alice (or URLFLOW_USER_TOKEN), asks urlflow for alice's demo key, prints
the link to open (sign in as alice, enter a demo key such as demo_0123456789abcdef), waits
for her, and calls the demo API. An MCP server does the same in a tool handler with
Delegation.require (clients/python/README.md); this example needs no MCP SDK.
"""

import asyncio
import json
import os
import sys
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import urlflow_delegate as uf  # noqa: E402

URLFLOW = os.environ.get("URLFLOW_URL", "http://127.0.0.1:8080")


def dev_json(path: str) -> dict:
    with urllib.request.urlopen(urllib.parse.urljoin(URLFLOW, path), timeout=10) as resp:
        return json.load(resp)


async def main(city: str) -> int:
    try:
        key, token = os.environ.get("URLFLOW_SERVICE_KEY"), os.environ.get("URLFLOW_USER_TOKEN")
        if not (key and token):
            demo = dev_json("/dev/service-key?service=demo")
            key = key or demo["key"]
            token = token or dev_json("/dev/token?user=alice&resource=" + urllib.parse.quote(demo["resource"], safe=""))["token"]
    except OSError as err:
        print(f"forecast: cannot reach urlflow dev at {URLFLOW} ({err}): start it first with go run ./cmd/urlflow dev, "
              "or set URLFLOW_URL, URLFLOW_SERVICE_KEY and URLFLOW_USER_TOKEN for another urlflow", file=sys.stderr)
        return 1
    client = uf.AsyncClient(URLFLOW, key)
    user, need = {"token": token}, {"slot": "demo_api_key"}
    answer = await client.create(user, need, message="The forecast example needs your demo API key.")
    if answer["status"] == "user_action_required":
        e = answer["elicitation"]
        print(f"forecast: open {e['url']} in your browser (sign in as alice) and enter a demo key", flush=True)
        e = await client.wait(e["id"], timeout=600)
        if e["state"] != "complete":
            print(f"forecast: the request for the key ended: {e['state']}; nothing was stored", file=sys.stderr)
            return 1
    resp = await client.proxy(user, need, "GET", "/whoami")
    print(f"forecast: sunny in {city}, says the demo API (HTTP {resp.status}) to account {resp.json().get('account')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Paris")))
