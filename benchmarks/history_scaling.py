"""History scaling: the runtime overhead of one turn in a 10-message vs a 10,000-message session.

The model is the scripted one with no delay, so the time measured is the runtime's own: reading
the window, building the request, streaming through the sink, persisting. Store reads are
counted too (``SqliteStore.queries``): they must not grow with history.

Run: ``./dev python -m benchmarks.history_scaling``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.messages import AssistantMessage, TextPart, UserMessage
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.worker import process_turn
from benchmarks.local_turns import create_session, sqlite_runtime, submit_turn

if TYPE_CHECKING:
    from agentvm.records import ImageRecord

REPLY = " ".join(["word"] * 200)


async def _session(rt: Runtime, store: SqliteStore, n_messages: int, idx: int) -> ImageRecord:
    image = await create_session(rt, f"img_{idx}", f"sess_{idx}", name="b")
    now = rt.clock.now_ms()
    body = "x" * 1000  # ~1 KB messages, as in the standard turn
    for i in range(n_messages // 2):
        user = UserMessage(id=f"msg_u{i}", timestamp=now, content=body)
        await store.append_message(image.sessionId, user)
        reply = AssistantMessage(
            id=f"msg_a{i}", timestamp=now, content=[TextPart(text=body)], parentId=user.id
        )
        await store.append_message(image.sessionId, reply)
    return image


async def _turn(rt: Runtime, store: SqliteStore, image: ImageRecord, k: int) -> tuple[float, int]:
    job = await submit_turn(rt, image, f"bench{k}_{image.imageId}", "hello " * 100, agent_id="agent_b")
    reads0 = store.queries
    t0 = time.perf_counter()
    await process_turn(rt, job)
    return (time.perf_counter() - t0) * 1000, store.queries - reads0


async def run(sizes: list[int], turns: int) -> list[dict[str, object]]:
    results = []
    model = ScriptedModelClient()
    with sqlite_runtime(SingleModelResolver(model), TurnSettings(flush_s=0.25)) as rt:
        store = rt.store
        assert isinstance(store, SqliteStore)
        images = {n: await _session(rt, store, n, n) for n in sizes}
        for image in images.values():  # warm up once per session
            model.add(REPLY)
            await _turn(rt, store, image, -1)
        samples: dict[int, list[tuple[float, int]]] = {n: [] for n in sizes}
        for k in range(turns):  # interleave sizes so machine noise hits both alike
            for n, image in images.items():
                model.add(REPLY)
                samples[n].append(await _turn(rt, store, image, k))
        for n in sizes:
            ms = [s[0] for s in samples[n]]
            results.append(
                {
                    "history_messages": n,
                    "turn_overhead_ms_median": round(statistics.median(ms), 2),
                    "store_reads_per_turn": max(s[1] for s in samples[n]),
                    "turns": turns,
                }
            )
    base = results[0]["turn_overhead_ms_median"]
    for r in results:
        r["ratio_vs_smallest"] = round(float(r["turn_overhead_ms_median"]) / float(base), 2)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--turns", type=int, default=31)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = asyncio.run(run(args.sizes, args.turns))
    for r in results:
        print(json.dumps(r))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
