"""A hostile model's sandbox calls through a real ``avm serve`` (issue 24): a FIFO written and read
by the file tools, and a directory bomb followed by more file calls, never stall the server:
``/health`` keeps answering while they run (on the old code the FIFO froze it until someone opened
the pipe, and the bomb blocked it for 6-9 s). The bound asserted here is a freeze detector, not a
latency target: ``benchmarks/sandbox_calls.py`` measures the latency."""

from __future__ import annotations

import asyncio
import time

import httpx

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, free_port
from tests.integration.test_local_sandbox import _tool_turn

FREEZE_S = 1.0  # a /health answer slower than this means the event loop was blocked


async def _health_watch(base: str, stop: asyncio.Event) -> list[float]:
    took: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        while not stop.is_set():
            started = time.monotonic()
            assert (await http.get("/health")).status_code == 200
            took.append(time.monotonic() - started)
            await asyncio.sleep(0.02)
    return took


async def test_fifos_and_a_directory_bomb_neither_block_a_call_nor_stall_the_server(tmp_path):
    with avm_serve(tmp_path, free_port()) as server:
        async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
            await client.request("container_create", check=True, containerId="user-mallory")
            created = await client.request(
                "image_create",
                check=True,
                containerId="user-mallory",
                config={"name": "Coder", "tools": [{"type": "sandbox", "wallS": 30}]},
            )
            image = created["record"]["imageId"]
            stop = asyncio.Event()
            watch = asyncio.create_task(_health_watch(server.http, stop))
            made = await _tool_turn(client, image, "sh", '{"command": "mkfifo pipe && echo made"}')
            wrote = await _tool_turn(client, image, "write", '{"path": "pipe", "content": "x"}')
            read = await _tool_turn(client, image, "read", '{"path": "pipe"}')
            bomb = await _tool_turn(
                client,
                image,
                "python",
                '{"code": "import os\\nfor i in range(60000): os.mkdir(f\\"d{i}\\")\\nprint(\\"bombed\\")"}',
            )
            after = [
                await _tool_turn(client, image, "write", f'{{"path": "x{i}", "content": "x"}}')
                for i in range(3)
            ]
            listed = await _tool_turn(client, image, "ls", "{}")
            stop.set()
            took = await watch

    assert "made" in made["result"]
    assert wrote["isError"] and "not a regular file" in wrote["result"]
    assert read["isError"] and "not a regular file" in read["result"]
    assert "bombed" in bomb["result"] or "stopped" in bomb["result"]
    for answer in after:  # the bomb put the workspace past its entries quota
        assert answer["isError"] and "quota" in answer["result"]
    assert not listed["isError"] and len(listed["result"].splitlines()) <= 1000
    assert str(tmp_path) not in wrote["result"] + read["result"] + listed["result"]
    assert len(took) > 10 and max(took) < FREEZE_S, f"/health took up to {max(took):.2f} s"
