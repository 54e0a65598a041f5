#!/usr/bin/env python3
"""A whole delegated flow with urlflow_delegate against a running urlflow, as a server of
yours would make it: it serves its webhook endpoint (wsgi_webhook_app on wsgiref), creates
an elicitation for the user, prints its link, waits until the webhook says the user
finished (verified with the webhook secret), calls the demo API through urlflow's proxy,
and prints what it saw as JSON lines. The end-to-end test TestThePythonPackageDelegatesAgainstUrlflow
runs it with the user in Chromium.

Environment: URLFLOW_URL, URLFLOW_SERVICE_KEY, URLFLOW_WEBHOOK_SECRET, WEBHOOK_ADDR
(host:port of the webhook endpoint, which urlflow's configuration names), USER_TOKEN (the
user's access token for the service), SLOT.
"""

import asyncio
import json
import os
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import urlflow_delegate as uf  # noqa: E402


def emit(**v):
    print(json.dumps(v), flush=True)


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


async def main() -> None:
    env = os.environ
    client = uf.AsyncClient(env["URLFLOW_URL"], env["URLFLOW_SERVICE_KEY"])
    user, need = {"token": env["USER_TOKEN"]}, {"slot": env.get("SLOT", "demo_api_key")}
    loop = asyncio.get_running_loop()
    hooks: asyncio.Queue = asyncio.Queue()

    def on_webhook(hook):
        loop.call_soon_threadsafe(hooks.put_nowait, hook)

    host, port = env["WEBHOOK_ADDR"].rsplit(":", 1)
    app = uf.wsgi_webhook_app(uf.WebhookVerifier([env["URLFLOW_WEBHOOK_SECRET"]]), on_webhook)
    httpd = make_server(host, int(port), app, handler_class=QuietHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    answer = await client.create(user, need, message="The Python flow needs your demo key.", metadata={"lang": "python"})
    e = answer["elicitation"]
    emit(event="url", url=e["url"], id=e["id"], new=answer["new"])
    while True:
        hook = await asyncio.wait_for(hooks.get(), timeout=120)
        emit(event="webhook", type=hook["type"], id=hook["id"])
        if hook.get("elicitation", {}).get("id") == e["id"] and hook["type"] == "elicitation.complete":
            break
    status = await client.credential_status(user, need)
    resp = await client.proxy(user, need, "GET", "/whoami")
    emit(event="result", state=(await client.get(e["id"]))["state"], status=status["status"], apiStatus=resp.status, account=resp.json().get("account"))
    httpd.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
