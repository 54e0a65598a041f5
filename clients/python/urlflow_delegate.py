"""urlflow_delegate: an MCP server's client of urlflow's delegation API, in one file.

urlflow runs the browser part of secret entry and third-party OAuth for your MCP server's
users and keeps the credential; your server asks for it (Client.create), sends the user to
urlflow's link, and then uses the credential through urlflow's proxy (Client.proxy)
without ever seeing it. This module holds the API client (on urllib, with an asyncio
wrapper, AsyncClient), the event stream reader with reconnection and reset, Standard
Webhooks verification (WebhookVerifier) with WSGI and ASGI webhook apps that need no
framework, and Delegation, the one call in a tool handler of a server on the MCP Python
SDK (imported only when that is used). Standard library only, Python 3.10 and later:
install it (pip install clients/python) or copy this file into your project.

Users and needs are dicts, as in the API: a user is {"token": ...} (the access token the
user sent your server), {"ref": ...} (your service's reference to them, for a credential
they let you use while away) or {"subject": ...} (with assert_users); a need is
{"slot": ...} or {"provider": ...}, with "label" and "scopes" if you like. Answers are the
API's JSON (docs/openapi.yaml) as dicts, never a value of a credential.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import inspect
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterator, Mapping

__version__ = "0.0.0"
__all__ = [
    "AsyncClient",
    "Client",
    "Delegation",
    "ProxyAnswer",
    "Requirement",
    "UrlflowError",
    "WebhookError",
    "WebhookVerifier",
    "asgi_webhook_app",
    "call_of",
    "ended_states",
    "parse_secret",
    "retry_after",
    "sign",
    "wsgi_webhook_app",
]

#: The states in which an elicitation has ended.
ended_states = ("complete", "declined", "cancelled", "expired", "unknown")

#: How long urlflow's long poll holds a read at most, in seconds.
LONG_POLL = 60
#: The longest Retry-After a request waits before it is sent again, in seconds.
MAX_RATE_LIMIT_WAIT = 30


class UrlflowError(Exception):
    """A request that urlflow refused or could not serve.

    For a refused proxy call, reason says what the user must do: "not_stored", "locked",
    "reconnect", "unopenable" or "incomplete" (ask them again: create an elicitation), or
    "carried" (the request carried the credential: never send it, urlflow adds it).
    """

    def __init__(self, status: int, message: str, reason: str | None = None):
        text = f"urlflow: {status} {message}" + (f" ({reason})" if reason else "")
        super().__init__(text)
        self.status = status
        self.message = message
        self.reason = reason


def retry_after(value: str | None, attempt: int, now: float | None = None) -> float:
    """The wait, in seconds, that a Retry-After asks (seconds or an HTTP date), or 1, 2, 4
    seconds by attempt without one; a wait over MAX_RATE_LIMIT_WAIT comes back just over it."""
    if value and value.strip().isdigit():
        return float(min(int(value.strip()), MAX_RATE_LIMIT_WAIT + 1))
    if value:
        from email.utils import parsedate_to_datetime

        try:
            at = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            at = None
        if at is not None:
            return max(at - (time.time() if now is None else now), 0.0)
    return float(2**attempt)


class ProxyAnswer:
    """The API's answer through urlflow's proxy, the credential redacted from it."""

    def __init__(self, answer: Mapping[str, Any]):
        self.status: int = answer.get("status", 0)
        self.headers: dict[str, str] = dict(answer.get("headers") or {})
        self.body: str = answer.get("body", "")
        #: "text", or "base64" for a body that is not text.
        self.body_encoding: str = answer.get("bodyEncoding", "text")
        self.attempts: int = answer.get("attempts", 0)
        self.raw = dict(answer)

    @property
    def ok(self) -> bool:
        """Whether the API answered 2xx."""
        return 200 <= self.status <= 299

    def bytes(self) -> bytes:
        """The body's bytes."""
        return base64.b64decode(self.body) if self.body_encoding == "base64" else self.body.encode()

    def text(self) -> str:
        """The body as text."""
        return self.bytes().decode("utf-8", "replace") if self.body_encoding == "base64" else self.body

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text())


def _target(need: Mapping[str, Any]) -> dict[str, Any]:
    """The slot or provider of need, and its account label: what names a stored credential."""
    return {k: need[k] for k in ("slot", "provider", "label") if need.get(k)}


class Client:
    """urlflow's delegation API, as a delegating service uses it. Safe to share between threads.

    url is urlflow's public URL; key the service's key (urlflow service-key). A request
    answered 429 is sent again after its Retry-After (at most 30 s), rate_limit_retries
    times; a create carries an Idempotency-Key of its own unless you give one.
    """

    def __init__(self, url: str, key: str, *, rate_limit_retries: int = 2, timeout: float = 30.0,
                 opener: urllib.request.OpenerDirector | None = None):
        if not url:
            raise ValueError("urlflow_delegate: url is required: urlflow's public URL")
        if not key:
            raise ValueError("urlflow_delegate: key is required: the service's key (urlflow service-key)")
        self.base = url.rstrip("/") + "/api/v1/"
        self._key = key
        self.rate_limit_retries = rate_limit_retries
        self.timeout = timeout
        self._opener = opener or urllib.request.build_opener(_NoRedirect())

    # -- elicitations

    def create(self, user: Mapping[str, str], need: Mapping[str, Any], *, message: str | None = None,
               metadata: Mapping[str, str] | None = None, offline: bool | None = None, call: str | None = None,
               client: Mapping[str, str] | None = None, request_state: str | None = None,
               action: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """Asks urlflow for the credential need of user: stored already ("stored"), or an
        elicitation that asks the user ("user_action_required": send them to
        answer["elicitation"]["url"]). answer["new"] says whether urlflow created it (201)
        rather than finding the user's running one (200)."""
        body: dict[str, Any] = {k: v for k, v in need.items() if v not in (None, "", [])}
        for k, v in (("message", message), ("metadata", metadata), ("offline", offline), ("call", call),
                     ("client", client), ("requestState", request_state), ("action", action)):
            if v not in (None, "", {}):
                body[k] = v
        key = idempotency_key or base64.urlsafe_b64encode(os.urandom(18)).decode()
        status, answer = self._send("POST", "elicitations", user=user, body=body, headers={"Idempotency-Key": key})
        answer = dict(answer or {})
        answer["new"] = status == 201
        return answer

    def get(self, elicitation_id: str, wait: int = 0) -> dict[str, Any]:
        """Reads an elicitation; with wait (seconds, at most 60), answers as soon as it ends."""
        query = f"?wait={min(max(int(wait), 0), LONG_POLL)}" if wait > 0 else ""
        return self._send("GET", f"elicitations/{_quote(elicitation_id)}{query}", timeout=self.timeout + wait)[1]

    def wait(self, elicitation_id: str, timeout: float = 600.0) -> dict[str, Any]:
        """Waits until the elicitation ends or timeout seconds pass, and returns it as it then
        stands. urlflow's long poll counts whole seconds: what is left under a second is
        waited here, before the last read, so that a short wait is a pause."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            secs = max(0, min(LONG_POLL, int(left)))
            if secs == 0 and left > 0:
                time.sleep(left)
            e = self.get(elicitation_id, wait=secs)
            if e.get("state") in ended_states or secs == 0:
                return e

    def answer(self, elicitation_id: str, action: str) -> dict[str, Any]:
        """Records the MCP client's answer to your own URL-mode request: "accept" (consent,
        never success), "decline" or "cancel"."""
        return self._send("POST", f"elicitations/{_quote(elicitation_id)}/answer", body={"action": action})[1]

    def cancel(self, elicitation_id: str, reason: str | None = None) -> dict[str, Any]:
        """Cancels a running elicitation of the service (409 when it had ended)."""
        return self._send("POST", f"elicitations/{_quote(elicitation_id)}/cancel", body={"reason": reason} if reason else {})[1]

    def retry(self, elicitation_id: str, fresh: bool = False) -> dict[str, Any]:
        """Offers a running elicitation again; with fresh, follows an ended one with a new one."""
        return self._send("POST", f"elicitations/{_quote(elicitation_id)}/retry", body={"new": True} if fresh else {})[1]

    # -- credentials

    def proxy(self, user: Mapping[str, str], need: Mapping[str, Any], method: str, path: str, *,
              query: Mapping[str, str | list[str]] | None = None, headers: Mapping[str, str] | None = None,
              body: str | bytes | None = None, content_type: str | None = None, retries: int | None = None,
              response_headers: list[str] | None = None) -> ProxyAnswer:
        """Calls the API of need with the user's credential, which urlflow injects and never
        shows. A refusal is a UrlflowError whose reason says what the user must do."""
        req: dict[str, Any] = {**_target(need), "method": method, "path": path}
        for k, v in (("query", query), ("headers", headers), ("contentType", content_type), ("retries", retries),
                     ("responseHeaders", response_headers)):
            if v not in (None, {}, []):
                req[k] = v
        if isinstance(body, bytes):
            try:
                req["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                req["body"], req["bodyEncoding"] = base64.b64encode(body).decode(), "base64"
        elif body:
            req["body"] = body
        return ProxyAnswer(self._send("POST", "proxy", user=user, body=req)[1])

    def release(self, user: Mapping[str, str], need: Mapping[str, Any]) -> dict[str, Any]:
        """Receives the credential itself, for a service whose configuration has release."""
        return self._send("POST", "release", user=user, body=_target(need))[1]

    def credential_status(self, user: Mapping[str, str], need: Mapping[str, Any]) -> dict[str, Any]:
        """How the credential need of user stands ("stored", "not_stored", "locked", ...)."""
        return self._send("POST", "credentials/status", user=user, body=_target(need))[1]

    def delete_credential(self, user: Mapping[str, str], need: Mapping[str, Any], reason: str | None = None) -> dict[str, Any]:
        """Deletes the credential need of user that urlflow holds for the service."""
        body = {**_target(need), **({"reason": reason} if reason else {})}
        return self._send("POST", "credentials/delete", user=user, body=body)[1]

    def delete_all_credentials(self, user: Mapping[str, str], reason: str | None = None) -> dict[str, Any]:
        """Deletes every credential of user that urlflow holds for the service."""
        return self._send("POST", "credentials/delete-all", user=user, body={"reason": reason} if reason else {})[1]

    def list_credentials(self, *, cursor: str | None = None, limit: int | None = None, **filters: str) -> dict[str, Any]:
        """One page of the credentials the service holds: {"credentials": [...], "next": cursor}."""
        params = {k: v for k, v in {"cursor": cursor, "limit": limit, **filters}.items() if v not in (None, "")}
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        return self._send("GET", "credentials" + query)[1]

    # -- events

    def events(self, last_event_id: str = "", *, stop: threading.Event | None = None, reconnect: float = 1.0,
               read_timeout: float = 40.0) -> Iterator[dict[str, Any]]:
        """The service's events, in order, after last_event_id (from now when empty): dicts
        {"type": "elicitation" | "credential" | "reset", "id": position, "data": ...}.
        After a dropped connection it reconnects from the last event read (a read that
        waits read_timeout seconds, more than urlflow's keep-alive, counts as dropped),
        until stop is set; a refusal of the stream (a wrong key, a malformed position) is
        raised as UrlflowError. After a "reset", read your running elicitations again."""
        last = last_event_id
        while stop is None or not stop.is_set():
            headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last} if last else {})}
            req = urllib.request.Request(self.base + "events", headers={**headers, "Authorization": f"Bearer {self._key}"})
            try:
                resp = self._opener.open(req, timeout=read_timeout)
            except urllib.error.HTTPError as err:
                refusal = _refusal(err)
                if refusal.status != 429 and refusal.status < 500:
                    raise refusal from None
            except (OSError, urllib.error.URLError):
                pass
            else:
                with resp:
                    try:
                        for raw in _parse_event_stream(resp, stop):
                            last = raw["id"] or last  # every event moves the position
                            ev = _stream_event(raw)
                            if ev is not None:
                                yield ev
                    except (OSError, socket.timeout):
                        pass
            if stop is not None and stop.wait(reconnect):
                return
            if stop is None:
                time.sleep(reconnect)

    # -- the wire

    def _send(self, method: str, path: str, *, user: Mapping[str, str] | None = None, body: Any = None,
              headers: Mapping[str, str] | None = None, timeout: float | None = None) -> tuple[int, Any]:
        """Sends one request to the API, again after a 429 as its Retry-After asks, and
        returns its status and JSON answer; a refusal is a UrlflowError."""
        all_headers = {"Authorization": f"Bearer {self._key}", "Accept": "application/json", **(headers or {})}
        if user is not None:
            if "token" in user:
                if not user["token"]:
                    raise ValueError("urlflow_delegate: the user's token is empty: urlflow needs it as evidence of who the user is")
                all_headers["Urlflow-User-Token"] = user["token"]
            elif "ref" in user:
                body = {**(body or {}), "userRef": user["ref"]}
            elif "subject" in user:
                body = {**(body or {}), "user": user["subject"]}
            else:
                raise ValueError('urlflow_delegate: a user is {"token": ...}, {"ref": ...} or {"subject": ...}')
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        attempt = 0
        while True:
            req = urllib.request.Request(self.base + path, data=data, method=method, headers=all_headers)
            try:
                with self._opener.open(req, timeout=timeout or self.timeout) as resp:
                    text = resp.read().decode()
                    return resp.status, (json.loads(text) if text else None)
            except urllib.error.HTTPError as err:
                if err.code == 429 and attempt < self.rate_limit_retries:
                    wait = retry_after(err.headers.get("Retry-After"), attempt)
                    if wait <= MAX_RATE_LIMIT_WAIT:
                        err.close()
                        time.sleep(wait)
                        attempt += 1
                        continue
                raise _refusal(err) from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urlflow's API never redirects: a redirect is answered as it is, not followed with the key."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401 - urllib's signature
        return None


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _refusal(err: urllib.error.HTTPError) -> UrlflowError:
    """The UrlflowError of a refused answer: urlflow's {"error", "reason"}, or the status text."""
    message, reason = err.reason if isinstance(err.reason, str) else str(err.code), None
    try:
        data = json.loads(err.read().decode() or "null")
        if isinstance(data, dict):
            message = data.get("error") or message
            reason = data.get("reason")
    except (ValueError, OSError):
        pass
    finally:
        err.close()
    return UrlflowError(err.code, str(message), reason)


def _parse_event_stream(resp: Any, stop: threading.Event | None) -> Iterator[dict[str, str]]:
    """The events of a text/event-stream, as the HTML standard's parser reads them (the last
    id carries over)."""
    last_id, event, data = "", "", []
    while stop is None or not stop.is_set():
        raw = resp.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data or event:
                yield {"id": last_id, "event": event or "message", "data": "\n".join(data)}
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id" and "\0" not in value:
            last_id = value
        elif field == "event":
            event = value
        elif field == "data":
            data.append(value)


def _stream_event(raw: Mapping[str, str]) -> dict[str, Any] | None:
    """The event of raw, or None for one this module does not know (a later urlflow may add
    types) or whose data is not JSON."""
    if raw["event"] == "reset":
        return {"type": "reset", "id": raw["id"]}
    if raw["event"] not in ("elicitation", "credential"):
        return None
    try:
        data = json.loads(raw["data"])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {"type": raw["event"], "id": raw["id"], "data": data}


class AsyncClient:
    """Client for asyncio: each method runs the Client's in a worker thread."""

    def __init__(self, url: str, key: str, **kwargs: Any):
        self.sync = Client(url, key, **kwargs)

    @classmethod
    def of(cls, client: Client) -> "AsyncClient":
        """The AsyncClient of an existing Client."""
        wrapped = cls.__new__(cls)
        wrapped.sync = client
        return wrapped

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.sync, name)
        if name.startswith("_") or not callable(method) or name == "events":
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def events(self, last_event_id: str = "", *, stop: threading.Event | None = None, **kwargs: Any):
        """Client.events as an async iterator, read in a thread; leaving the loop, or
        setting stop, stops the thread."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = stop or threading.Event()
        done = object()

        def read() -> None:
            try:
                for ev in self.sync.events(last_event_id, stop=stop, **kwargs):
                    loop.call_soon_threadsafe(queue.put_nowait, ev)
            except BaseException as err:  # handed to the reader
                loop.call_soon_threadsafe(queue.put_nowait, err)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, done)

        threading.Thread(target=read, name="urlflow-events", daemon=True).start()
        try:
            while True:
                item = await queue.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()


# -- webhooks

SECRET_PREFIX = "whsec_"
#: How far a webhook's timestamp may be from now, in seconds.
DEFAULT_TOLERANCE = 5 * 60
#: The most a webhook's body may be, in bytes.
MAX_WEBHOOK_BODY = 1 << 20


class WebhookError(Exception):
    """A webhook that does not verify: kind is "signature", "stale" or "replayed"."""

    def __init__(self, kind: str):
        super().__init__({"signature": "webhook: no valid signature", "stale": "webhook: timestamp out of tolerance",
                          "replayed": "webhook: verified before (a replay)"}.get(kind, f"webhook: {kind}"))
        self.kind = kind


def parse_secret(secret: str) -> bytes:
    """The key of a webhook secret: "whsec_" and the base64 of 24 to 64 bytes."""
    trimmed = secret.strip()
    encoded = trimmed[len(SECRET_PREFIX):] if trimmed.startswith(SECRET_PREFIX) else None
    try:
        key = base64.b64decode(encoded, validate=True) if encoded else b""
    except ValueError:
        key = b""
    if not 24 <= len(key) <= 64:
        raise ValueError(f'webhook secret: want "{SECRET_PREFIX}" and the base64 of 24 to 64 bytes')
    return key


def sign(key: bytes, msg_id: str, timestamp: int, body: str | bytes) -> str:
    """The webhook-signature of the message msg_id sent at timestamp (Unix seconds) with body."""
    raw = body.encode() if isinstance(body, str) else body
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


class WebhookVerifier:
    """Verifies urlflow's webhooks signed with any of its secrets (give the old and the new
    one while urlflow's secret rotates), and refuses a message it verified before within
    the tolerance: urlflow sends a message again when it did not see the answer. Safe to
    share between threads; a server of several processes sees a replay refused only by the
    one that verified the first copy."""

    def __init__(self, secrets: list[str], *, tolerance: int = DEFAULT_TOLERANCE, now: Callable[[], float] | None = None):
        if not secrets:
            raise ValueError("webhook: no secret to verify with")
        self._keys = [parse_secret(s) for s in secrets]
        self._tolerance = tolerance
        self._now = now or time.time
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def forget(self, msg_id: str) -> None:
        """Forgets that msg_id was verified, so that urlflow's next attempt of it verifies:
        for a message that was not handled."""
        with self._lock:
            self._seen.pop(msg_id, None)

    def verify(self, headers: Mapping[str, str], body: str | bytes) -> dict[str, Any]:
        """Verifies the webhook of headers (any case) and body (the raw bytes, as received)
        and returns {"id", "type", "elicitation"} or {"id", "type", "credential"}. Raises
        WebhookError, or ValueError for a body that is not urlflow's."""
        h = {k.lower(): v for k, v in headers.items()}
        msg_id, ts = h.get("webhook-id", ""), h.get("webhook-timestamp", "")
        if not msg_id or not ts.isdigit():
            raise WebhookError("signature")
        timestamp = int(ts)
        sigs = h.get("webhook-signature", "").split()
        signed = any(hmac.compare_digest(sig.encode(), sign(key, msg_id, timestamp, body).encode())
                     for key in self._keys for sig in sigs)
        if not signed:
            raise WebhookError("signature")
        now = self._now()
        if abs(now - timestamp) > self._tolerance:
            raise WebhookError("stale")
        try:
            msg = json.loads(body)
        except ValueError as err:
            raise ValueError(f"webhook: the body is not urlflow's: {err}") from None
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str) or not msg["type"]:
            raise ValueError("webhook: the body is not urlflow's: no type")
        with self._lock:
            for seen, at in list(self._seen.items()):
                if at < now - 2 * self._tolerance:
                    del self._seen[seen]  # stale by now anyway
            if msg_id in self._seen:
                raise WebhookError("replayed")
            self._seen[msg_id] = timestamp
        data = msg.get("data") if isinstance(msg.get("data"), dict) else {}
        if msg["type"].startswith("credential."):
            return {"id": msg_id, "type": msg["type"], "credential": data}
        return {"id": msg_id, "type": msg["type"], "elicitation": data.get("elicitation") or {}}


def _handle_webhook(verifier: WebhookVerifier, headers: Mapping[str, str], body: bytes,
                    handled: Callable[[dict[str, Any]], Any]) -> tuple[int, Any]:
    """The status of a webhook's answer, and what handled returned (maybe awaitable) when it
    is to be handed the message: 401 for a message that does not verify, 204 for a replay."""
    try:
        hook = verifier.verify(headers, body)
    except WebhookError as err:
        return (204, None) if err.kind == "replayed" else (401, None)
    except ValueError:
        return 401, None
    return 204, (hook, handled(hook))


def wsgi_webhook_app(verifier: WebhookVerifier, on_webhook: Callable[[dict[str, Any]], Any]):
    """A WSGI app for urlflow's webhook: it verifies each message, hands it to on_webhook,
    and answers 204; 401 for a message that does not verify, 204 without on_webhook for a
    replay, 500 when on_webhook raises (the message is forgotten, and urlflow's next attempt
    of it is handed to you)."""

    def app(environ: Mapping[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        state: dict[str, Any] = {}

        def call(hook: dict[str, Any]) -> Any:
            state["hook"] = hook
            return on_webhook(hook)

        try:
            return _wsgi(verifier, call, environ, start_response)
        except Exception:
            if "hook" in state:
                verifier.forget(state["hook"]["id"])
            start_response("500 Internal Server Error", [])
            return [b""]

    return app


def _wsgi(verifier: WebhookVerifier, call: Callable[[dict[str, Any]], Any], environ: Mapping[str, Any],
          start_response: Callable[..., Any]) -> list[bytes]:
    """Answers one WSGI request of the webhook, handing a verified message to call."""
    if environ.get("REQUEST_METHOD") != "POST":
        start_response("405 Method Not Allowed", [("Allow", "POST")])
        return [b""]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length > MAX_WEBHOOK_BODY:
        start_response("413 Payload Too Large", [])
        return [b""]
    body = environ["wsgi.input"].read(length)
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    status, _ = _handle_webhook(verifier, headers, body, call)
    start_response(_status_line(status), [])
    return [b""]


def asgi_webhook_app(verifier: WebhookVerifier, on_webhook: Callable[[dict[str, Any]], Any]):
    """An ASGI app for urlflow's webhook, as wsgi_webhook_app; on_webhook may be a
    coroutine function."""

    async def app(scope: Mapping[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            return
        if scope.get("method") != "POST":
            return await _asgi_answer(send, 405, [(b"allow", b"POST")])
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_WEBHOOK_BODY:
                return await _asgi_answer(send, 413)
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            status, handed = _handle_webhook(verifier, headers, body, on_webhook)
            if handed is not None and inspect.isawaitable(handed[1]):
                await handed[1]
        except Exception:
            if "webhook-id" in headers:
                verifier.forget(headers["webhook-id"])
            return await _asgi_answer(send, 500)
        await _asgi_answer(send, status)

    return app


async def _asgi_answer(send: Callable[..., Any], status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or []})
    await send({"type": "http.response.body", "body": b""})


def _status_line(status: int) -> str:
    return {204: "204 No Content", 401: "401 Unauthorized", 500: "500 Internal Server Error"}.get(status, str(status))


# -- the MCP side

#: The key of the one input request of a 2026-07-28 input_required result.
INPUT_KEY = "auth"
#: The first protocol revision whose clients retry a call with its input requests answered.
FIRST_MODERN_VERSION = "2026-07-28"


def call_of(tool: str, arguments: Any) -> str:
    """The digest of a tool call (its name and canonical arguments), for require's call:
    it binds a 2026-07-28 requestState to the call."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
    call = f"{tool}:{digest}"
    return call[-200:]


class Requirement:
    """The outcome of Delegation.require: the credential (credential.call uses it through
    urlflow's proxy), or result, what the tool returns instead of it."""

    def __init__(self, credential: "Credential | None" = None, result: Any = None):
        self.credential = credential
        self.result = result


class Credential:
    """The user's credential, used through urlflow's proxy: the server never sees it."""

    def __init__(self, client: Client, user: Mapping[str, str], need: Mapping[str, Any]):
        self._client, self._user, self.need = client, dict(user), dict(need)

    async def call(self, method: str, path: str, **kwargs: Any) -> ProxyAnswer:
        """Client.proxy with the user's credential, in a worker thread."""
        return await asyncio.to_thread(self._client.proxy, self._user, self.need, method, path, **kwargs)

    async def release(self) -> dict[str, Any]:
        """Client.release: the credential itself, for a server with release."""
        return await asyncio.to_thread(self._client.release, self._user, self.need)


def _load_sdk() -> Any:
    """The parts of the MCP Python SDK (mcp 1.23+ or 2.x) that Delegation builds answers of."""
    import types as pytypes

    import mcp.types as mcp_types
    from mcp.shared.exceptions import UrlElicitationRequiredError

    return pytypes.SimpleNamespace(types=mcp_types, UrlElicitationRequiredError=UrlElicitationRequiredError)


class Delegation:
    """Delegation of an MCP server's tools to urlflow, for servers on the MCP Python SDK
    (mcp 1.23 and later: FastMCP; mcp 2.x: MCPServer): require in each tool handler, and
    follow (or webhook_handler) to tell each session when its user has finished.

    style is how a 2025-11-25 client with URL mode is asked: "push" (elicitation/create,
    then a bounded wait for the user) or "error" (the -32042 error, and the completion
    notification once the user has finished). The SDK is imported when first needed; sdk
    replaces it (tests)."""

    def __init__(self, client: Client, *, style: str = "push", push_wait: float = 50, retry_wait: float = 25,
                 progress_interval: float = 15, progress_wait_limit: float = 600,
                 log: Callable[[str], None] | None = None, sdk: Any = None):
        if style not in ("push", "error"):
            raise ValueError('urlflow_delegate: style is "push" or "error"')
        self.client = client.sync if isinstance(client, AsyncClient) else client
        self.style, self.push_wait, self.retry_wait = style, push_wait, retry_wait
        self.progress_interval, self.progress_wait_limit = progress_interval, progress_wait_limit
        self._log = log or (lambda message: print(f"urlflow_delegate: {message}", file=sys.stderr))
        self._sdk = sdk
        #: elicitation ID → the sessions owed its end (each once).
        self._owed: dict[str, list[Any]] = {}

    @property
    def sdk(self) -> Any:
        if self._sdk is None:
            self._sdk = _load_sdk()
        return self._sdk

    async def require(self, ctx: Any, need: Mapping[str, Any], *, message: str | None = None, offline: bool | None = None,
                      metadata: Mapping[str, str] | None = None, call: str | None = None) -> Requirement:
        """Returns the credential the tool's user has stored with urlflow for need, or the
        result the tool returns instead, for the calling client:

        - protocol 2026-07-28 (mcp 2.x): an input_required result with urlflow's URL and
          requestState; the client's retry comes back here, waits for the user (retry_wait,
          or with progress until the link's deadline when it carries a progress token), and
          gets the credential, the honest outcome, or input_required again;
        - 2025-11-25 with URL mode, style "push": elicitation/create and a bounded wait;
          "error": the SDK's UrlElicitationRequiredError (-32042), raised;
        - a client without URL mode: a result that tells the user to open the link.

        ctx is the tool's Context. The user is the one whose bearer token came with the call
        (the request's Authorization header, or the SDK's get_access_token()): urlflow
        checks it as the evidence of who the user is."""
        user = {"token": _bearer_token(ctx)}
        session = _session(ctx)
        body: dict[str, Any] = {"message": message, "offline": offline, "metadata": metadata, "call": call,
                                "client": _client_info(session)}
        modern = _modern(_protocol_version(ctx, session))
        state = getattr(ctx, "request_state", None) if modern else None
        retry = isinstance(state, str) and state != ""
        if retry:
            body["request_state"] = state
            body["action"] = _answered_action((getattr(ctx, "input_responses", None) or {}).get(INPUT_KEY))
        answer = await asyncio.to_thread(self.client.create, user, need, **body)
        if answer.get("status") == "stored":
            return Requirement(credential=Credential(self.client, user, need))
        e = answer.get("elicitation")
        if answer.get("status") == "ended" or not e:
            return Requirement(result=self._outcome_result(e))
        if not _url_mode(ctx, session):
            return Requirement(result=self._open_it_result(e))
        if modern and retry:
            await self._wait_for(ctx, e, self.retry_wait)
            body["action"] = None  # recorded already
            again = await asyncio.to_thread(self.client.create, user, need, **body)
            if again.get("status") == "stored":
                return Requirement(credential=Credential(self.client, user, need))
            if again.get("status") == "ended" or not again.get("elicitation"):
                return Requirement(result=self._outcome_result(again.get("elicitation")))
            return Requirement(result=self._input_required(again["elicitation"], need, again.get("requestState")))
        if modern:
            return Requirement(result=self._input_required(e, need, answer.get("requestState")))
        text = _message(need)
        if self.style == "error":
            self._owe(e["id"], session)
            params = self.sdk.types.ElicitRequestURLParams(mode="url", message=text, url=e.get("url", ""), elicitationId=e["id"])
            raise self.sdk.UrlElicitationRequiredError([params])
        return await self._push(ctx, session, user, need, e, text, body)

    async def _push(self, ctx: Any, session: Any, user: Mapping[str, str], need: Mapping[str, Any], e: Mapping[str, Any],
                    text: str, body: dict[str, Any]) -> Requirement:
        """Sends elicitation/create, reports the client's answer (consent, never success),
        waits for the user, and answers with the credential or the honest outcome."""
        eid, url = e["id"], e.get("url", "")
        self._owe(eid, session)
        try:
            res = await session.elicit_url(message=text, url=url, elicitation_id=eid, related_request_id=getattr(ctx, "request_id", None))
        except Exception as err:  # no answer is not an answer: the user may still finish
            self._log(f"elicitation/create of {eid} failed; waiting for the user anyway: {err}")
        else:
            try:
                await asyncio.to_thread(self.client.answer, eid, str(getattr(res, "action", "")))
            except UrlflowError as err:
                if err.status != 409:  # 409: the flow moved on meanwhile (the user was quicker)
                    raise
        cur = await self._wait_for(ctx, e, self.push_wait)
        if cur.get("state") not in ended_states:
            return Requirement(result=self._waiting_result({**cur, "url": cur.get("url") or url}))
        await self._settle(cur)  # the notification before the result
        if cur.get("state") != "complete":
            return Requirement(result=self._outcome_result(cur))
        again = await asyncio.to_thread(self.client.create, user, need, offline=body.get("offline"), metadata=body.get("metadata"))
        if again.get("status") != "stored":
            return Requirement(result=self._open_it_result(again.get("elicitation")))  # removed meanwhile
        return Requirement(credential=Credential(self.client, user, need))

    async def _wait_for(self, ctx: Any, e: Mapping[str, Any], bounded: float) -> dict[str, Any]:
        """Waits for the user of e: with progress notifications while the call has a
        progress token (until e ends, its deadline or progress_wait_limit), else at most
        bounded seconds."""
        if _progress_token(ctx) is None:
            return await asyncio.to_thread(self.client.wait, e["id"], bounded)
        until = time.time() + self.progress_wait_limit
        deadline = _timestamp(e.get("expiresAt"))
        if deadline is not None:
            until = min(until, deadline)
        step = 0
        while True:
            step += 1
            cur = await asyncio.to_thread(self.client.wait, e["id"], max(0.0, min(self.progress_interval, until - time.time())))
            if cur.get("state") in ended_states or time.time() >= until:
                return cur
            try:
                await ctx.report_progress(step, message=f"Waiting for you to finish in the browser: {e.get('url', '')}")
            except Exception as err:
                self._log(f"progress of {e['id']} not sent: {err}")

    def _owe(self, eid: str, session: Any) -> None:
        """Records that session is owed the end of elicitation eid (once)."""
        sessions = self._owed.setdefault(eid, [])
        if session is not None and not any(s is session for s in sessions):
            sessions.append(session)

    async def _settle(self, e: Mapping[str, Any] | None) -> None:
        """Sends the sessions owed e's end notifications/elicitation/complete, once e has ended."""
        if not e or e.get("state") not in ended_states:
            return
        for session in self._owed.pop(e.get("id", ""), []):
            try:
                await session.send_elicit_complete(e["id"])
            except Exception as err:
                self._log(f"completion of {e['id']} not sent: {err}")

    async def follow(self, stop: asyncio.Event | None = None) -> None:
        """Follows urlflow's event stream until stop is set, and sends each session the end
        of its elicitations (style "error" needs it, or webhook_handler). After a reset,
        it reads every owed elicitation again."""
        stopped = threading.Event()
        reader = AsyncClient.of(self.client)
        watcher = asyncio.ensure_future(stop.wait()) if stop is not None else None
        if watcher is not None:
            watcher.add_done_callback(lambda _: stopped.set())
        try:
            async for ev in reader.events(stop=stopped):
                if ev["type"] == "elicitation":
                    await self._settle(ev["data"].get("elicitation"))
                elif ev["type"] == "reset":
                    for eid in list(self._owed):
                        try:
                            await self._settle(await asyncio.to_thread(self.client.get, eid))
                        except UrlflowError:
                            pass
                if stopped.is_set():
                    return
        finally:
            stopped.set()
            if watcher is not None:
                watcher.cancel()

    async def on_webhook(self, hook: Mapping[str, Any]) -> None:
        """The handler for asgi_webhook_app, instead of follow: it settles the message's
        elicitation."""
        if "elicitation" in hook:
            await self._settle(hook["elicitation"])

    # -- the tool's answers instead of the credential

    def _result(self, status: str, text: str, e: Mapping[str, Any] | None = None) -> Any:
        structured: dict[str, Any] = {"status": status}
        if e:
            structured.update(elicitationId=e.get("id"), state=e.get("state"))
            if e.get("url"):
                structured.update(url=e["url"], expiresAt=e.get("expiresAt"))
        t = self.sdk.types
        return t.CallToolResult(content=[t.TextContent(type="text", text=text)], structuredContent=structured)

    def _open_it_result(self, e: Mapping[str, Any] | None) -> Any:
        if not e or not e.get("url"):
            return self._result("user_action_required", "The credential this tool needs is not available yet. Call the tool again.", e)
        return self._result("user_action_required", f"This tool needs a credential that you enter on urlflow, in your own browser. "
                            f"Open {e['url']} (you sign in there; the link alone grants nothing), then call the tool again.", e)

    def _waiting_result(self, e: Mapping[str, Any]) -> Any:
        return self._result("user_action_required", f"Still waiting for you to finish at {e.get('url')}. Call the tool again once you are done.", e)

    def _outcome_result(self, e: Mapping[str, Any] | None) -> Any:
        if not e:
            return self._result("ended", "The request for the credential ended without it. Call the tool again to ask again.")
        return self._result(e.get("state", "ended"), f"The request for the credential ended: {e.get('state')}. Nothing was stored. "
                            "Call the tool again to ask again.", e)

    def _input_required(self, e: Mapping[str, Any], need: Mapping[str, Any], request_state: str | None) -> Any:
        """The input_required result that asks a 2026-07-28 client to send its user to e:
        its URL-mode request has no elicitationId (that revision's has none)."""
        t = self.sdk.types
        params = t.ElicitRequestURLParams(mode="url", message=_message(need), url=e.get("url", ""))
        return t.InputRequiredResult(input_requests={INPUT_KEY: t.ElicitRequest(params=params)}, request_state=request_state)


def _message(need: Mapping[str, Any]) -> str:
    what = need.get("slot") or f"{need.get('provider')} account"
    return f"Open this link in your browser to provide your {what} (this tool needs it). It is entered on urlflow, never here."


def _session(ctx: Any) -> Any:
    return getattr(ctx, "session", None) or getattr(getattr(ctx, "request_context", None), "session", None)


def _headers(ctx: Any) -> Mapping[str, str]:
    """The HTTP request's headers of the call: ctx.headers (mcp 2.x), or those of
    ctx.request_context.request (mcp 1.x, a Starlette Request); empty over stdio."""
    headers = getattr(ctx, "headers", None)
    if headers is None:
        request = getattr(getattr(ctx, "request_context", None), "request", None)
        headers = getattr(request, "headers", None)
    return {k.lower(): v for k, v in (headers or {}).items()}


def _bearer_token(ctx: Any) -> str:
    """The bearer token of the call's user: the request's Authorization header, else the
    SDK's get_access_token()."""
    scheme, _, token = _headers(ctx).get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:
        get_access_token = None
    access = get_access_token() if get_access_token else None
    if access is not None and getattr(access, "token", ""):
        return access.token
    raise ValueError("urlflow_delegate: the call carries no bearer token of its user: urlflow needs it as evidence of who the user is")


def _client_params(session: Any) -> Any:
    return getattr(session, "client_params", None)


def _client_info(session: Any) -> dict[str, str] | None:
    params = _client_params(session)
    info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    if info is None:
        return None
    out = {"name": getattr(info, "name", ""), "title": getattr(info, "title", None), "version": getattr(info, "version", None)}
    return {k: v for k, v in out.items() if v}


def _url_mode(ctx: Any, session: Any) -> bool:
    """Whether the client declared URL-mode elicitation."""
    caps = getattr(ctx, "client_capabilities", None) or getattr(session, "client_capabilities", None)
    if caps is None:
        caps = getattr(_client_params(session), "capabilities", None)
    elicitation = getattr(caps, "elicitation", None)
    return getattr(elicitation, "url", None) is not None


def _protocol_version(ctx: Any, session: Any) -> str:
    """The protocol revision of the call: ctx.protocol_version (mcp 2.x), the request's
    MCP-Protocol-Version header, or what the client asked for at initialize."""
    version = getattr(ctx, "protocol_version", None) or getattr(session, "protocol_version", None)
    if isinstance(version, str) and version:
        return version
    header = _headers(ctx).get("mcp-protocol-version")
    if header:
        return header
    params = _client_params(session)
    return getattr(params, "protocol_version", None) or getattr(params, "protocolVersion", None) or ""


def _modern(version: str) -> bool:
    """Whether version (a protocol revision, a date) is 2026-07-28 or later."""
    return len(version) == 10 and version[4] == "-" and version[7] == "-" and version.replace("-", "").isdigit() and version >= FIRST_MODERN_VERSION


def _answered_action(response: Any) -> str | None:
    """The client's answer to the input request (an ElicitResult, or its dict), if it is one."""
    action = response.get("action") if isinstance(response, dict) else getattr(response, "action", None)
    return action if action in ("accept", "decline", "cancel") else None


def _progress_token(ctx: Any) -> Any:
    meta = getattr(getattr(ctx, "request_context", None), "meta", None)
    if isinstance(meta, dict):
        return meta.get("progressToken")
    return getattr(meta, "progressToken", None) or getattr(meta, "progress_token", None)


def _timestamp(value: Any) -> float | None:
    """The Unix time of an RFC 3339 timestamp of urlflow's, or None."""
    if not isinstance(value, str) or not value:
        return None
    from datetime import datetime

    text = value.replace("Z", "+00:00")
    if "." in text:  # Python 3.10 reads at most six digits of a fraction
        head, _, rest = text.partition(".")
        digits = "".join(ch for ch in rest if ch.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits):]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
