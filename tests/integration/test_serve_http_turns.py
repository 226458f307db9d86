"""Turns over plain HTTP (api/http_turns.py, docs/http.md) on a real ``avm serve`` (a subprocess on
loopback, the echo model): Debian's ``curl -N`` and httpx stream a turn as server-sent events, a
stream cut mid-turn resumes with ``Last-Event-ID`` (nothing lost, nothing twice), a retried POST with
the same ``Idempotency-Key`` runs the turn once, an HTTP interrupt stops a turn, a wrong key is
``401`` and another tenant's session ``404`` exactly like a missing one."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.avm_process import AvmServer

SSE = {"Accept": "text/event-stream"}
LONG = " ".join(f"word{i}" for i in range(60))  # the echo model streams it word by word, 40 ms apart


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[AvmServer, str, str]]:
    """A real ``avm serve`` (echo words 40 ms apart), its admin key, and a client key of tenant acme."""
    data = tmp_path_factory.mktemp("avm")
    made = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    with avm_serve(data, free_port(), env=base_env(AVM_ECHO_DELAY_MS="40")) as server:
        yield server, server.admin_token(), made.stdout.strip()


def new_session(server: AvmServer, token: str) -> str:
    async def create() -> str:
        async with AgentVMClient.connect(server.url, token=token) as client:
            return (await client.create_image("user-alice", name="http turns")).sessionId

    return asyncio.run(create())


def parse(text: str) -> list[dict[str, Any]]:
    """Server-sent events: each with its id (None: none), event name and data (parsed)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":") and ": " in line:
                name, value = line.split(": ", 1)
                fields[name] = value
        if "data" in fields:
            events.append(
                {
                    "id": int(fields["id"]) if "id" in fields else None,
                    "event": fields.get("event"),
                    "data": json.loads(fields["data"]),
                }
            )
    return events


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["data"]["text"] for e in events if e["event"] == "text_delta")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_streams_a_turn_as_server_sent_events(served) -> None:
    server, token, _ = served
    made = subprocess.run(
        [
            "curl",
            "-sS",
            "--fail-with-body",
            "-X",
            "POST",
            f"{server.http}/v1/containers/user-curl/sessions",
            "-H",
            f"Authorization: Bearer {token}",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"name": "Helper", "systemPrompt": "Be brief."}',
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    created = json.loads(made.stdout)
    assert (created["containerId"], created["name"]) == ("user-curl", "Helper")
    session = created["sessionId"]
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-N",
            "--fail-with-body",
            "-X",
            "POST",
            f"{server.http}/v1/sessions/{session}/turns",
            "-H",
            f"Authorization: Bearer {token}",
            "-H",
            "Accept: text/event-stream",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"message": "hello over curl"}',
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    events = parse(out.stdout)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "message_persisted" and kinds[-1] == "conversation_end", kinds
    assert "message_start" in kinds and "assistant_message" in kinds
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids)) and None not in ids  # each event once, in order, with its seq as id
    assert text_of(events) == "Echo: hello over curl"
    [reply] = [e["data"]["data"] for e in events if e["event"] == "assistant_message"]
    assert reply["usage"]["outputTokens"] > 0  # the turn's usage comes with its reply
    assert all(e["data"]["context"]["sessionId"] == session for e in events)


async def test_a_stream_cut_mid_turn_resumes_after_its_last_event_id(served) -> None:
    server, token, _ = served
    session = await asyncio.to_thread(new_session, server, token)
    first: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=server.http, headers=auth(token), timeout=30) as http:
        async with http.stream(
            "POST", f"/v1/sessions/{session}/turns", json={"message": LONG}, headers=SSE
        ) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            buffer = ""
            async for chunk in r.aiter_text():
                buffer += chunk
                first = parse(buffer[: buffer.rfind("\n\n") + 2])
                if sum(e["event"] == "text_delta" for e in first) >= 3:
                    break  # the client's connection drops mid-turn
        cut = first[-1]["id"]
        assert "conversation_end" not in [e["event"] for e in first]
        resumed = await http.get(f"/v1/sessions/{session}/events", headers={"Last-Event-ID": str(cut)})
        assert resumed.status_code == 200
        rest = parse(resumed.text)
        # and the whole turn, read afterwards from its start, is what the two halves make together
        start = first[0]["id"] - 1
        whole = parse((await http.get(f"/v1/sessions/{session}/events?after={start}")).text)
    assert rest and all(e["id"] > cut for e in rest)  # nothing twice
    assert rest[-1]["event"] == "conversation_end"
    assert text_of(first) + text_of(rest) == f"Echo: {LONG}" == text_of(whole)  # nothing lost
    assert {e["event"] for e in whole} >= {e["event"] for e in first + rest} - {"text_delta"}


async def test_a_retried_post_with_the_same_idempotency_key_runs_the_turn_once(served) -> None:
    server, token, _ = served
    session = await asyncio.to_thread(new_session, server, token)
    key = {"Idempotency-Key": "order-42"}
    async with httpx.AsyncClient(base_url=server.http, headers=auth(token), timeout=30) as http:
        url = f"/v1/sessions/{session}/turns"
        once = await http.post(url, json={"message": "pay once"}, headers=key)
        again = await http.post(url, json={"message": "pay once"}, headers=key)
        streamed = await http.post(url, json={"message": "pay once"}, headers={**key, **SSE})
        everything = parse((await http.get(f"/v1/sessions/{session}/events")).text)
        bad = await http.post(url, json={"message": "x", "requestId": "other"}, headers=key)
    assert once.status_code == 200 and once.json()["created"] is True
    assert once.json()["status"] == "completed" and once.json()["reply"] == "Echo: pay once"
    assert again.json() == {**once.json(), "created": False}  # the same turn, not run again
    assert streamed.headers["x-turn-id"] == once.json()["turnId"]
    assert text_of(parse(streamed.text)) == "Echo: pay once"  # the first request's turn, streamed
    assert [e["event"] for e in everything].count("message_persisted") == 1  # one user message, one turn
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "bad_request")


async def test_json_without_waiting_answers_202_with_where_to_stream(served) -> None:
    server, token, _ = served
    session = await asyncio.to_thread(new_session, server, token)
    async with httpx.AsyncClient(base_url=server.http, headers=auth(token), timeout=30) as http:
        started = await http.post(f"/v1/sessions/{session}/turns?wait=0", json={"message": LONG})
        assert started.status_code == 202, started.text
        body = started.json()
        assert body["status"] in {"queued", "running"}
        assert started.headers["location"] == f"/v1/sessions/{session}/events"
        streamed = await http.get(
            started.headers["location"], headers={"Last-Event-ID": str(body["lastEventId"])}
        )
    events = parse(streamed.text)
    assert events[0]["event"] == "message_persisted" and events[-1]["event"] == "conversation_end"
    assert text_of(events) == f"Echo: {LONG}"


async def test_an_http_interrupt_stops_the_streaming_turn(served) -> None:
    server, token, _ = served
    session = await asyncio.to_thread(new_session, server, token)
    async with httpx.AsyncClient(base_url=server.http, headers=auth(token), timeout=30) as http:
        events: list[dict[str, Any]] = []
        async with http.stream(
            "POST", f"/v1/sessions/{session}/turns", json={"message": LONG}, headers=SSE
        ) as r:
            buffer, stopped = "", None
            async for chunk in r.aiter_text():
                buffer += chunk
                events = parse(buffer[: buffer.rfind("\n\n") + 2])
                if stopped is None and any(e["event"] == "text_delta" for e in events):
                    stopped = await http.post(f"/v1/sessions/{session}/interrupt")
        idle = await http.post(f"/v1/sessions/{session}/interrupt")
    assert stopped is not None and stopped.json() == {"interrupted": True}
    assert events[-1]["event"] == "conversation_end" and events[-1]["data"]["data"]["reason"] == "interrupted"
    assert "interrupted" in [e["event"] for e in events]
    assert len(text_of(events)) < len(f"Echo: {LONG}")
    assert idle.json() == {"interrupted": False}  # nothing live any more


async def test_a_wrong_key_is_401_and_another_tenants_session_is_404_like_a_missing_one(served) -> None:
    server, token, acme = served
    session = await asyncio.to_thread(new_session, server, token)
    async with httpx.AsyncClient(base_url=server.http, timeout=30) as http:
        wrong = await http.post(
            f"/v1/sessions/{session}/turns",
            json={"message": "hi"},
            headers={**auth("avm_aaaaaaaaaaaa_" + "A" * 43), **SSE},
        )
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        for method, path, body in (
            ("POST", "/v1/sessions/{}/turns", {"message": "hi"}),
            ("GET", "/v1/sessions/{}/events", None),
            ("POST", "/v1/sessions/{}/interrupt", None),
        ):
            foreign = await http.request(
                method, path.format(session), json=body, headers={**auth(acme), **SSE}
            )
            missing = await http.request(
                method, path.format("sess_missing"), json=body, headers={**auth(acme), **SSE}
            )
            assert foreign.status_code == missing.status_code == 404, path
            assert foreign.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
            assert foreign.json()["error"]["message"].replace(session, "?") == missing.json()["error"][
                "message"
            ].replace("sess_missing", "?")
        # the client key of acme can run turns on its own sessions (a client key sends messages)
        own = await asyncio.to_thread(new_session, server, acme)
        mine = await http.post(f"/v1/sessions/{own}/turns", json={"message": "mine"}, headers=auth(acme))
    assert mine.status_code == 200 and mine.json()["reply"] == "Echo: mine"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("doc", ["README.md", "docs/http.md"])
def test_the_documented_curl_example_runs_as_written(served, doc) -> None:
    """The ```bash block that makes a session and streams a turn, run by bash with the server's
    address and key put in place of 127.0.0.1:8080 and avm_..."""
    server, token, _ = served
    text = (Path(__file__).resolve().parents[2] / doc).read_text()
    [block] = [
        b
        for b in re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
        if "/sessions/$SESSION/turns" in b and "/containers/" in b
    ]
    script = block.replace("http://127.0.0.1:8080", server.http).replace("avm_...", token)
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    events = parse(ran.stdout)
    assert events[-1]["event"] == "conversation_end" and text_of(events) == "Echo: Hello!"


async def test_a_turn_waiting_for_approval_ends_its_stream_saying_so(served) -> None:
    server, token, _ = served

    async def create() -> str:
        async with AgentVMClient.connect(server.url, token=token) as client:
            image = await client.create_image(
                "user-alice",
                name="guarded",
                tools=[{"type": "builtin", "name": "calculator"}],
                approval={"tools": "*"},
            )
        return image.sessionId

    session = await create()
    message = '/tool calculator {"expression": "6*7"}'
    async with httpx.AsyncClient(base_url=server.http, headers=auth(token), timeout=30) as http:
        streamed = await http.post(f"/v1/sessions/{session}/turns", json={"message": message}, headers=SSE)
        waiting = await http.post(f"/v1/sessions/{session}/turns?wait=5", json={"message": "and?"})
    events = parse(streamed.text)
    kinds = [e["event"] for e in events]
    assert "tool_approval_requested" in kinds and kinds[-1] == "turn_suspended", kinds
    assert events[-1]["data"]["data"]["waitingFor"][0]["toolName"] == "calculator"
    # a message sent while the turn waits fails, saying what to do (as over the WebSocket)
    answer = waiting.json()
    assert waiting.status_code == 200 and (answer["status"], answer["errorCode"]) == (
        "failed",
        "session_busy",
    )
