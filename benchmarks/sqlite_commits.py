"""How long the local store's commits hold the event loop, with SQLite's own checkpoints and with
the checkpoint thread (``adapters/local/sqlite/checkpoint.py``).

Every statement of the local store runs on the event loop, so a commit's wall time is time the
loop serves nobody else. A turn's writes are replayed through ``SqliteStore`` (the turn record
queued, running and done, the user message and a ~1 KB reply, the usage record) for ``--turns``
turns, timing each write. Two stores side by side, in alternating blocks of turns so the disk's
and the machine's moods fall on both: one file registered with the checkpoint thread, one not
(SQLite then checkpoints inside the commit that finds the log over 1,000 pages).

Reported per mode: write p50 / p99 / max, writes over 2 ms (the loop stalled for longer than a
flush window's tenth at a thousand streams), and the writes' total time per turn.

Run: ``./dev python -m benchmarks.sqlite_commits [--turns 6000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from agentvm.adapters.local.sqlite.checkpoint import checkpoint_in_background
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.messages import AssistantMessage, UserMessage
from agentvm.records import TurnRecord, UsageRecord

BLOCK = 250  # turns per block; the modes alternate block by block
STALL_MS = 2.0
REPLY = " ".join(["word"] * 200)  # ~1 KB, the standard turn's reply


async def _turn(store: SqliteStore, n: int, times: list[float]) -> None:
    session, turn = f"sess_{n % 100}", f"turn_{n}"

    async def timed(write) -> None:  # noqa: ANN001
        started = time.perf_counter()
        await write
        times.append((time.perf_counter() - started) * 1000)

    now = int(time.time() * 1000)
    await timed(store.put_turn(TurnRecord(turnId=turn, sessionId=session, status="queued", updatedAt=now)))
    user = UserMessage(id=f"m_{n}", timestamp=now, content="x" * 1000)
    await timed(store.append_message(session, user, idempotency_key=f"req_{n}"))
    await timed(store.put_turn(TurnRecord(turnId=turn, sessionId=session, status="running", updatedAt=now)))
    reply = AssistantMessage(id=f"a_{n}", timestamp=now, content=REPLY)
    await timed(store.append_message(session, reply, idempotency_key=f"reply_{n}"))
    usage = UsageRecord(
        turnId=turn,
        tenantId="t",
        containerId="c",
        imageId="i",
        sessionId=session,
        model="m",
        inputTokens=500,
        outputTokens=200,
        createdAt=now,
    )
    await timed(store.put_usage(usage))
    await timed(store.put_turn(TurnRecord(turnId=turn, sessionId=session, status="completed", updatedAt=now)))


def _summary(times: list[float], turns: int) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "writes": len(times),
        "write_ms_p50": round(statistics.median(ordered), 3),
        "write_ms_p99": round(ordered[int(len(ordered) * 0.99)], 3),
        "write_ms_max": round(ordered[-1], 3),
        "writes_over_2ms": sum(t > STALL_MS for t in times),
        "ms_per_turn": round(sum(times) / turns, 3),
    }


async def run(turns: int) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        background = Path(tmp) / "background.db"
        checkpoint_in_background(background)
        stores = {
            "SQLite's checkpoints, in the commit": SqliteStore(Path(tmp) / "inline.db"),
            "checkpoint thread": SqliteStore(background),
        }
        times: dict[str, list[float]] = {name: [] for name in stores}
        done = 0
        while done < turns:
            for name, store in stores.items():
                for n in range(done, min(turns, done + BLOCK)):
                    await _turn(store, n, times[name])
            done += BLOCK
        for store in stores.values():
            store.close()
    return [{"mode": name, "turns": turns, **_summary(t, turns)} for name, t in times.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=6000)
    args = parser.parse_args()
    for row in asyncio.run(run(args.turns)):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
