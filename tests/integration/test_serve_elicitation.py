"""MCP elicitation end to end: a real ``avm serve`` (echo model), the reference server
``@modelcontextprotocol/server-everything`` from npm over stdio (its ``trigger-elicitation-request``
tool, offered only to clients that declare elicitation), and the typed SDK answering its question.
The tool's result, which the echo model repeats, shows what the server received: the accepted
content, a decline, or the cancel sent at the deadline. Another tenant's answer (WebSocket and
HTTP) reads exactly like an answer to an id that does not exist."""

from __future__ import annotations

import httpx
import pytest

from agentvm.client import (
    AgentVMClient,
    RequestFailed,
    ToolElicitationEndedEvent,
    ToolElicitationEvent,
)
from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm
from tests.integration.test_mcp_events import everything_config

ASK = "/tool trigger-elicitation-request {}"
SLOW_START = {"AVM_MCP_LIST_DEADLINE_S": "30"}  # a busy machine starts the npm server slowly


async def test_a_question_of_server_everything_is_answered_through_the_sdk(tmp_path):
    servers = {"everything": everything_config()}
    made = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    other_tenant = made.stdout.strip()
    with avm_serve(tmp_path, free_port(), env=base_env(**SLOW_START)) as server:
        admin = server.admin_token()
        async with (
            AgentVMClient.connect(server.url, token=admin) as client,
            AgentVMClient.connect(server.url, token=other_tenant) as stranger,
            httpx.AsyncClient(base_url=server.http, timeout=30) as http,
        ):
            image = await client.create_image("u1", mcp_servers=servers)
            turn = client.send(image.imageId, ASK, timeout=120)
            async for event in turn:
                if not isinstance(event, ToolElicitationEvent):
                    continue
                question = event.data
                assert question.toolName == "trigger-elicitation-request" and question.mode == "form"
                assert question.requestedSchema is not None and question.requestedSchema["required"] == [
                    "name"
                ]
                assert "email" in question.requestedSchema["properties"]

                # another tenant: refused exactly like a missing id, over the WebSocket and HTTP
                refusals = []
                for elicitation_id in (question.elicitationId, "elicit_missing_0000"):
                    with pytest.raises(RequestFailed) as refused:
                        await stranger.answer_elicitation(elicitation_id, "accept", {"name": "Mallory"})
                    r = await http.post(
                        f"/v1/elicitations/{elicitation_id}",
                        json={"action": "decline"},
                        headers={"Authorization": f"Bearer {other_tenant}"},
                    )
                    refusals.append(
                        (
                            refused.value.code,
                            str(refused.value).replace(elicitation_id, "X"),
                            r.status_code,
                            r.text.replace(elicitation_id, "X"),
                        )
                    )
                assert refusals[0] == refusals[1] and refusals[0][0] == "not_found" and refusals[0][2] == 404

                # content that does not fit the server's schema: refused, the question stays open
                with pytest.raises(RequestFailed) as bad:
                    await client.answer_elicitation(event, "accept", {"name": "Ada", "email": "not an email"})
                assert bad.value.code == "bad_request" and "email" in str(bad.value)
                answered = await client.answer_elicitation(
                    event,
                    "accept",
                    {"name": "Ada Lovelace", "check": True, "integer": 7, "email": "ada@example.com"},
                )
                assert answered.action == "accept"

            assert turn.end_reason == "completed", turn.events
            assert "User provided the requested information" in turn.text
            assert "Name: Ada Lovelace" in turn.text and "Favorite Integer: 7" in turn.text
            [ended] = [e for e in turn.events if isinstance(e, ToolElicitationEndedEvent)]
            assert (ended.data.action, ended.data.reason) == ("accept", "answered")

            # declined over HTTP by the image's own tenant
            declined = client.send(image.imageId, ASK, timeout=120)
            async for event in declined:
                if isinstance(event, ToolElicitationEvent):
                    r = await http.post(
                        f"/v1/elicitations/{event.data.elicitationId}",
                        json={"action": "decline"},
                        headers={"Authorization": f"Bearer {admin}"},
                    )
                    assert r.status_code == 200 and r.json() == {
                        "elicitationId": event.data.elicitationId,
                        "action": "decline",
                    }
            assert "User declined to provide the requested information" in declined.text


async def test_an_unanswered_question_of_server_everything_is_cancelled_at_the_deadline(tmp_path):
    servers = {"everything": everything_config()}
    env = base_env(AVM_MCP_ELICITATION_TIMEOUT_S="1", **SLOW_START)
    with avm_serve(tmp_path, free_port(), env=env) as server:
        async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
            image = await client.create_image("u1", mcp_servers=servers)
            turn = await client.send(image.imageId, ASK, timeout=120)
    kinds = [type(e) for e in turn.events]
    assert ToolElicitationEvent in kinds
    [ended] = [e for e in turn.events if isinstance(e, ToolElicitationEndedEvent)]
    assert (ended.data.action, ended.data.reason) == ("cancel", "timed_out")
    assert "User cancelled the elicitation dialog" in turn.text


async def test_a_question_on_one_worker_is_answered_through_the_other(tmp_path):
    """Two ``avm serve`` workers on one data dir (real processes): the turn, and the call of the test
    server's ``ask`` tool (official SDK, stdio), runs on w0; the client answers over HTTP on w1. The
    answer is a row of the shared SQLite file, which w0 reads at its next poll (0.25 s)."""
    from tests.integration.test_serve_workers import two_workers
    from tests.mcp_servers.fixtures import stdio_config

    ask = '/tool ask {"question": "Who are you?"}'
    with two_workers(tmp_path, **SLOW_START) as (w0, w1):
        async with (
            AgentVMClient.connect(w0.url) as client,
            httpx.AsyncClient(base_url=w1.http, timeout=30) as on_w1,
        ):
            image = await client.create_image("u1", mcp_servers={"people": stdio_config()})
            turn = client.send(image.imageId, ask, timeout=120)
            async for event in turn:
                if not isinstance(event, ToolElicitationEvent):
                    continue
                url = f"/v1/elicitations/{event.data.elicitationId}"
                bad = await on_w1.post(url, json={"action": "accept", "content": {"name": "Ada", "age": -1}})
                assert bad.status_code == 400 and "schema" in bad.text  # checked on w1, still open
                answered = await on_w1.post(
                    url, json={"action": "accept", "content": {"name": "Ada", "age": 36}}
                )
                assert answered.status_code == 200, answered.text
                again = await on_w1.post(url, json={"action": "decline"})
                assert again.status_code == 404  # taken once
            assert turn.end_reason == "completed", turn.events
            assert "accepted: Ada, 36" in turn.text
            [ended] = [e for e in turn.events if isinstance(e, ToolElicitationEndedEvent)]
            assert (ended.data.action, ended.data.reason) == ("accept", "answered")
            late = await on_w1.post(url, json={"action": "decline"})
            assert late.status_code == 404 and "elicit_" in late.text  # the wait ended: refused
