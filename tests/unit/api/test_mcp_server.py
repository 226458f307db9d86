"""``/mcp``, AgentVM as an MCP server, driven by the official MCP Python SDK's client
(``mcp.client.streamable_http``) over the app in-process (``httpx2.ASGITransport``), with real API
keys and budgets: list, call (reply, progress), errors, the deadline and a retry with the same
``requestId``, and what another tenant's key sees. ``tests/integration/test_serve_mcp_server.py``
runs the same client and the MCP Inspector against ``avm serve`` on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentvm.adapters.llm.scripted import Calls, Fail
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from agentvm.api.mcp import tool_names
from agentvm.errors import ProviderError
from agentvm.messages import UserMessage
from agentvm.records import ImageRecord
from tests.harness import Harness
from tests.security_harness import ManualClock, keyed_client, new_key, secure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@dataclasses.dataclass
class World:
    h: Harness
    tokens: dict[str, str]
    image: dict[str, Any]  # tenant A's "support bot"


@pytest.fixture
async def world(tmp_path) -> AsyncIterator[World]:
    h = Harness(tmp_path)
    secure(h, ManualClock())
    tokens = {t: await new_key(h.rt, t, "client") for t in ("tenant-a", "tenant-b")}
    a = await keyed_client(h, tokens["tenant-a"])
    config = {"name": "support bot", "description": "Answers Acme's support questions."}
    image = (await a.request("image_create", containerId="user-alice", config=config))["record"]
    yield World(h, tokens, image)
    h.queue.close()
    h.store.close()


@contextlib.asynccontextmanager
async def mcp_session(h: Harness, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx2.ASGITransport(app=create_app(h.rt))
    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http,
        streamable_http_client("http://avm/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def worker(h: Harness) -> AsyncIterator[None]:
    """Runs queued turns while the test's MCP calls wait for them (the local host's consumer)."""

    async def loop() -> None:
        while True:
            await h.run_turns()
            await asyncio.sleep(0.005)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def user_messages(h: Harness, session_id: str) -> list[str]:
    return [m.content for m in await h.store.list_messages(session_id) if isinstance(m, UserMessage)]  # type: ignore[misc]


async def test_no_key_or_a_bad_key_is_401_with_the_bearer_challenge(world: World) -> None:
    transport = httpx2.ASGITransport(app=create_app(world.h.rt))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient(transport=transport, base_url="http://avm") as http:
        for headers in ({}, {"Authorization": "Bearer avm_000000000000_nope"}, {"Authorization": "Basic x"}):
            answer = await http.post("/mcp", json=body, headers=headers)
            assert answer.status_code == 401, answer.text
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["error"]["code"] == "unauthorized"
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's client is refused at initialize
        async with mcp_session(world.h, None):
            pass
    assert refused.group_contains(MCPError)


async def test_lists_one_tool_per_image_and_a_call_answers_the_reply_with_progress(world: World) -> None:
    h = world.h
    h.rt.tools = ToolSources()  # builtin tools (the calculator)
    world.h.model.add(Calls(("calculator", {"expression": "6*7"})), "It is 42.")
    a = await keyed_client(h, world.tokens["tenant-a"])
    tools = {"name": "adder", "tools": [{"type": "builtin", "name": "calculator"}]}
    await a.request("image_create", containerId="user-bob", config=tools)
    async with mcp_session(h, world.tokens["tenant-a"]) as session, worker(h):
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert set(listed) == {"support_bot", "adder"}
        bot = listed["support_bot"]
        assert bot.title == "support bot"
        assert bot.description is not None and "Answers Acme's support questions." in bot.description
        assert bot.input_schema["required"] == ["message"]
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        result = await session.call_tool("adder", {"message": "what is 6*7?"}, progress_callback=on_progress)
    assert not result.is_error, result
    assert [c.text for c in result.content] == ["It is 42."]  # type: ignore[union-attr]
    assert result.structured_content is not None
    assert result.structured_content["status"] == "completed"
    steps = [m for _, m in progress]
    assert "calling tool calculator" in steps and "tool calculator answered" in steps, steps
    assert steps[-1] == "turn completed"
    assert [v for v, _ in progress] == sorted({v for v, _ in progress})  # increasing, as MCP requires
    # The turn is an ordinary turn of the image's session: its usage is metered to tenant A.
    usage = await h.store.list_usage("tenant-a")
    assert usage and all(u.tenantId == "tenant-a" for u in usage)


async def test_errors_unknown_tool_bad_arguments_a_failed_turn_and_an_exhausted_budget(world: World) -> None:
    h = world.h
    async with mcp_session(h, world.tokens["tenant-a"]) as session, worker(h):
        with pytest.raises(MCPError, match="Unknown tool: nobody"):
            await session.call_tool("nobody", {"message": "hi"})
        for bad in (
            {},
            {"message": ""},
            {"message": 7},
            {"message": "hi", "sessionId": "x"},
            {"message": "hi", "requestId": "a b"},
        ):
            result = await session.call_tool("support_bot", bad)
            assert result.is_error and "invalid arguments" in result.content[0].text, (bad, result)  # type: ignore[union-attr]
        h.model.add(Fail(ProviderError("the model refused the request")))
        failed = await session.call_tool("support_bot", {"message": "fail please"})
        assert failed.is_error
        assert "the turn failed" in failed.content[0].text  # type: ignore[union-attr]
        assert "the model refused the request" in failed.content[0].text  # type: ignore[union-attr]
        assert h.rt.budgets is not None
        await h.rt.budgets.set("tenant-a", None, daily_tokens=1, monthly_tokens=None)
        h.model.add("spends the budget")
        await session.call_tool("support_bot", {"message": "one"})  # accepted: the budget was not used up yet
        refused = await session.call_tool("support_bot", {"message": "two"})
    assert refused.is_error
    assert refused.content[0].text.startswith("quota_exceeded:"), refused  # type: ignore[union-attr]
    assert "two" not in await user_messages(h, world.image["sessionId"])  # refused before storing


async def test_a_call_past_its_deadline_says_so_and_the_same_request_id_gets_the_reply_once(
    world: World,
) -> None:
    h = world.h
    h.rt.turns = dataclasses.replace(h.rt.turns, mcp_call_deadline_s=0.05, mcp_poll_s=0.01)
    h.model.add("the late reply")
    async with mcp_session(h, world.tokens["tenant-a"]) as session:
        args = {"message": "slow one", "requestId": "retry-1"}
        waiting = await session.call_tool("support_bot", args)  # no worker runs: the turn stays queued
        assert waiting.is_error
        assert "still queued" in waiting.content[0].text and "retry-1" in waiting.content[0].text  # type: ignore[union-attr]
        await h.run_turns()
        again = await session.call_tool("support_bot", args)
    assert not again.is_error, again
    assert again.content[0].text == "the late reply"  # type: ignore[union-attr]
    assert waiting.structured_content is not None and again.structured_content is not None
    assert again.structured_content["turnId"] == waiting.structured_content["turnId"]
    assert await user_messages(h, world.image["sessionId"]) == ["slow one"]  # stored once


async def test_another_tenant_lists_none_of_its_images_and_cannot_call_them(world: World) -> None:
    h = world.h
    async with mcp_session(h, world.tokens["tenant-b"]) as session:
        assert (await session.list_tools()).tools == []
        with pytest.raises(MCPError, match="Unknown tool: support_bot"):
            await session.call_tool("support_bot", {"message": "hijack"})
    assert await user_messages(h, world.image["sessionId"]) == []


def _image(name: str, container: str, image_id: str) -> ImageRecord:
    return ImageRecord(
        tenantId="t",
        imageId=image_id,
        containerId=container,
        sessionId=f"sess_{image_id}",
        name=name,
        createdAt=1,
        updatedAt=1,
    )


def test_tool_names_are_valid_and_unique() -> None:
    images = [
        _image("support bot", "user-alice", "img_1"),
        _image("support bot", "user-bob", "img_2"),
        _image("support bot", "user-bob", "img_3"),
        _image("Ünïcode ✓ name!", "user-alice", "img_4"),
        _image("   ", "user-alice", "img_5"),
        _image("x" * 300, "user-alice", "img_6"),
    ]
    names = tool_names(images)
    assert {n: i.imageId for n, i in names.items()} == {
        "support_bot__user-alice": "img_1",
        "support_bot__img_2": "img_2",
        "support_bot__img_3": "img_3",
        "n_code_name": "img_4",
        "agent": "img_5",
        "x" * 64: "img_6",
    }
    assert all(1 <= len(n) <= 128 for n in names)


async def test_a_long_reply_reports_its_text_as_it_streams_in_this_process(world: World) -> None:
    h = world.h
    h.rt.turns = dataclasses.replace(h.rt.turns, mcp_poll_s=0.01)
    h.model.word_delay_s = 0.005
    long_reply = " ".join(f"w{i}" for i in range(120))
    h.model.add(long_reply)
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with mcp_session(h, world.tokens["tenant-a"]) as session, worker(h):
        result = await session.call_tool(
            "support_bot", {"message": "a long one"}, progress_callback=on_progress
        )
    assert result.content[0].text == long_reply  # type: ignore[union-attr]
    writing = [m for m in progress if m and m.startswith("writing")]
    assert writing and all(m.endswith("0 text chunks)") for m in writing), progress
    assert progress.index(writing[0]) > progress.index("turn running")
    assert progress[-1] == "turn completed"


@pytest.mark.parametrize(("mode", "revision"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_both_protocol_revisions_list_and_call_with_progress(
    world: World, mode: str, revision: str
) -> None:
    """The SDK's high-level ``Client``: ``legacy`` forces the initialize handshake (2025-11-25);
    ``auto`` probes ``server/discover`` and speaks the stateless 2026-07-28 revision."""
    from mcp.client.client import Client

    h = world.h
    h.model.add("Both ways.")
    headers = {"Authorization": f"Bearer {world.tokens['tenant-a']}"}
    transport = httpx2.ASGITransport(app=create_app(h.rt))
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http,
        Client(streamable_http_client("http://avm/mcp", http_client=http), mode=mode) as client,  # type: ignore[arg-type]
        worker(h),
    ):
        assert client.session.protocol_version == revision
        assert [t.name for t in (await client.list_tools()).tools] == ["support_bot"]
        result = await client.call_tool("support_bot", {"message": "hi"}, progress_callback=on_progress)
    assert not result.is_error and result.content[0].text == "Both ways."  # type: ignore[union-attr]
    assert progress[0] == "turn queued" and progress[-1] == "turn completed", progress


def test_the_app_loads_the_mcp_sdk_and_the_turn_modules_only_on_the_first_mcp_request() -> None:
    """The HTTP Lambda's cold start pays nothing for /mcp."""
    code = (
        "import sys\n"
        "from agentvm.api.app import create_app\n"
        "heavy = ('mcp', 'mcp_types', 'agentvm.api.mcp_calls', 'agentvm.turns.submit')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_turn_waiting_for_approval_says_so_and_the_same_request_id_gets_the_reply_once_approved(
    world: World,
) -> None:
    h = world.h
    h.rt.tools = ToolSources()
    a = await keyed_client(h, world.tokens["tenant-a"])
    guarded = {
        "name": "guarded",
        "tools": [{"type": "builtin", "name": "calculator"}],
        "approval": {"tools": "*"},
    }
    await a.request("image_create", containerId="user-alice", config=guarded)
    h.model.add(Calls(("calculator", {"expression": "2+2"})), "It is 4.")
    args = {"message": "add, once approved", "requestId": "approve-me"}
    async with mcp_session(h, world.tokens["tenant-a"]) as session, worker(h):
        waiting = await session.call_tool("guarded", args)
        assert waiting.is_error
        text = waiting.content[0].text  # type: ignore[union-attr]
        assert "a person's approval of tool calculator" in text and "approve-me" in text, text
        [wait] = (await a.request("tool_waits", containerId="user-alice"))["waits"]
        await a.request("tool_approval", turnId=wait["turnId"], toolCallId=wait["toolCallId"], approved=True)
        done = await session.call_tool("guarded", args)
    assert not done.is_error and done.content[0].text == "It is 4."  # type: ignore[union-attr]


async def test_a_retry_by_request_id_never_interrupts_its_own_turn_on_an_interrupt_image(
    world: World,
) -> None:
    h = world.h
    a = await keyed_client(h, world.tokens["tenant-a"])
    config = {"name": "impatient", "concurrency": "interrupt"}
    image = (await a.request("image_create", containerId="user-alice", config=config))["record"]
    h.rt.turns = dataclasses.replace(h.rt.turns, mcp_call_deadline_s=0.05, mcp_poll_s=0.01)
    h.model.add("not interrupted")
    args = {"message": "once", "requestId": "same"}
    async with mcp_session(h, world.tokens["tenant-a"]) as session:
        first = await session.call_tool("impatient", args)  # no worker: still queued at the deadline
        assert first.is_error and "still queued" in first.content[0].text  # type: ignore[union-attr]
        h.rt.turns = dataclasses.replace(h.rt.turns, mcp_call_deadline_s=30.0)
        async with worker(h):
            again = await session.call_tool("impatient", args)
    assert not again.is_error and again.content[0].text == "not interrupted", again  # type: ignore[union-attr]
    assert await user_messages(h, image["sessionId"]) == ["once"]


async def test_the_keyless_open_mode_answers_loopback_hosts_only(tmp_path) -> None:
    """``avm serve --open`` takes no key: a page reaching it through another host name (DNS
    rebinding) is refused by the MCP SDK's host check."""
    h = Harness(tmp_path)
    c = await h.client()
    await c.request("image_create", containerId="user-alice", config={"name": "bot"})
    app = create_app(h.rt, open_tenant="tenant-a")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    try:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http:
            local = await http.post("http://127.0.0.1:8080/mcp", json=body, headers=headers)
            rebound = await http.post("http://evil.example/mcp", json=body, headers=headers)
        assert local.status_code == 200 and '"bot"' in local.text
        assert rebound.status_code in (400, 403, 421), rebound
    finally:
        h.queue.close()
        h.store.close()
