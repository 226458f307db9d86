"""Anthropic's Managed Agents API (api/managed/, docs/managed-agents.md) driven by the official
TypeScript SDK, ``@anthropic-ai/sdk`` from npm at the version ``anthropic_ts_sdk/package.json`` pins,
against a real ``avm serve`` on loopback with the echo model: agent → environment → session → a
stream open while ``user.message`` is sent gives ``agent.message`` then ``session.status_idle`` (and
``event_delta`` previews with ``event_deltas``); ``events.list`` with its pages, auto-paging and a
``types`` filter; a custom tool's round trip on an open stream; a wrong key raises the SDK's
``AuthenticationError``, an unknown or another tenant's session its ``NotFoundError``, a bad event
``BadRequestError``, a second tool answer ``ConflictError``, a route not served its 501 class. The
Python SDK's flows are test_serve_managed_agents.py.

Skipped without node and npm, except under ``CI=true``, where that fails.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.anthropic_ts_sdk import missing_tools, pinned_version, run_driver
from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm

if TYPE_CHECKING:
    from collections.abc import Iterator

ECHO = "echo/echo-1"
FIRST = "hello from TypeScript"
SECOND = "one two three"


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """What ``anthropic_ts_sdk/driver.mjs`` saw against a real ``avm serve`` (echo words 20 ms apart),
    with a client key of a tenant of its own and one of another tenant."""
    why = missing_tools()
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"node and npm are required under CI=true: {why}")
        pytest.skip(why)
    data = tmp_path_factory.mktemp("avm")
    keys = []
    for tenant in ("typescript", "rival"):
        made = run_avm("keys", "create", "--tenant", tenant, "--scope", "client", "--data-dir", str(data))
        assert made.returncode == 0, made.stderr
        keys.append(made.stdout.strip())
    with avm_serve(data, free_port(), env=base_env(AVM_ECHO_DELAY_MS="20")) as server:
        yield run_driver(
            {"AVM_URL": server.http, "AVM_KEY": keys[0], "AVM_RIVAL_KEY": keys[1], "AVM_MODEL": ECHO}
        )


def _texts(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [e["text"] for e in events if e["type"] == kind]


def test_the_pinned_sdk_made_the_agent_environment_and_session(summary) -> None:
    assert summary["sdkVersion"] == pinned_version() == "1.14.0"
    agent, environment, session = summary["agent"], summary["environment"], summary["session"]
    assert (agent["type"], agent["version"], agent["model"]["id"]) == ("agent", 1, ECHO)
    assert environment["type"] == "environment"
    assert session["status"] == "idle" and session["title"] == "from TypeScript"
    assert (session["agentId"], session["environmentId"]) == (agent["id"], environment["id"])
    assert len({agent["id"], environment["id"], session["id"]}) == 3


def test_a_message_sent_while_streaming_gives_the_agent_message_then_idle(summary) -> None:
    turn = summary["turn"]
    [sent] = turn["sent"]
    assert (sent["type"], sent["text"]) == ("user.message", FIRST)
    streamed = turn["streamed"]
    kinds = [e["type"] for e in streamed]
    assert kinds[0] == "user.message" and streamed[0]["id"] == sent["id"]  # the same event, sent and streamed
    assert kinds[-1] == "session.status_idle" and streamed[-1]["stopReason"] == "end_turn"
    assert kinds.index("session.status_running") < kinds.index("agent.message")
    assert _texts(streamed, "agent.message") == [f"Echo: {FIRST}"]
    [usage] = [e for e in streamed if e["type"] == "span.model_request_end"]
    assert usage["outputTokens"] > 0
    assert "event_delta" not in kinds  # previews only when asked for


def test_event_deltas_preview_the_agent_message(summary) -> None:
    streamed = summary["deltaTurn"]["streamed"]
    kinds = [e["type"] for e in streamed]
    [final] = [e for e in streamed if e["type"] == "agent.message"]
    [start] = [e for e in streamed if e["type"] == "event_start"]
    deltas = [e for e in streamed if e["type"] == "event_delta"]
    assert final["text"] == f"Echo: {SECOND}"
    assert start["eventId"] == final["id"] and {d["eventId"] for d in deltas} == {final["id"]}
    assert len(deltas) > 1 and "".join(d["text"] for d in deltas) == final["text"]
    assert kinds.index("event_start") < kinds.index("event_delta") < kinds.index("agent.message")
    assert kinds[-1] == "session.status_idle"


def test_events_list_pages_and_filters(summary) -> None:
    listed = summary["listed"]["events"]
    assert summary["listed"]["nextPage"] is None
    assert [(e["type"], e["text"]) for e in listed if e["type"] in ("user.message", "agent.message")] == [
        ("user.message", FIRST),
        ("agent.message", f"Echo: {FIRST}"),
        ("user.message", SECOND),
        ("agent.message", f"Echo: {SECOND}"),
    ]
    streamed = [
        e["id"] for t in ("turn", "deltaTurn") for e in summary[t]["streamed"] if e["type"] == "agent.message"
    ]
    assert [e["id"] for e in listed if e["type"] == "agent.message"] == streamed
    assert "event_delta" not in {e["type"] for e in listed}  # previews are never stored
    paged = summary["paged"]
    assert paged["firstPageIds"] == [e["id"] for e in listed[:2]] and paged["hasNextPage"]
    assert paged["autoPagedIds"] == [e["id"] for e in listed]  # the SDK's auto-paging: every page
    # `types[]=agent.message` (the TS SDK's brackets) and `order=desc`
    assert [e["text"] for e in summary["typed"]] == [f"Echo: {SECOND}", f"Echo: {FIRST}"]
    assert {e["type"] for e in summary["typed"]} == {"agent.message"}


def test_the_session_after_two_turns(summary) -> None:
    retrieved = summary["retrieved"]
    assert (retrieved["id"], retrieved["status"]) == (summary["session"]["id"], "idle")
    assert retrieved["inputTokens"] > 0 and retrieved["outputTokens"] > 0
    assert summary["sessionsListed"] == [summary["session"]["id"]]


def test_a_custom_tool_round_trip_on_the_open_stream(summary) -> None:
    trip = summary["customTool"]
    streamed = trip["streamed"]
    kinds = [e["type"] for e in streamed]
    [use] = [e for e in streamed if e["type"] == "agent.custom_tool_use"]
    assert (use["name"], use["input"], use["id"]) == ("lookup", {"order": "42"}, trip["useId"])
    waiting, done = [e for e in streamed if e["type"] == "session.status_idle"]
    assert (waiting["stopReason"], waiting["waitingFor"]) == ("requires_action", [use["id"]])
    assert trip["statusWhileWaiting"] == "idle"
    [answered] = [e for e in streamed if e["type"] == "user.custom_tool_result"]
    assert (answered["useId"], answered["text"]) == (use["id"], "shipped")
    assert _texts(streamed, "agent.message") == ["Echo: lookup returned: shipped"]
    assert kinds.index("user.custom_tool_result") < kinds.index("agent.message")
    assert done["stopReason"] == "end_turn" and kinds[-1] == "session.status_idle"


def test_the_sdk_raises_its_own_errors(summary) -> None:
    errors = summary["errors"]
    wrong = errors["wrongKey"]
    assert (wrong["name"], wrong["isAuthenticationError"], wrong["status"]) == (
        "AuthenticationError",
        True,
        401,
    )
    assert wrong["errorType"] == "authentication_error"
    for case in ("unknownSession", "unknownSessionEvents", "rivalSession"):
        found = errors[case]
        assert (found["name"], found["isNotFoundError"], found["status"]) == ("NotFoundError", True, 404), (
            case
        )
        assert found["errorType"] == "not_found_error", case
    # another tenant's session answers exactly like a missing one
    assert errors["rivalSession"]["message"].replace(summary["session"]["id"], "?") == errors[
        "unknownSession"
    ]["message"].replace("sesn_does_not_exist", "?")
    bad = errors["emptyMessage"]
    assert (bad["name"], bad["isBadRequestError"], bad["status"]) == ("BadRequestError", True, 400)
    assert bad["errorType"] == "invalid_request_error" and "content" in bad["message"]
    again = errors["secondAnswer"]  # the custom tool was answered already
    assert (again["name"], again["isConflictError"], again["status"]) == ("ConflictError", True, 409)
    unserved = errors["notServed"]  # 501: the SDK's InternalServerError subclass for it, said so
    assert (unserved["name"], unserved["isInternalServerError"], unserved["status"]) == (
        "NotImplementedError",
        True,
        501,
    )
    assert unserved["errorType"] == "api_error" and "not served" in unserved["message"]
    # x-should-retry: false: the SDK's default retries (it retries every 5xx) leave a 501 alone
    retried = summary["notServedWithRetries"]
    assert (retried["name"], retried["maxRetries"], retried["requests"]) == ("NotImplementedError", 2, 1)
