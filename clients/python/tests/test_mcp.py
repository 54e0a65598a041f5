"""Delegation.require with fakes of the MCP Python SDK: the `mcp` package cannot be
installed on the machine that runs these tests (no package index is reachable), so these
fakes follow its published API (mcp 1.23+ FastMCP Context and ServerSession, mcp 2.x
MCPServer Context: names read from modelcontextprotocol/python-sdk v1.29.0 and v2.0.0) and
stand in for it. The client side runs against a fake urlflow too; the real urlflow is the
conformance suite's (clients/conformance)."""

import asyncio
import os
import sys
import types
import unittest
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import urlflow_delegate as uf  # noqa: E402


class Model:
    """A stand-in for the SDK's pydantic models: keeps its keyword arguments."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)


class UrlElicitationRequiredError(Exception):
    def __init__(self, elicitations, message=None):
        super().__init__(message or "URL elicitation required")
        self.elicitations = elicitations
        self.code = -32042


SDK = types.SimpleNamespace(
    types=types.SimpleNamespace(CallToolResult=Model, TextContent=Model, ElicitRequestURLParams=Model, ElicitRequest=Model,
                                InputRequiredResult=Model),
    UrlElicitationRequiredError=UrlElicitationRequiredError,
)


def later(seconds=600):
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


class FakeUrlflow:
    """Answers creates with the next of creates, and waits with the elicitation in wait_state."""

    def __init__(self, creates, wait_state="pending"):
        self.creates, self.wait_state, self.calls = list(creates), wait_state, []

    def elicitation(self, state):
        return {"id": "E1", "state": state, "url": "http://urlflow/e/E1", "expiresAt": later()}

    def create(self, user, need, **body):
        self.calls.append(("create", user, dict(need), body))
        status, state = self.creates.pop(0)
        answer = {"status": status, "requestState": f"RS{len(self.calls)}", "new": True}
        if status != "stored":
            answer["elicitation"] = self.elicitation(state)
        return answer

    def answer(self, eid, action):
        self.calls.append(("answer", eid, action))
        return self.elicitation("consented")

    def wait(self, eid, timeout):
        self.calls.append(("wait", eid, timeout))
        return self.elicitation(self.wait_state)

    def get(self, eid):
        return self.elicitation(self.wait_state)


class FakeSession:
    """mcp's ServerSession: client_params from initialize, elicit_url, send_elicit_complete."""

    def __init__(self, url_mode=True, version="2025-11-25", action="accept"):
        caps = types.SimpleNamespace(elicitation=types.SimpleNamespace(url=object() if url_mode else None, form=object()))
        self.client_params = types.SimpleNamespace(capabilities=caps, clientInfo=types.SimpleNamespace(name="probe", version="1"),
                                                   protocolVersion=version)
        self.action, self.asked, self.completed = action, [], []

    async def elicit_url(self, message, url, elicitation_id, related_request_id=None):
        self.asked.append({"message": message, "url": url, "elicitation_id": elicitation_id, "related_request_id": related_request_id})
        return types.SimpleNamespace(action=self.action)

    async def send_elicit_complete(self, elicitation_id, related_request_id=None):
        self.completed.append(elicitation_id)


def ctx_v1(session, token="user-token", progress=None):
    """mcp 1.x FastMCP Context: the request's headers on request_context.request."""
    request = types.SimpleNamespace(headers={"Authorization": f"Bearer {token}"} if token else {})
    meta = types.SimpleNamespace(progressToken=progress)
    progress_sent = []

    async def report_progress(progress, total=None, message=None):
        progress_sent.append(message)

    return types.SimpleNamespace(session=session, request_id="7", request_context=types.SimpleNamespace(request=request, meta=meta, session=session),
                                 report_progress=report_progress, progress_sent=progress_sent)


def ctx_v2(url_mode=True, state=None, responses=None, version="2026-07-28"):
    """mcp 2.x MCPServer Context: headers, protocol_version, client_capabilities, request_state, input_responses."""
    caps = types.SimpleNamespace(elicitation=types.SimpleNamespace(url=object() if url_mode else None))
    session = types.SimpleNamespace(client_params=None, client_capabilities=caps)
    return types.SimpleNamespace(session=session, headers={"authorization": "Bearer user-token"}, protocol_version=version,
                                 client_capabilities=caps, request_state=state, input_responses=responses, request_id="9",
                                 request_context=types.SimpleNamespace(meta=None, session=session))


NEED = {"slot": "demo_api_key"}


def run(coro):
    return asyncio.run(coro)


class RequireTest(unittest.TestCase):
    def delegation(self, urlflow, **kwargs):
        return uf.Delegation(urlflow, sdk=SDK, log=lambda m: None, **kwargs)

    def test_a_stored_credential_is_returned_at_once(self):
        u = FakeUrlflow([("stored", None)])
        req = run(self.delegation(u).require(ctx_v1(FakeSession()), NEED, call="forecast:x"))
        self.assertIsNotNone(req.credential)
        _, user, need, body = u.calls[0]
        self.assertEqual(user, {"token": "user-token"})
        self.assertEqual(body["call"], "forecast:x")
        self.assertEqual(body["client"], {"name": "probe", "version": "1"})

    def test_a_2025_push_asks_reports_the_answer_waits_and_notifies_before_the_result(self):
        u = FakeUrlflow([("user_action_required", "pending"), ("stored", None)], wait_state="complete")
        session = FakeSession()
        req = run(self.delegation(u).require(ctx_v1(session), NEED))
        self.assertIsNotNone(req.credential)
        self.assertEqual(session.asked[0]["elicitation_id"], "E1")
        self.assertEqual(session.asked[0]["related_request_id"], "7")
        self.assertIn(("answer", "E1", "accept"), u.calls)
        self.assertEqual(session.completed, ["E1"])

    def test_a_declined_push_is_the_honest_outcome(self):
        u = FakeUrlflow([("user_action_required", "pending")], wait_state="declined")
        req = run(self.delegation(u).require(ctx_v1(FakeSession(action="decline")), NEED))
        self.assertEqual(req.result.structuredContent["state"], "declined")
        self.assertIn("Nothing was stored", req.result.content[0].text)

    def test_a_call_with_a_progress_token_waits_with_progress(self):
        u = FakeUrlflow([("user_action_required", "pending"), ("stored", None)])
        states = iter(["pending", "pending", "complete"])
        u.wait = lambda eid, timeout: u.elicitation(next(states))
        ctx = ctx_v1(FakeSession(), progress="p1")
        req = run(self.delegation(u, progress_interval=0.01).require(ctx, NEED))
        self.assertIsNotNone(req.credential)
        self.assertEqual(len(ctx.progress_sent), 2)
        self.assertIn("http://urlflow/e/E1", ctx.progress_sent[0])

    def test_the_error_style_raises_minus_32042_and_the_webhook_settles_it(self):
        u = FakeUrlflow([("user_action_required", "pending")])
        session = FakeSession()
        d = self.delegation(u, style="error")
        with self.assertRaises(UrlElicitationRequiredError) as cm:
            run(d.require(ctx_v1(session), NEED))
        p = cm.exception.elicitations[0]
        self.assertEqual((p.mode, p.url, p.elicitationId), ("url", "http://urlflow/e/E1", "E1"))
        run(d.on_webhook({"id": "msg", "type": "elicitation.complete", "elicitation": {"id": "E1", "state": "complete"}}))
        run(d.on_webhook({"id": "msg", "type": "elicitation.complete", "elicitation": {"id": "E1", "state": "complete"}}))
        self.assertEqual(session.completed, ["E1"])  # once

    def test_without_url_mode_the_user_is_told_to_open_the_link(self):
        for ctx in (ctx_v1(FakeSession(url_mode=False)), ctx_v2(url_mode=False)):
            u = FakeUrlflow([("user_action_required", "pending")])
            req = run(self.delegation(u).require(ctx, NEED))
            self.assertEqual(req.result.structuredContent["status"], "user_action_required")
            self.assertIn("Open http://urlflow/e/E1", req.result.content[0].text)

    def test_a_2026_call_gets_input_required_with_urlflows_request_state(self):
        u = FakeUrlflow([("user_action_required", "pending")])
        req = run(self.delegation(u).require(ctx_v2(), NEED))
        r = req.result
        self.assertEqual(r.request_state, "RS1")
        params = r.input_requests["auth"].params
        self.assertEqual((params.mode, params.url), ("url", "http://urlflow/e/E1"))
        self.assertFalse(hasattr(params, "elicitationId"))
        self.assertIsNone(u.calls[0][3].get("request_state"))

    def test_a_2026_retry_sends_the_state_and_answer_waits_and_gets_the_credential(self):
        u = FakeUrlflow([("user_action_required", "consented"), ("stored", None)], wait_state="complete")
        answer = types.SimpleNamespace(action="accept")
        req = run(self.delegation(u, retry_wait=3).require(ctx_v2(state="RS1", responses={"auth": answer}), NEED))
        self.assertIsNotNone(req.credential)
        first, wait, second = u.calls
        self.assertEqual((first[3]["request_state"], first[3]["action"]), ("RS1", "accept"))
        self.assertEqual(wait, ("wait", "E1", 3))
        self.assertIsNone(second[3]["action"])

    def test_a_2026_retry_whose_user_is_not_done_gets_input_required_again(self):
        u = FakeUrlflow([("user_action_required", "consented"), ("user_action_required", "consented")])
        req = run(self.delegation(u, retry_wait=0).require(ctx_v2(state="RS1", responses={"auth": {"action": "bogus"}}), NEED))
        self.assertEqual(req.result.request_state, "RS3")
        self.assertIsNone(u.calls[0][3]["action"])  # not an answer of the three

    def test_nothing_is_asked_without_the_users_token(self):
        u = FakeUrlflow([])
        with self.assertRaisesRegex(ValueError, "no bearer token"):
            run(self.delegation(u).require(ctx_v1(FakeSession(), token=""), NEED))
        self.assertEqual(u.calls, [])

    def test_call_of_names_the_tool_and_its_arguments_whatever_their_order(self):
        self.assertEqual(uf.call_of("forecast", {"city": "Paris", "days": 2}), uf.call_of("forecast", {"days": 2, "city": "Paris"}))
        self.assertNotEqual(uf.call_of("forecast", {"city": "Paris"}), uf.call_of("forecast", {"city": "Lyon"}))
        self.assertEqual(len(uf.call_of("x" * 300, {})), 200)


if __name__ == "__main__":
    unittest.main()


class FollowTest(unittest.TestCase):
    def test_follow_tells_each_owed_session_the_end_once_and_rereads_after_a_reset(self):
        u = FakeUrlflow([("user_action_required", "pending"), ("user_action_required", "pending")])
        d = uf.Delegation(u, style="error", sdk=SDK, log=lambda m: None)
        first, second = FakeSession(), FakeSession()
        for session in (first, second):
            with self.assertRaises(UrlElicitationRequiredError):
                run(d.require(ctx_v1(session), NEED))
        u.wait_state = "complete"  # what get answers after the reset

        def events(last_event_id="", *, stop=None, **kwargs):
            yield {"type": "elicitation", "id": "1-0", "data": {"to": "pending", "elicitation": {"id": "E1", "state": "pending"}}}
            yield {"type": "reset", "id": "2-0"}
            yield {"type": "elicitation", "id": "3-0", "data": {"to": "complete", "elicitation": {"id": "E1", "state": "complete"}}}
            stop.wait(5)

        u.events = events

        async def follow_a_while():
            stop = asyncio.Event()
            task = asyncio.ensure_future(d.follow(stop))
            for _ in range(100):
                await asyncio.sleep(0.02)
                if first.completed:
                    break
            stop.set()
            await asyncio.wait_for(task, 5)

        run(follow_a_while())
        self.assertEqual(first.completed, ["E1"])  # after the reset, read again; not again on the later event
        self.assertEqual(second.completed, ["E1"])
