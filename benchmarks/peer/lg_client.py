"""Load client for the LangGraph server (runs in the peer's own venv, prints one JSON line).

Each of N clients creates a thread and streams one run (``stream_mode="messages-tuple"``),
measuring, like benchmarks/local_load.py, receipt time minus the fake provider's emit stamps.
"""

import asyncio
import json
import sys
import time

from langgraph_sdk import get_client


def _stamps(text):
    return [float(w[1:]) for w in text.split() if w.startswith("@")]


async def one(url, results, ready, created):
    client = get_client(url=url)
    thread = await client.threads.create()
    created.append(thread["thread_id"])
    await ready.wait()
    first, tokens, lags = None, 0, []
    async for part in client.runs.stream(
        thread["thread_id"],
        "chat",
        input={"messages": [{"role": "user", "content": "standard turn " * 100}]},
        stream_mode="messages-tuple",
    ):
        if part.event != "messages":
            continue
        chunk = part.data[0] if isinstance(part.data, list) else part.data
        content = chunk.get("content") if isinstance(chunk, dict) else None
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
        if not isinstance(content, str) or chunk.get("type") not in ("AIMessageChunk", "ai"):
            continue
        stamps = _stamps(content)
        if not stamps or chunk.get("type") == "ai":
            continue
        now = time.time()
        tokens += len(stamps)
        lags.extend((now - s) * 1000 for s in stamps)
        if first is None:
            first = (now - stamps[0]) * 1000
    results.append({"first": first, "tokens": tokens, "lags": lags})


async def main(url, n):
    results, created, ready = [], [], asyncio.Event()
    tasks = [asyncio.create_task(one(url, results, ready, created)) for _ in range(n)]
    while len(created) < n:  # every client has its thread: start all runs at once
        await asyncio.sleep(0.01)
    t0 = time.monotonic()
    ready.set()
    await asyncio.gather(*tasks)
    print(json.dumps({"wall": time.monotonic() - t0, "results": results}))


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
