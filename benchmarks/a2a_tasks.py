"""What reading an A2A task costs now that a task is its turn (api/a2a_tasks.py), through a real
``avm serve`` and the A2A SDK's own client: ``GetTask`` (a turn record, the messages from its user
message on) and ``ListTasks`` (the session's history, one turn record per listed turn), against the
number of turns of the image's session.

Each round sends more turns (non-blocking ``SendMessage``, the model ``avm fake-llm`` answering 10
tokens at once) until the session holds ``--turns`` of them, then times ``GetTask`` of the newest
and of the oldest turn and ``ListTasks`` of the first page (50) and of a page filtered by state
(which reads every turn record).

Run: ``./dev python -m benchmarks.a2a_tasks [--turns 100 500] [--reads 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.procs import avm_serve, create_key, fake_llm

FAST = ["--ttft-ms", "0", "--tokens-per-second", "1000", "--reply-tokens", "10"]


async def _timed(reads: int, call: Any) -> float:
    took = []
    for _ in range(reads):
        started = time.perf_counter()
        await call()
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


async def run(sizes: list[int], reads: int) -> list[tuple[int, float, float, float, float]]:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.types import GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState

    from agentvm.client import AgentVMClient

    rows = []
    with fake_llm(*FAST) as fake, tempfile.TemporaryDirectory() as data_dir:
        token = create_key(Path(data_dir), "bench", rate_limit=1_000_000)
        env = {
            "ANTHROPIC_API_KEY": "bench",
            "ANTHROPIC_BASE_URL": fake.url,
            "AVM_DEFAULT_MODEL": "anthropic/claude-haiku-4-5",
        }
        with avm_serve(Path(data_dir), env, open_mode=False) as server:
            async with AgentVMClient.connect(server.url, token=token) as client:
                image = await client.create_image("bench", name="bench")
            http_url = server.url.replace("ws://", "http://").removesuffix("/ws")
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(headers=headers, timeout=60) as http:
                a2a = await create_client(
                    f"{http_url}/a2a/{image.imageId}",
                    ClientConfig(httpx_client=http, streaming=False, polling=True),
                )
                ids: list[str] = []
                for size in sizes:
                    while len(ids) < size:
                        message = Message(
                            role=Role.ROLE_USER, message_id=f"m-{len(ids)}", parts=[Part(text=f"q{len(ids)}")]
                        )
                        [answer] = [r async for r in a2a.send_message(SendMessageRequest(message=message))]
                        ids.append(answer.task.id)
                    while (await a2a.get_task(GetTaskRequest(id=ids[-1]))).status.state != (
                        TaskState.TASK_STATE_COMPLETED
                    ):
                        await asyncio.sleep(0.05)
                    newest = await _timed(reads, lambda: a2a.get_task(GetTaskRequest(id=ids[-1])))
                    oldest = await _timed(reads, lambda: a2a.get_task(GetTaskRequest(id=ids[0])))
                    page = await _timed(reads, lambda: a2a.list_tasks(ListTasksRequest(page_size=50)))
                    done = ListTasksRequest(page_size=50, status=TaskState.TASK_STATE_COMPLETED)
                    filtered = await _timed(max(3, reads // 5), lambda done=done: a2a.list_tasks(done))
                    rows.append((size, newest, oldest, page, filtered))
                await a2a.close()
    return rows


def render(rows: list[tuple[int, float, float, float, float]], reads: int) -> str:
    out = [
        f"medians of {reads} reads (ms, the SDK's client on loopback to `avm serve`, SQLite)",
        "",
        "| turns in the session | GetTask newest | GetTask oldest | ListTasks (page of 50) "
        "| ListTasks by state |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size, newest, oldest, page, filtered in rows:
        out.append(f"| {size} | {newest:.1f} | {oldest:.1f} | {page:.1f} | {filtered:.1f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, nargs="+", default=[100, 500], help="session sizes measured")
    parser.add_argument("--reads", type=int, default=30, help="reads timed per measure")
    args = parser.parse_args()
    print(render(asyncio.run(run(sorted(args.turns), args.reads)), args.reads))


if __name__ == "__main__":
    main()
