#!/usr/bin/env python3
"""Runs the delegation conformance suite (cases.json) with the Python module
urlflow_delegate (clients/python) against a running urlflow: each step is one call of the
module's API, and its outcome one line of JSON on standard output, which the suite's
harness (e2e) compares with the step's expectation. The line protocol is in README.md.

    URLFLOW_URL=... URLFLOW_SERVICE_KEY=... python3 python.py cases.json < users.json
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import urlflow_delegate as uf  # noqa: E402 - after the path above


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python3 python.py cases.json (URLFLOW_URL and URLFLOW_SERVICE_KEY set; the users' tokens as the first line of standard input)", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        suite = json.load(f)
    client = uf.Client(os.environ["URLFLOW_URL"], os.environ["URLFLOW_SERVICE_KEY"])
    tokens = json.loads(sys.stdin.readline())["tokens"]
    for i, case in enumerate(suite["cases"]):
        state = {"saved": {}, "verifier": None}
        for j, raw in enumerate(case["steps"]):
            step = substitute(raw, state["saved"])
            if step["op"] == "user":
                emit({"case": i, "step": j, "user": {"url": state["saved"].get("url", "")}})
                if not sys.stdin.readline():
                    raise SystemExit("the harness did not say that the user finished")
                continue
            try:
                outcome = run(client, tokens, step, state)
            except uf.UrlflowError as err:
                outcome = {"error": {"status": err.status, **({"reason": err.reason} if err.reason else {})}}
            except Exception as err:  # reported; no expectation matches it
                outcome = {"error": {"message": f"{type(err).__name__}: {err}"}}
            if step.get("save"):
                state["saved"][step["save"]] = saved_value(outcome)
            emit({"case": i, "step": j, "outcome": outcome})
    emit({"end": True, "cases": len(suite["cases"])})
    return 0


def emit(v):
    sys.stdout.write(json.dumps(v) + "\n")
    sys.stdout.flush()


def substitute(v, saved):
    """Replaces each string "$name" in v by the value saved as name (the expectation is the harness's)."""
    if isinstance(v, list):
        return [substitute(x, saved) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x, saved) for k, x in v.items() if k != "expect"}
    if isinstance(v, str) and v.startswith("$") and v[1:] in saved:
        return saved[v[1:]]
    return v


def saved_value(o):
    """What a step's save keeps of its outcome: the elicitation's ID, the ID, or the position of the last event."""
    e = o.get("elicitation") if isinstance(o, dict) else None
    if isinstance(e, dict) and isinstance(e.get("id"), str):
        return e["id"]
    for k in ("id", "last"):
        if isinstance(o.get(k), str):
            return o[k]
    return ""


def run(client, tokens, step, state):
    op = step["op"]
    user = {"token": tokens.get(step.get("user"), "")}
    need = step.get("need", {})
    if op == "create":
        answer = client.create(user, need, message=step.get("message"), metadata=step.get("metadata"),
                               call=step.get("call"), idempotency_key=step.get("idempotencyKey"))
        url = (answer.get("elicitation") or {}).get("url")
        if url:
            state["saved"]["url"] = url
        return answer
    if op == "get":
        return client.get(step["id"])
    if op == "wait":
        return client.wait(step["id"], timeout=step["timeoutMs"] / 1000)
    if op == "answer":
        return client.answer(step["id"], step["action"])
    if op == "cancel":
        return client.cancel(step["id"], step.get("reason"))
    if op == "retry":
        return client.retry(step["id"], fresh=step.get("fresh", False))
    if op == "proxy":
        r = step["request"]
        answer = client.proxy(user, need, r["method"], r["path"], query=r.get("query"), headers=r.get("headers"),
                              body=r.get("body"), content_type=r.get("contentType"))
        out = dict(answer.raw)
        try:
            out["json"] = answer.json()
        except ValueError:
            pass
        return out
    if op == "status":
        return client.credential_status(user, need)
    if op == "delete":
        return client.delete_credential(user, need, step.get("reason"))
    if op == "events":
        return events(client, step)
    if op == "webhookVerifier":
        try:
            state["verifier"] = uf.WebhookVerifier(step["secrets"], now=lambda: step["now"])
        except ValueError as err:
            return {"error": {"kind": "secret", "message": str(err)}}
        return {}
    if op == "verifyWebhook":
        try:
            return state["verifier"].verify(step["headers"], step["body"].encode())
        except uf.WebhookError as err:
            return {"error": {"kind": err.kind, "message": str(err)}}
        except ValueError as err:
            return {"error": {"kind": "body", "message": str(err)}}
    raise ValueError(f"no such op {op}")


def events(client, step):
    """Reads the event stream from step["after"] and returns the events it kept (those of
    step["elicitation"] when set, and resets) until one matches step["until"],
    step["count"] were kept, or 20 seconds passed."""
    stop = threading.Event()
    timer = threading.Timer(20, stop.set)
    timer.start()
    kept, last = [], ""
    try:
        for ev in client.events(step.get("after", ""), stop=stop, read_timeout=5):
            out = {"type": ev["type"]}
            if ev["type"] == "elicitation":
                data = ev["data"]
                if step.get("elicitation") and data["elicitation"]["id"] != step["elicitation"]:
                    continue
                out.update(event=data.get("event"), to=data.get("to"), elicitationId=data["elicitation"]["id"])
                if data.get("from"):
                    out["from"] = data["from"]
            elif ev["type"] == "credential":
                if step.get("elicitation"):
                    continue
                out.update(credentialType=ev["data"].get("type"), target=ev["data"].get("target"))
            kept.append(out)
            last = ev["id"]
            if (step.get("count") and len(kept) >= step["count"]) or (
                    step.get("until") and all(out.get(k) == v for k, v in step["until"].items())):
                return {"events": kept, "last": last}
        return {"events": kept, "last": last, "timedOut": True}
    finally:
        timer.cancel()
        stop.set()


if __name__ == "__main__":
    sys.exit(main())
