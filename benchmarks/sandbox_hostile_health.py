"""``/health`` while a hostile model's sandbox calls run through a real ``avm serve`` (issue 24:
"the server's /health under 50 ms meanwhile").

One ``avm serve`` (open mode, the echo model, whose ``/tool <name> <json>`` messages make one tool
call each), one container with the sandbox tools. For each phase a client runs its tool turns
while another polls ``/health`` every 10 ms; the phase reports the polls' p50, p99 and worst
latency next to an idle phase of the same length. The phases: a FIFO written and read by the file
tools, a 60,000-directory bomb followed by writes and a listing, a fork bomb, eight processes
filling memory, and a job filling the workspace.

Run: ``./dev python -m benchmarks.sandbox_hostile_health [--repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agentvm.client import AgentVMClient
from benchmarks.procs import avm_serve
from benchmarks.sandbox_calls import markdown_table

BOMB = "import os\nfor i in range(60000): os.mkdir(f'd{i}')"
FORK_BOMB = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"
MEMORY = (
    "import subprocess as s\n"
    "ps=[s.Popen(['python3','-c','x=bytearray(100<<20);import time;time.sleep(5)']) for _ in range(8)]\n"
    "[p.wait() for p in ps]"
)
FILL = "import os\nfor i in range(100000): open(f'f{i}','wb').write(os.urandom(1<<20))"

PHASES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "idle": [],
    "FIFO written and read": [
        ("sh", {"command": "mkfifo pipe"}),
        ("write", {"path": "pipe", "content": "x"}),
        ("read", {"path": "pipe"}),
        ("sh", {"command": "rm pipe"}),
    ],
    "60,000-directory bomb, then writes and ls": [
        ("python", {"code": BOMB}),
        *[("write", {"path": f"x{i}", "content": "x"}) for i in range(5)],
        ("ls", {"path": "d1"}),  # the root's 1,000 names would take the echo model 20 s to say
        ("sh", {"command": "rm -rf d*"}),
    ],
    "fork bomb": [("python", {"code": FORK_BOMB})],
    "8 processes x 100 MB (memory 512 MB)": [("python", {"code": MEMORY})],
    "workspace fill (1 MB files)": [("python", {"code": FILL}), ("sh", {"command": "rm -f f*"})],
}


async def _turn(client: AgentVMClient, image_id: str, tool: str, arguments: dict[str, Any]) -> str:
    content = f"/tool {tool} {json.dumps(arguments)}"
    await client.request("message_send", check=True, imageId=image_id, content=content)
    events = [e async for e in client.turn_events(timeout=120)]
    results = [e["data"]["result"] for e in events if e["type"] == "tool_result"]
    return results[0] if results else ""


async def _phase(
    http: httpx.AsyncClient, client: AgentVMClient, image_id: str, calls: list
) -> dict[str, Any]:
    took: list[float] = []
    stop = asyncio.Event()

    async def poll() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            (await http.get("/health")).raise_for_status()
            took.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.01)

    poller = asyncio.create_task(poll())
    started = time.perf_counter()
    outcomes = [await _turn(client, image_id, tool, arguments) for tool, arguments in calls]
    if not calls:
        await asyncio.sleep(3)
    stop.set()
    await poller
    took.sort()
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "polls": len(took),
        "p50 ms": round(statistics.median(took), 2),
        "p99 ms": round(took[int(len(took) * 0.99)], 2),
        "max ms": round(took[-1], 2),
        "last result": (outcomes[-2] if len(outcomes) > 1 else outcomes[-1] if outcomes else "")[-80:],
    }


async def run(repeat: int) -> list[dict[str, Any]]:
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in PHASES}
    with tempfile.TemporaryDirectory() as tmp, avm_serve(Path(tmp), {}) as server:
        base = server.url.replace("ws://", "http://").rsplit("/ws", 1)[0]
        async with AgentVMClient.connect(server.url) as client, httpx.AsyncClient(base_url=base) as http:
            await client.request("container_create", check=True, containerId="user-mallory")
            tools = [{"type": "sandbox", "wallS": 20, "cpuS": 20, "memoryMb": 512}]
            created = await client.request(
                "image_create",
                check=True,
                containerId="user-mallory",
                config={"name": "Hostile", "tools": tools},
            )
            image_id = created["record"]["imageId"]
            for _ in range(repeat):
                for name, calls in PHASES.items():
                    rows[name].append(await _phase(http, client, image_id, calls))
    out = []
    for name, runs in rows.items():
        row: dict[str, Any] = {"phase": name}
        for key in ("seconds", "polls", "p50 ms", "p99 ms", "max ms"):
            row[key] = statistics.median(r[key] for r in runs)
        row["worst max ms"] = max(r["max ms"] for r in runs)
        row["the model was told"] = runs[-1]["last result"].replace("\n", " ").replace("|", "/")
        out.append(row)
    return out


def render(rows: list[dict[str, Any]], repeat: int) -> str:
    lines = [
        "## /health during a hostile model's sandbox calls (issue 24)",
        "",
        f"`./dev python -m benchmarks.sandbox_hostile_health --repeat {repeat}`: one `avm serve`, the echo "
        f"model's `/tool` calls one at a time, `/health` polled every 10 ms meanwhile; medians of {repeat} "
        "runs of each phase (worst max: the slowest poll of any run).",
        "",
    ]
    return "\n".join(lines) + "\n" + markdown_table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(render(asyncio.run(run(args.repeat)), args.repeat))


if __name__ == "__main__":
    main()
