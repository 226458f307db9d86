"""What answering over MCP (``/mcp``, AgentVM as an MCP server) adds to a turn, against the SDK's
WebSocket, through a real ``avm serve``.

The same turns, one at a time, to the same image: once with the Python SDK (``agentvm.client``:
``send`` until the turn's end) and once with the official MCP SDK's client (``tools/call`` until
its result), each timed from the send to the reply in hand. The model is ``avm fake-llm``
(Anthropic's wire format): a **short** turn (10 tokens at once) shows the MCP call's own overhead
(following the turn in the store every ``AVM_MCP_POLL_MS``), the **standard** turn (first token after
0.5 s, then 35 tokens a second, 200 in all) what it is next to a real reply. Each shape runs with
the default poll (100 ms) and with ``--poll-ms`` (25 by default).

Run: ``./dev python -m benchmarks.mcp_calls [--turns 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.procs import avm_serve, fake_llm

SHAPES = {
    "short (10 tokens)": ["--ttft-ms", "0", "--tokens-per-second", "1000", "--reply-tokens", "10"],
    "standard (200 tokens, 6.2 s)": [
        "--ttft-ms",
        "500",
        "--tokens-per-second",
        "35",
        "--reply-tokens",
        "200",
    ],
}


async def _websocket(url: str, image_id: str, turns: int) -> list[float]:
    from agentvm.client import AgentVMClient

    took = []
    async with AgentVMClient.connect(url) as client:
        for i in range(turns):
            started = time.perf_counter()
            async for _ in client.send(image_id, f"ws question {i}"):
                pass
            took.append(time.perf_counter() - started)
    return took


async def _mcp(http_url: str, tool: str, turns: int) -> list[float]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    took = []
    async with (
        streamable_http_client(f"{http_url}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for i in range(turns):
            started = time.perf_counter()
            result = await session.call_tool(tool, {"message": f"mcp question {i}"})
            took.append(time.perf_counter() - started)
            assert not result.is_error, result
    return took


async def _shape(model_args: list[str], poll_ms: int, turns: int) -> tuple[float, float]:
    from agentvm.client import AgentVMClient

    with (
        fake_llm(*model_args) as fake,
        tempfile.TemporaryDirectory() as data_dir,
        avm_serve(
            Path(data_dir),
            {
                "ANTHROPIC_API_KEY": "bench",
                "ANTHROPIC_BASE_URL": fake.url,
                "AVM_DEFAULT_MODEL": "anthropic/claude-haiku-4-5",
                "AVM_MCP_POLL_MS": str(poll_ms),
            },
        ) as server,
    ):
        async with AgentVMClient.connect(server.url) as client:
            image = await client.create_image("bench", name="bench")
        http_url = server.url.replace("ws://", "http://").removesuffix("/ws")
        await _mcp(http_url, "bench", 1)  # warm both paths once
        await _websocket(server.url, image.imageId, 1)
        ws = await _websocket(server.url, image.imageId, turns)
        mcp = await _mcp(http_url, "bench", turns)
    return statistics.median(ws), statistics.median(mcp)


async def run(turns: int, poll_ms: int) -> list[tuple[str, int, float, float]]:
    rows = []
    for name, model_args in SHAPES.items():
        for poll in (100, poll_ms):
            ws, mcp = await _shape(model_args, poll, turns)
            rows.append((name, poll, ws, mcp))
    return rows


def render(rows: list[tuple[str, int, float, float]], turns: int) -> str:
    out = [
        f"medians over {turns} turns (seconds, from the send to the reply in hand)",
        "",
        "| turn | AVM_MCP_POLL_MS | WebSocket (SDK) | MCP tools/call | MCP adds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, poll, ws, mcp in rows:
        out.append(f"| {name} | {poll} | {ws:.3f} | {mcp:.3f} | {mcp - ws:+.3f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=10, help="turns per client and shape")
    parser.add_argument("--poll-ms", type=int, default=25, help="the second AVM_MCP_POLL_MS measured")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.turns, args.poll_ms)), args.turns))


if __name__ == "__main__":
    main()
