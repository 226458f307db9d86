"""Anthropic's Managed Agents API (api/managed/, docs/managed-agents.md) driven by the official
``anthropic`` SDK against a real ``avm serve`` on loopback with the echo model: agent → environment
→ session → a stream open while ``user.message`` is sent gives ``agent.message`` then
``session.status_idle``; ``events.list``; a custom tool round trip (listed and resumed whole, the
events before its suspension included); a tool confirmation; an
interrupt; a wrong key raises ``AuthenticationError``; an unknown or another tenant's session
raises ``NotFoundError``; what is not served raises the SDK's own error."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import pytest
from anthropic.types.beta import BetaEnvironment, BetaManagedAgentsAgent, BetaManagedAgentsSession
from anthropic.types.beta.sessions import BetaManagedAgentsStreamSessionEvents
from pydantic import TypeAdapter

from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.avm_process import AvmServer

ECHO = "echo/echo-1"
STRICT = TypeAdapter(BetaManagedAgentsStreamSessionEvents)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[AvmServer, str, str]]:
    """A real ``avm serve`` (echo words 20 ms apart), its admin key, and a client key of another tenant."""
    data = tmp_path_factory.mktemp("avm")
    made = run_avm("keys", "create", "--tenant", "rival", "--scope", "client", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    with avm_serve(data, free_port(), env=base_env(AVM_ECHO_DELAY_MS="20")) as server:
        yield server, server.admin_token(), made.stdout.strip()


def sdk(server: AvmServer, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"{server.http}/anthropic", api_key=key, max_retries=0, timeout=30)


def new_session(client: anthropic.Anthropic, **agent: Any) -> str:
    made = client.beta.agents.create(name="Helper", model=ECHO, system="Be brief.", **agent)
    env = client.beta.environments.create(name="dev")
    session = client.beta.sessions.create(agent=made.id, environment_id=env.id, title="first")
    assert (session.status, session.environment_id, session.agent.id) == ("idle", env.id, made.id)
    return session.id


def until(stream: Any, kind: str, seen: list[Any]) -> Any:
    """Read the stream up to the first event of ``kind`` (every event read goes to ``seen``)."""
    for event in stream:
        STRICT.validate_python(event.to_dict())  # the SDK only constructs: check each field here
        seen.append(event)
        if event.type == kind:
            return event
    raise AssertionError(f"the stream ended before {kind}: {[e.type for e in seen]}")


def test_send_while_streaming_gives_the_agent_message_then_idle(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    session_id = new_session(client)
    seen: list[Any] = []
    with client.beta.sessions.events.stream(session_id) as stream:
        sent = client.beta.sessions.events.send(
            session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hello"}]}]
        )
        assert [e.type for e in sent.data] == ["user.message"]
        idle = until(stream, "session.status_idle", seen)
    kinds = [e.type for e in seen]
    assert kinds[0] == "user.message" and "session.status_running" in kinds
    [message] = [e for e in seen if e.type == "agent.message"]
    assert isinstance(message, anthropic.types.beta.sessions.BetaManagedAgentsAgentMessageEvent)
    assert message.content[0].text == "Echo: hello"
    assert idle.stop_reason.type == "end_turn"
    usage = [e for e in seen if e.type == "span.model_request_end"]
    assert usage and usage[0].model_usage.output_tokens > 0

    listed = client.beta.sessions.events.list(session_id)
    for event in listed.data:
        STRICT.validate_python(event.to_dict())
    assert [e.type for e in listed.data if e.type in ("user.message", "agent.message")] == [
        "user.message",
        "agent.message",
    ]
    assert listed.data[0].id == sent.data[0].id  # the same event, sent and listed
    paged = client.beta.sessions.events.list(session_id, limit=1)
    assert len(paged.data) == 1 and paged.next_page
    assert [e.id for e in paged] == [e.id for e in listed.data]  # the SDK's auto-paging: every page
    only = client.beta.sessions.events.list(session_id, types=["agent.message"])
    assert [e.type for e in only.data] == ["agent.message"]
    session = client.beta.sessions.retrieve(session_id)
    assert session.status == "idle" and session.usage.output_tokens > 0 and session.usage.input_tokens > 0
    assert session.stats.duration_seconds >= session.usage.active_seconds > 0


def test_a_stream_cut_resumes_after_last_event_id(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    session_id = new_session(client)
    words = " ".join(f"w{i}" for i in range(20))
    first: list[Any] = []
    with client.beta.sessions.events.with_streaming_response.stream(session_id) as raw:
        client.beta.sessions.events.send(
            session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": words}]}]
        )
        last_id = None
        for line in raw.iter_lines():
            if line.startswith("id: "):
                last_id = line[4:]
            if line.startswith("event: "):
                first.append(line[7:])
                if line == "event: session.status_running":
                    break
    assert last_id is not None
    rest: list[Any] = []
    with client.beta.sessions.events.stream(session_id, extra_headers={"Last-Event-ID": last_id}) as stream:
        until(stream, "session.status_idle", rest)
    kinds = first + [e.type for e in rest]
    assert kinds.count("agent.message") == 1 and kinds.count("session.status_running") == 1
    assert [e.content[0].text for e in rest if e.type == "agent.message"] == [f"Echo: {words}"]


def test_event_deltas_preview_the_agent_message(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    session_id = new_session(client)
    seen: list[Any] = []
    with client.beta.sessions.events.stream(session_id, event_deltas=["agent.message"]) as stream:
        client.beta.sessions.events.send(
            session_id,
            events=[{"type": "user.message", "content": [{"type": "text", "text": "one two three"}]}],
        )
        until(stream, "session.status_idle", seen)
    [start] = [e for e in seen if e.type == "event_start"]
    deltas = [e for e in seen if e.type == "event_delta"]
    [final] = [e for e in seen if e.type == "agent.message"]
    assert start.event.id == final.id and {d.event_id for d in deltas} == {final.id}
    assert len(deltas) > 1 and "".join(d.delta.content.text for d in deltas) == final.content[0].text
    kinds = [e.type for e in seen]
    assert kinds.index("event_start") < kinds.index("event_delta") < kinds.index("agent.message")


LOOKUP = {
    "type": "custom",
    "name": "lookup",
    "description": "Look an order up",
    "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}},
}


def custom_tool_round_trip(client: anthropic.Anthropic) -> tuple[str, Any, list[Any]]:
    """A session whose turn calls the custom tool ``lookup``, waits for its result, gets it and
    ends: its id, the tool use, and every event the stream gave."""
    session_id = new_session(client, tools=[LOOKUP])
    seen: list[Any] = []
    with client.beta.sessions.events.stream(session_id) as stream:
        client.beta.sessions.events.send(
            session_id,
            events=[
                {
                    "type": "user.message",
                    "content": [{"type": "text", "text": '/tool lookup {"order": "42"}'}],
                }
            ],
        )
        use = until(stream, "agent.custom_tool_use", seen)
        assert (use.name, use.input) == ("lookup", {"order": "42"})
        idle = until(stream, "session.status_idle", seen)
        assert idle.stop_reason.type == "requires_action" and idle.stop_reason.event_ids == [use.id]
        assert client.beta.sessions.retrieve(session_id).status == "idle"
        client.beta.sessions.events.send(
            session_id,
            events=[
                {
                    "type": "user.custom_tool_result",
                    "custom_tool_use_id": use.id,
                    "content": [{"type": "text", "text": "shipped"}],
                }
            ],
        )
        until(stream, "session.status_idle", seen)
    return session_id, use, seen


def test_a_custom_tool_round_trip(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    session_id, use, seen = custom_tool_round_trip(client)
    [reply] = [e for e in seen if e.type == "agent.message"]
    assert reply.content[0].text == "Echo: lookup returned: shipped"
    [answered] = [e for e in seen if e.type == "user.custom_tool_result"]
    assert answered.custom_tool_use_id == use.id and answered.content[0].text == "shipped"
    with pytest.raises(anthropic.ConflictError):  # answered already
        client.beta.sessions.events.send(
            session_id,
            events=[{"type": "user.custom_tool_result", "custom_tool_use_id": use.id, "content": []}],
        )


def test_a_turn_continued_after_a_custom_tool_is_listed_and_resumed_whole(served) -> None:
    """``events.list`` and a stream resumed from before the suspension give the turn's events
    before it (the user message, the tool use) and the continuation's, each once, in order."""
    server, key, _ = served
    client = sdk(server, key)
    session_id, use, seen = custom_tool_round_trip(client)
    live = [(e.type, e.id) for e in seen]
    whole = [
        "user.message",
        "agent.custom_tool_use",
        "session.status_idle",
        "user.custom_tool_result",
        "agent.message",
        "session.status_idle",
    ]

    listed = list(client.beta.sessions.events.list(session_id))
    for event in listed:
        STRICT.validate_python(event.to_dict())
    kinds = [e.type for e in listed if e.type in whole]
    assert kinds == whole
    assert [e.id for e in listed if e.type == "agent.custom_tool_use"] == [use.id]
    assert [e.content[0].text for e in listed if e.type == "user.message"] == ['/tool lookup {"order": "42"}']
    assert [e.content[0].text for e in listed if e.type == "agent.message"] == [
        "Echo: lookup returned: shipped"
    ]
    ids = [e.id for e in listed]
    assert len(set(ids)) == len(ids)
    # what the live stream gave, in the same order (it joined after the user message was sent)
    assert [(e.type, e.id) for e in listed if (e.type, e.id) in live] == live

    again: list[Any] = []
    with client.beta.sessions.events.stream(session_id, extra_headers={"Last-Event-ID": "0"}) as stream:
        while (
            not again or again[-1].type != "session.status_idle" or again[-1].stop_reason.type != "end_turn"
        ):
            until(stream, "session.status_idle", again)
    assert [e.type for e in again if e.type in whole] == whole
    assert [(e.type, e.id) for e in again] == [(e.type, e.id) for e in listed]


def test_a_tool_confirmation_denied_and_allowed(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    toolset = {
        "type": "agent_toolset_20260401",
        "default_config": {"enabled": True, "permission_policy": {"type": "always_ask"}},
    }
    session_id = new_session(client, tools=[toolset])
    seen: list[Any] = []
    with client.beta.sessions.events.stream(session_id) as stream:
        client.beta.sessions.events.send(
            session_id,
            events=[
                {"type": "user.message", "content": [{"type": "text", "text": '/tool ls {"path": "."}'}]}
            ],
        )
        use = until(stream, "agent.tool_use", seen)
        assert (use.name, use.evaluated_permission) == ("ls", "ask")
        idle = until(stream, "session.status_idle", seen)
        assert idle.stop_reason.event_ids == [use.id]
        client.beta.sessions.events.send(
            session_id,
            events=[
                {
                    "type": "user.tool_confirmation",
                    "tool_use_id": use.id,
                    "result": "deny",
                    "deny_message": "no",
                }
            ],
        )
        until(stream, "session.status_idle", seen)
        [reply] = [e for e in seen if e.type == "agent.message"]
        assert "denied" in reply.content[0].text
        client.beta.sessions.events.send(
            session_id,
            events=[
                {"type": "user.message", "content": [{"type": "text", "text": '/tool ls {"path": "."}'}]}
            ],
        )
        allowed = until(stream, "agent.tool_use", seen)
        until(stream, "session.status_idle", seen)
        client.beta.sessions.events.send(
            session_id,
            events=[{"type": "user.tool_confirmation", "tool_use_id": allowed.id, "result": "allow"}],
        )
        done = until(stream, "agent.tool_result", seen)
        assert done.tool_use_id == allowed.id and done.is_error is False
        until(stream, "session.status_idle", seen)
    denied, ran = [e.content[0].text for e in seen if e.type == "agent.message"]
    assert denied == "Echo: ls returned: Execution denied: no"
    assert ran.startswith("Echo: ls returned") and "denied" not in ran


def test_an_interrupt_stops_the_running_turn(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    session_id = new_session(client)
    long = " ".join(f"word{i}" for i in range(200))  # 20 ms a word: four seconds
    seen: list[Any] = []
    with client.beta.sessions.events.stream(session_id) as stream:
        client.beta.sessions.events.send(
            session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": long}]}]
        )
        until(stream, "session.status_running", seen)
        deadline = time.monotonic() + 5
        while client.beta.sessions.retrieve(session_id).status != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        sent = client.beta.sessions.events.send(session_id, events=[{"type": "user.interrupt"}])
        assert sent.data[0].type == "user.interrupt"
        started = time.monotonic()
        until(stream, "session.status_idle", seen)
        assert time.monotonic() - started < 3  # well before the four seconds of the whole reply
    assert client.beta.sessions.retrieve(session_id).status == "idle"


def test_wrong_key_unknown_and_another_tenants_ids(served) -> None:
    server, key, rival_key = served
    client = sdk(server, key)
    session_id = new_session(client)
    with pytest.raises(anthropic.AuthenticationError):
        sdk(server, "avm_nothere_wrongsecret").beta.sessions.retrieve(session_id)
    bearer = httpx.get(
        f"{server.http}/anthropic/v1/sessions/{session_id}", headers={"Authorization": f"Bearer {key}"}
    )
    assert bearer.status_code == 200 and bearer.json()["id"] == session_id
    rival = sdk(server, rival_key)
    for who in (client, rival):
        with pytest.raises(anthropic.NotFoundError) as missing:
            who.beta.sessions.retrieve("sess_nothere_0000000000")
        assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        rival.beta.sessions.retrieve(session_id)
    with pytest.raises(anthropic.NotFoundError):
        rival.beta.sessions.events.send(session_id, events=[{"type": "user.interrupt"}])
    assert rival.beta.sessions.list().data == []
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(session_id, events=[{"type": "user.message", "content": []}])
    with pytest.raises(anthropic.InternalServerError) as unserved:  # 501: not served, said so
        client.beta.vaults.list()
    assert unserved.value.status_code == 501 and "not served" in unserved.value.message


def test_agents_versions_sessions_list_update_archive_delete(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    agent = client.beta.agents.create(name="Versioned", model=ECHO, metadata={"team": "a"})
    BetaManagedAgentsAgent.model_validate(agent.to_dict())  # every field the SDK's type requires
    assert agent.version == 1 and agent.model.id == ECHO
    updated = client.beta.agents.update(agent.id, version=1, system="Be kind.", metadata={"team": None})
    assert (updated.version, updated.system, updated.metadata) == (2, "Be kind.", {})
    with pytest.raises(anthropic.ConflictError):
        client.beta.agents.update(agent.id, version=1, system="stale")
    assert client.beta.agents.retrieve(agent.id, version=1).system is None
    assert [v.version for v in client.beta.agents.versions.list(agent.id)] == [2, 1]
    assert agent.id in [a.id for a in client.beta.agents.list()]
    env = client.beta.environments.create(name="dev")
    assert env.id in [e.id for e in client.beta.environments.list()]
    assert client.beta.environments.retrieve(env.id).name == "dev"
    first = client.beta.sessions.create(
        agent={"type": "agent", "id": agent.id, "version": 1}, environment_id=env.id
    )
    second = client.beta.sessions.create(agent=agent.id, environment_id=env.id, metadata={"k": "v"})
    assert (first.agent.version, second.agent.version) == (1, 2)
    BetaManagedAgentsSession.model_validate(second.to_dict())
    BetaEnvironment.model_validate(env.to_dict())
    mine = client.beta.sessions.list(agent_id=agent.id)
    assert [s.id for s in mine.data] == [first.id, second.id]
    assert [s.id for s in client.beta.sessions.list(agent_id=agent.id, agent_version=2)] == [second.id]
    assert [s.id for s in client.beta.sessions.list(agent_id=agent.id, statuses=["idle"])] == [
        first.id,
        second.id,
    ]
    assert client.beta.sessions.list(agent_id=agent.id, statuses=["running"]).data == []
    assert client.beta.sessions.update(first.id, title="renamed").title == "renamed"
    assert client.beta.sessions.archive(first.id).archived_at is not None
    assert [s.id for s in client.beta.sessions.list(agent_id=agent.id)] == [second.id]
    assert client.beta.sessions.delete(second.id).type == "session_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(second.id)
    archived = client.beta.agents.archive(agent.id)
    assert archived.archived_at is not None
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.create(agent=agent.id, environment_id=env.id)


def test_initial_events_run_when_the_session_is_made(served) -> None:
    server, key, _ = served
    client = sdk(server, key)
    agent = client.beta.agents.create(name="Starter", model=ECHO)
    env = client.beta.environments.create(name="dev")
    first = {"type": "user.message", "content": [{"type": "text", "text": "start here"}]}
    session = client.beta.sessions.create(agent=agent.id, environment_id=env.id, initial_events=[first])
    deadline = time.monotonic() + 10
    texts: list[str] = []
    while time.monotonic() < deadline and not texts:
        listed = client.beta.sessions.events.list(session.id, types=["agent.message"])
        texts = [e.content[0].text for e in listed.data]
        time.sleep(0.05)
    assert texts == ["Echo: start here"]
    # a retried POST with the same Idempotency-Key sends its message once
    again = {"type": "user.message", "content": [{"type": "text", "text": "once"}]}
    answers = [
        client.beta.sessions.events.send(
            session.id, events=[again], extra_headers={"Idempotency-Key": "retry-1"}
        )
        for _ in range(2)
    ]
    assert answers[0].data[0].id == answers[1].data[0].id
    # a request with one bad event acts on none of them
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(
            session.id,
            events=[{**again, "content": [{"type": "text", "text": "never"}]}, {"type": "user.message"}],
        )
    deadline = time.monotonic() + 10
    while client.beta.sessions.retrieve(session.id).status != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    users = [e.content[0].text for e in client.beta.sessions.events.list(session.id, types=["user.message"])]
    assert users == ["start here", "once"]


def test_the_async_client_streams_too(served) -> None:
    import asyncio

    server, key, _ = served

    async def run() -> list[str]:
        client = anthropic.AsyncAnthropic(base_url=f"{server.http}/anthropic", api_key=key, max_retries=0)
        agent = await client.beta.agents.create(name="Async", model=ECHO)
        env = await client.beta.environments.create(name="dev")
        session = await client.beta.sessions.create(agent=agent.id, environment_id=env.id)
        kinds = []
        async with await client.beta.sessions.events.stream(session.id) as stream:
            await client.beta.sessions.events.send(
                session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]
            )
            async for event in stream:
                kinds.append(event.type)
                if event.type == "session.status_idle":
                    break
        return kinds

    kinds = asyncio.run(run())
    assert "agent.message" in kinds and kinds[-1] == "session.status_idle"
