"""MCP sessions that live across turns (``adapters/mcp/pool.py``), against servers nobody here wrote:
``@modelcontextprotocol/server-everything`` from npm over stdio and Streamable HTTP (its
``toggle-simulated-logging`` tool keeps per-session state: "Started" the first time, "Stopped" the
next), and a small server on the official ``mcp`` SDK whose tools change (``list_changed``).

Skipped without node and npm, except under ``CI=true``, where that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import McpUnavailable, SdkMcpConnector
from agentvm.adapters.mcp.pool import McpBackingOff, McpPoolFull, PooledMcpSessions
from agentvm.agent.tools.sources import ToolSources
from tests.mcp_servers.fixtures import free_port, served_over_http
from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

TOGGLE = "toggle-simulated-logging"
CHANGING_SERVER = Path(__file__).parents[1] / "mcp_servers" / "changing_server.py"


def _everything() -> Path:
    if not have_npm():
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are required under CI=true (server-everything)")
        pytest.skip("node or npm missing: @modelcontextprotocol/server-everything cannot run")
    return installed(*SERVER_EVERYTHING)


@contextlib.contextmanager
def _everything_over_http(port: int | None = None):
    port = port or free_port()
    with served_over_http(
        [str(_everything()), "streamableHttp"], port, {"PORT": str(port)}, "server-everything"
    ) as c:
        yield c


@pytest.fixture(params=["stdio", "http"])
def everything(request):
    if request.param == "stdio":
        yield {"command": str(_everything()), "args": ["stdio"]}
    else:
        with _everything_over_http() as config:
            yield config


def _children(marker: str) -> list[int]:
    """This process's child processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and marker in cmdline:
            found.append(int(entry.name))
    return found


async def _until(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _pool(**kwargs: Any) -> PooledMcpSessions:
    return PooledMcpSessions(SdkMcpConnector(connect_timeout_s=30), **kwargs)


# -- whole turns ---------------------------------------------------------------------------------


async def _turn(harness, client, image_id: str, tool: str) -> str:
    harness.model.add(Calls((tool, {})), "done")
    await client.request("message_send", imageId=image_id, content="go")
    await harness.run_turns()
    results = [f["data"] for f in client.session_events() if f["type"] == "tool_result"]
    return str(results[-1]["result"])


async def test_a_containers_server_keeps_its_state_across_turns_and_another_container_gets_its_own(
    harness, everything
):
    pool = _pool()
    harness.rt.tools = ToolSources(mcp=SdkMcpConnector(), mcp_pool=pool, allow_private_networks=True)
    try:
        c = await harness.client()
        images = {}
        for container in ("u1", "u2"):
            await c.request("container_create", containerId=container)
            config = {"mcpServers": {"everything": everything}}
            record = await c.request("image_create", containerId=container, config=config)
            images[container] = record["record"]["imageId"]

        assert (await _turn(harness, c, images["u1"], TOGGLE)).startswith("Started")
        assert (await _turn(harness, c, images["u1"], TOGGLE)).startswith("Stopped")  # the same session
        assert (await _turn(harness, c, images["u2"], TOGGLE)).startswith("Started")  # never shared
        assert pool.open_sessions("tenant-a") == 2
        figures = pool.figures()  # what /v1/metrics shows (avm_mcp_sessions_open, _total{event})
        assert (figures["open"], figures["started"], figures["crashed"], figures["evicted"]) == (2, 2, 0, 0)
        assert figures["reused"] >= 1  # u1's second turn (and listings) took the live session
    finally:
        await pool.aclose()
    assert pool.open_sessions() == 0


async def test_without_a_pool_each_turn_starts_over(harness, everything):
    """The behaviour kept for AWS Lambda (a session per turn): the state does not survive."""
    harness.rt.tools = ToolSources(mcp=SdkMcpConnector(), allow_private_networks=True)
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    record = await c.request(
        "image_create", containerId="u1", config={"mcpServers": {"everything": everything}}
    )
    image_id = record["record"]["imageId"]
    assert (await _turn(harness, c, image_id, TOGGLE)).startswith("Started")
    assert (await _turn(harness, c, image_id, TOGGLE)).startswith("Started")


# -- the pool on its own -------------------------------------------------------------------------


async def test_a_killed_stdio_server_is_restarted_on_next_use():
    config = {"command": str(_everything()), "args": ["stdio"]}
    pool = _pool()
    try:
        lease = pool.lease("t", "c1", "everything", config)
        assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")
        await lease.aclose()
        [pid] = _children("server-everything")
        os.kill(pid, signal.SIGKILL)
        await _until(lambda: not _children("server-everything"))

        lease = pool.lease("t", "c1", "everything", config)
        # a new process: its state starts over, and the call works
        assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")
        assert (await lease.call_tool(TOGGLE, {})).text.startswith("Stopped")
        assert len(_children("server-everything")) == 1
        await lease.aclose()
    finally:
        await pool.aclose()
    await _until(lambda: not _children("server-everything"))


async def test_a_restarted_streamable_http_server_gets_a_new_session_on_next_use():
    pool = _pool()
    try:
        with _everything_over_http() as config:
            lease = pool.lease("t", "c1", "everything", config)
            assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")
            await lease.aclose()
        # the server went away between turns (its sessions with it); it comes back on the same port
        port = int(config["url"].rsplit(":", 1)[1].split("/")[0])
        with _everything_over_http(port) as again:
            assert again == config
            lease = pool.lease("t", "c1", "everything", config)
            assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")  # a new session
            assert (await lease.call_tool(TOGGLE, {})).text.startswith("Stopped")
            await lease.aclose()
    finally:
        await pool.aclose()


async def test_a_server_that_keeps_crashing_is_not_respawned_in_a_loop():
    # server-everything given a transport it does not know exits at once, every time
    config = {"command": str(_everything()), "args": ["no-such-transport"]}
    now = [1000.0]
    pool = _pool(backoff_base_s=2.0, backoff_max_s=8.0, clock=lambda: now[0])
    try:
        lease = pool.lease("t", "c1", "everything", config)
        with pytest.raises(McpUnavailable):
            await lease.list_tools()  # crash 1: the next use restarts it at once
        with pytest.raises(McpUnavailable) as second:
            await lease.list_tools()  # crash 2: 2 s before the next try
        assert not isinstance(second.value, McpBackingOff)
        with pytest.raises(McpBackingOff, match=r"crashed 2 times in a row; it is tried again in 2\.0 s"):
            await lease.list_tools()
        now[0] += 2.0
        with pytest.raises(McpUnavailable):
            await lease.list_tools()  # crash 3: 4 s
        now[0] += 3.9
        with pytest.raises(McpBackingOff, match=r"crashed 3 times in a row; it is tried again in 0\.1 s"):
            await lease.list_tools()
        now[0] += 0.1
        with pytest.raises(McpUnavailable):
            await lease.list_tools()  # crash 4: 8 s
        with pytest.raises(McpUnavailable):
            await lease.list_tools()
        now[0] += 8.0
        with pytest.raises(McpUnavailable):
            await lease.list_tools()  # crash 5: capped at 8 s
        with pytest.raises(McpBackingOff, match=r"crashed 5 times in a row; it is tried again in 8\.0 s"):
            await lease.list_tools()
        await lease.aclose()
    finally:
        await pool.aclose()


async def test_parallel_calls_of_a_turn_hold_one_lease_and_give_it_back():
    config = {"command": str(_everything()), "args": ["stdio"]}
    pool = _pool(idle_s=0.4)
    try:
        lease = pool.lease("t", "c1", "everything", config)
        results = await asyncio.gather(*(lease.call_tool("echo", {"message": str(i)}) for i in range(4)))
        assert [r.text for r in results] == [f"Echo: {i}" for i in range(4)]
        assert len(_children("server-everything")) == 1
        await lease.aclose()
        await _until(lambda: pool.open_sessions() == 0)  # released once: idle, then closed
    finally:
        await pool.aclose()


async def test_an_idle_session_is_closed_and_its_process_ends():
    config = {"command": str(_everything()), "args": ["stdio"]}
    pool = _pool(idle_s=0.4)
    try:
        lease = pool.lease("t", "c1", "everything", config)
        assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")
        await asyncio.sleep(0.6)
        assert pool.open_sessions() == 1  # leased by a turn still running: never closed under it
        await lease.aclose()
        await _until(lambda: pool.open_sessions() == 0)
        await _until(lambda: not _children("server-everything"))
        lease = pool.lease("t", "c1", "everything", config)  # the next turn starts a fresh one
        assert (await lease.call_tool(TOGGLE, {})).text.startswith("Started")
        await lease.aclose()
    finally:
        await pool.aclose()


async def test_the_bounds_close_the_least_recently_used_idle_session_else_refuse_clearly():
    config = {"command": str(_everything()), "args": ["stdio"]}
    pool = _pool(max_per_tenant=2, max_per_host=3)
    try:
        a1, a2 = pool.lease("a", "c1", "e", config), pool.lease("a", "c2", "e", config)
        await a1.call_tool("echo", {"message": "1"})
        await a2.call_tool("echo", {"message": "2"})
        a3 = pool.lease("a", "c3", "e", config)
        with pytest.raises(McpPoolFull, match=r"this tenant's 2 MCP sessions are all in use.*PER_TENANT"):
            await a3.call_tool("echo", {"message": "3"})  # both are leased by running turns
        await a1.aclose()  # c1's turn ends: its session is idle, and the oldest
        await a3.call_tool("echo", {"message": "3"})
        assert pool.open_sessions("a") == 2
        assert pool.figures()["evicted"] == 1
        # another tenant has its own bound; the host's bound counts everyone
        b1 = pool.lease("b", "c1", "e", config)
        await b1.call_tool("echo", {"message": "b"})
        b2 = pool.lease("b", "c2", "e", config)
        with pytest.raises(
            McpPoolFull, match=r"this server's 3 MCP sessions are all in use.*AVM_MCP_MAX_SESSIONS"
        ):
            await b2.call_tool("echo", {"message": "b2"})
        for lease in (a2, a3, b1, b2):
            await lease.aclose()
        assert len(_children("server-everything")) == 3
    finally:
        await pool.aclose()
    await _until(lambda: not _children("server-everything"))


async def test_shutdown_leaves_no_stdio_server_running(tmp_path):
    from agentvm.config import Settings
    from agentvm.hosts.tools import tool_sources

    sources = tool_sources(Settings(data_dir=tmp_path), allow_stdio=True, keep_mcp_sessions=True)
    config = {"command": str(_everything()), "args": ["stdio"]}
    toolbox = None
    try:
        from agentvm.records import ImageRecord

        for container in ("c1", "c2"):
            image = ImageRecord(
                imageId=f"i-{container}",
                tenantId="t",
                containerId=container,
                sessionId=f"s-{container}",
                createdAt=0,
                updatedAt=0,
                name="x",
                mcpServers={"everything": config},
            )
            toolbox = await sources.toolbox(_NoStore(), image)
            await toolbox.aclose()
        assert len(_children("server-everything")) == 2  # listed, then kept for the next turns
    finally:
        await sources.aclose()
    assert not _children("server-everything")


async def test_the_local_hosts_shutdown_closes_its_pooled_sessions(tmp_path):
    from agentvm.config import Settings
    from agentvm.hosts.local import local_runtime
    from agentvm.records import ImageRecord

    host = local_runtime(Settings(data_dir=tmp_path))
    config = {"command": str(_everything()), "args": ["stdio"]}
    image = ImageRecord(
        imageId="i1",
        tenantId="t",
        containerId="c1",
        sessionId="s1",
        name="x",
        createdAt=0,
        updatedAt=0,
        mcpServers={"everything": config},
    )
    try:
        toolbox = await host.runtime.tools.toolbox(_NoStore(), image)
        await toolbox.aclose()
        assert len(_children("server-everything")) == 1  # kept for the container's next turn
    finally:
        for step in host.on_shutdown:  # what avm serve runs at its shutdown
            await step()
        host.queue.close()
        host.runtime.store.close()  # type: ignore[attr-defined]
    assert not _children("server-everything")


class _NoStore:
    """The catalog write of ``ToolSources`` (nothing else of the store is used here)."""

    async def put_image(self, image: Any) -> None:
        return None


async def test_a_list_changed_notification_refreshes_the_tool_list(harness):
    pool = _pool()
    harness.rt.tools = ToolSources(mcp=SdkMcpConnector(), mcp_pool=pool, allow_private_networks=True)
    try:
        c = await harness.client()
        await c.request("container_create", containerId="u1")
        config = {"mcpServers": {"changing": {"command": sys.executable, "args": [str(CHANGING_SERVER)]}}}
        image_id = (await c.request("image_create", containerId="u1", config=config))["record"]["imageId"]
        assert await _turn(harness, c, image_id, "grow") == "extra_1"
        assert {t.name for t in harness.model.requests[0].tools} == {"ping", "grow"}
        stored = await harness.store.get_image("tenant-a", image_id)
        assert {t["name"] for t in stored.toolCatalog["servers"]["changing"]} == {"ping", "grow"}

        assert await _turn(harness, c, image_id, "extra_1") == "extra_1"  # the next turn sees it
        assert {t.name for t in harness.model.requests[2].tools} == {"ping", "grow", "extra_1"}
        stored = await harness.store.get_image("tenant-a", image_id)
        assert {t["name"] for t in stored.toolCatalog["servers"]["changing"]} == {"ping", "grow", "extra_1"}
    finally:
        await pool.aclose()


async def test_a_list_changed_notification_of_the_2025_11_25_revision_marks_the_list_stale():
    """server-everything speaks 2025-11-25 and, once initialized, registers the tools that depend on
    the client's capabilities, sending ``notifications/tools/list_changed`` (after it answered
    ``initialize``, before it answers the first ``tools/list``)."""
    config = {"command": str(_everything()), "args": ["stdio"]}
    pool = _pool()
    try:
        lease = pool.lease("t", "c1", "everything", config)
        assert not pool.tools_changed("t", "c1", "everything", config)
        assert TOGGLE in {spec.name for spec in await lease.list_tools()}
        await _until(lambda: pool.tools_changed("t", "c1", "everything", config))
        assert not pool.tools_changed("t", "c2", "everything", config)  # another container's: its own
        await lease.list_tools()  # listing again clears it
        assert not pool.tools_changed("t", "c1", "everything", config)
        await lease.aclose()
    finally:
        await pool.aclose()


async def test_a_tool_list_older_than_its_ttl_is_listed_again(harness, everything):
    harness.rt.tools = ToolSources(mcp=SdkMcpConnector(), allow_private_networks=True, tools_ttl_s=600)
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    record = await c.request(
        "image_create", containerId="u1", config={"mcpServers": {"everything": everything}}
    )
    image_id = record["record"]["imageId"]
    harness.model.add("hi")
    await c.request("message_send", imageId=image_id, content="hi")
    await harness.run_turns()
    stored = await harness.store.get_image("tenant-a", image_id)
    stored.toolCatalog = {
        **stored.toolCatalog,
        "servers": {"everything": [{"name": "gone", "inputSchema": {}}]},
    }
    await harness.store.put_image(stored)

    harness.model.add("hi")  # within the TTL: the cached list is used, as it is
    await c.request("message_send", imageId=image_id, content="hi")
    await harness.run_turns()
    assert {t.name for t in harness.model.requests[-1].tools} == {"gone"}

    stored = await harness.store.get_image("tenant-a", image_id)
    stored.toolCatalog = {**stored.toolCatalog, "listedAt": int(time.time()) - 601}
    await harness.store.put_image(stored)
    harness.model.add("hi")  # past it: listed again
    await c.request("message_send", imageId=image_id, content="hi")
    await harness.run_turns()
    assert TOGGLE in {t.name for t in harness.model.requests[-1].tools}
