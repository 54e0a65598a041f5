"""Webhook verification and the WSGI and ASGI webhook apps."""

import asyncio
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import urlflow_delegate as uf  # noqa: E402

# The Standard Webhooks test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TS = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

BODY = b'{"type":"elicitation.complete","data":{"elicitation":{"id":"E1","state":"complete"}}}'


def headers(msg_id, ts, body, secret=VECTOR_SECRET):
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": uf.sign(uf.parse_secret(secret), msg_id, ts, body)}


class VerifierTest(unittest.TestCase):
    def test_the_standard_vector_signs_as_the_standard_says(self):
        self.assertEqual(uf.sign(uf.parse_secret(VECTOR_SECRET), VECTOR_ID, VECTOR_TS, VECTOR_BODY), VECTOR_SIGNATURE)

    def test_a_valid_message_verifies_once_and_its_replay_is_refused(self):
        v = uf.WebhookVerifier([VECTOR_SECRET], now=lambda: 1000)
        hook = v.verify(headers("msg_1", 1000, BODY), BODY)
        self.assertEqual(hook, {"id": "msg_1", "type": "elicitation.complete", "elicitation": {"id": "E1", "state": "complete"}})
        with self.assertRaises(uf.WebhookError) as cm:
            v.verify(headers("msg_1", 1000, BODY), BODY)
        self.assertEqual(cm.exception.kind, "replayed")
        v.forget("msg_1")
        v.verify(headers("msg_1", 1000, BODY), BODY)

    def test_tampered_forged_stale_and_unsigned_messages_are_refused(self):
        v = uf.WebhookVerifier([VECTOR_SECRET], now=lambda: 1000)
        other = "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
        for name, (h, body, kind) in {
            "tampered": (headers("m1", 1000, BODY), BODY.replace(b"E1", b"E2"), "signature"),
            "forged": (headers("m2", 1000, BODY, other), BODY, "signature"),
            "stale": (headers("m3", 699, BODY), BODY, "stale"),
            "future": (headers("m4", 1301, BODY), BODY, "stale"),
            "unsigned": ({"webhook-id": "m5", "webhook-timestamp": "1000"}, BODY, "signature"),
            "no timestamp": ({"webhook-id": "m6", "webhook-signature": "v1,x"}, BODY, "signature"),
        }.items():
            with self.subTest(name), self.assertRaises(uf.WebhookError) as cm:
                v.verify(h, body)
            self.assertEqual(cm.exception.kind, kind, name)
        v.verify(headers("m7", 700, BODY), BODY)  # at the tolerance's edge

    def test_either_secret_verifies_while_they_rotate(self):
        new = "whsec_" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJC"
        v = uf.WebhookVerifier([VECTOR_SECRET, new], now=lambda: 1000)
        v.verify(headers("m1", 1000, BODY, new), BODY)
        both = headers("m2", 1000, BODY)["webhook-signature"] + " " + headers("m2", 1000, BODY, new)["webhook-signature"]
        v.verify({"Webhook-Id": "m2", "Webhook-Timestamp": "1000", "Webhook-Signature": both}, BODY)

    def test_a_body_that_is_not_urlflows_is_refused(self):
        v = uf.WebhookVerifier([VECTOR_SECRET], now=lambda: VECTOR_TS)
        with self.assertRaisesRegex(ValueError, "not urlflow's"):
            v.verify({"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TS), "webhook-signature": VECTOR_SIGNATURE}, VECTOR_BODY)

    def test_secrets_that_are_not_whsec_and_24_to_64_bytes_are_refused(self):
        for secret in ["", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2hvcnQ=", "whsec_!!!!" + "A" * 40, "whsec_" + "QUFB" * 30]:
            with self.subTest(secret), self.assertRaises(ValueError):
                uf.parse_secret(secret)
        with self.assertRaises(ValueError):
            uf.WebhookVerifier([])


class AppsTest(unittest.TestCase):
    def wsgi(self, app, method, h, body):
        environ = {"REQUEST_METHOD": method, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
        environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in h.items()})
        status = []
        app(environ, lambda s, hs: status.append(s))
        return status[0]

    def test_the_wsgi_app_answers_204_401_a_replay_204_once_and_500_when_handling_fails(self):
        v = uf.WebhookVerifier([VECTOR_SECRET], now=lambda: 1000)
        handed, fail = [], [True]

        def on_webhook(hook):
            if fail[0]:
                fail[0] = False
                raise RuntimeError("down")
            handed.append(hook["id"])

        app = uf.wsgi_webhook_app(v, on_webhook)
        h = headers("m1", 1000, BODY)
        self.assertTrue(self.wsgi(app, "POST", h, BODY).startswith("500"))
        self.assertTrue(self.wsgi(app, "POST", h, BODY).startswith("204"))  # the next attempt is handed over
        self.assertTrue(self.wsgi(app, "POST", h, BODY).startswith("204"))  # a replay: not again
        self.assertEqual(handed, ["m1"])
        self.assertTrue(self.wsgi(app, "POST", h, BODY + b" ").startswith("401"))
        self.assertTrue(self.wsgi(app, "GET", h, b"").startswith("405"))

    def test_the_asgi_app_awaits_a_coroutine_handler(self):
        v = uf.WebhookVerifier([VECTOR_SECRET], now=lambda: 1000)
        handed = []

        async def on_webhook(hook):
            handed.append(hook["id"])

        app = uf.asgi_webhook_app(v, on_webhook)

        async def call(h, body, method="POST"):
            sent = []
            chunks = [{"body": body[:10], "more_body": True}, {"body": body[10:]}]

            async def receive():
                return chunks.pop(0)

            async def send(message):
                sent.append(message)

            scope = {"type": "http", "method": method, "headers": [(k.encode(), v.encode()) for k, v in h.items()]}
            await app(scope, receive, send)
            return sent[0]["status"]

        h = headers("m1", 1000, BODY)
        self.assertEqual(asyncio.run(call(h, BODY)), 204)
        self.assertEqual(asyncio.run(call(h, BODY)), 204)
        self.assertEqual(asyncio.run(call(headers("m2", 1000, BODY), BODY + b"x")), 401)
        self.assertEqual(handed, ["m1"])


if __name__ == "__main__":
    unittest.main()
