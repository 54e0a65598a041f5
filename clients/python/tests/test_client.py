"""The API client against a stand-in urlflow (http.server): retries, keys, waits, events."""

import json
import os
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import urlflow_delegate as uf  # noqa: E402


class StandIn:
    """A stand-in urlflow: answers come from handle(handler) -> (status, headers, body);
    every request is recorded."""

    def __init__(self, handle):
        self.requests = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stand_in.requests.append((self.command, self.path, self.headers, body))  # any case
                status, headers, out = handle(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if not isinstance(out, (bytes, list)):
                    out = json.dumps(out).encode()
                if isinstance(out, list):  # a stream: written as it is, then closed
                    self.end_headers()
                    for chunk in out:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    return
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


JSON = {"Content-Type": "application/json"}


class ClientTest(unittest.TestCase):
    def stand_in(self, handle):
        s = StandIn(handle)
        self.addCleanup(s.close)
        return s, uf.Client(s.url, "urlflow_sk_test")

    def test_a_create_sent_again_after_a_429_carries_the_same_idempotency_key_and_the_users_token(self):
        calls = []

        def handle(h):
            calls.append(1)
            if len(calls) == 1:
                return 429, {"Retry-After": "1", **JSON}, {"error": "slow down"}
            return 201, JSON, {"status": "user_action_required", "elicitation": {"id": "E1", "state": "pending"}}

        s, c = self.stand_in(handle)
        start = time.monotonic()
        answer = c.create({"token": "tok"}, {"slot": "demo_api_key"}, message="why", call="forecast:x")
        self.assertGreaterEqual(time.monotonic() - start, 0.9)
        self.assertTrue(answer["new"])
        (_, _, h1, b1), (_, _, h2, b2) = s.requests
        self.assertEqual(h1["Idempotency-Key"], h2["Idempotency-Key"])
        self.assertEqual(h1["Urlflow-User-Token"], "tok")
        self.assertEqual(json.loads(b2), {"slot": "demo_api_key", "message": "why", "call": "forecast:x"})

    def test_a_refusal_is_a_urlflow_error_with_its_reason(self):
        s, c = self.stand_in(lambda h: (409, JSON, {"error": "not stored", "reason": "not_stored"}))
        with self.assertRaises(uf.UrlflowError) as cm:
            c.proxy({"ref": "usr_1"}, {"slot": "demo_api_key"}, "GET", "/whoami")
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "not_stored"))
        self.assertEqual(json.loads(s.requests[0][3])["userRef"], "usr_1")

    def test_a_redirect_is_not_followed_with_the_key(self):
        s, c = self.stand_in(lambda h: (302, {"Location": "http://127.0.0.1:9/elsewhere"}, b""))
        with self.assertRaises(uf.UrlflowError) as cm:
            c.get("E1")
        self.assertEqual(cm.exception.status, 302)
        self.assertEqual(len(s.requests), 1)

    def test_a_wait_under_a_second_is_a_pause_and_one_read(self):
        s, c = self.stand_in(lambda h: (200, JSON, {"id": "E1", "state": "pending"}))
        start = time.monotonic()
        self.assertEqual(c.wait("E1", timeout=0.3)["state"], "pending")
        self.assertGreaterEqual(time.monotonic() - start, 0.25)
        self.assertEqual([r[1] for r in s.requests], ["/api/v1/elicitations/E1"])

    def test_the_event_stream_resumes_after_the_last_event_read_and_tells_a_reset(self):
        streams = [
            [b": hello\n\n", b"id: 1-0\nevent: elicitation\ndata: {\"to\": \"pending\", \"elicitation\": {\"id\": \"E1\"}}\n\n",
             b"id: 2-0\nevent: later-type\ndata: {}\n\n"],
            [b"id: 3-0\nevent: reset\ndata: {\"reason\": \"gone\"}\n\n",
             b"id: 4-0\nevent: credential\ndata: {\"type\": \"credential.stored\"}\n\n"],
        ]

        def handle(h):
            return 200, {"Content-Type": "text/event-stream"}, streams.pop(0) if streams else []

        s, c = self.stand_in(handle)
        stop = threading.Event()
        got = []
        for ev in c.events("0-1", stop=stop, reconnect=0.05):
            got.append((ev["type"], ev["id"]))
            if len(got) == 3:
                stop.set()
        self.assertEqual(got, [("elicitation", "1-0"), ("reset", "3-0"), ("credential", "4-0")])
        self.assertEqual(s.requests[0][2].get("Last-Event-ID"), "0-1")
        self.assertEqual(s.requests[1][2].get("Last-Event-ID"), "2-0")  # also past a type it skips

    def test_a_refused_stream_is_raised_not_retried(self):
        s, c = self.stand_in(lambda h: (401, JSON, {"error": "not a key"}))
        with self.assertRaises(uf.UrlflowError) as cm:
            next(c.events())
        self.assertEqual(cm.exception.status, 401)
        self.assertEqual(len(s.requests), 1)

    def test_retry_after_reads_seconds_and_dates(self):
        self.assertEqual(uf.retry_after("3", 0), 3)
        self.assertEqual(uf.retry_after("3600", 0), uf.MAX_RATE_LIMIT_WAIT + 1)
        self.assertEqual(uf.retry_after(None, 2), 4)
        self.assertAlmostEqual(uf.retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 0, now=4), 6)

    def test_the_async_client_runs_the_same_calls(self):
        import asyncio

        s = StandIn(lambda h: (200, JSON, {"id": "E1", "state": "complete"}))
        self.addCleanup(s.close)
        e = asyncio.run(uf.AsyncClient(s.url, "k").get("E1"))
        self.assertEqual(e["state"], "complete")


if __name__ == "__main__":
    unittest.main()
