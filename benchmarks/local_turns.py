"""Driving turns through the runtime's turn worker on the local wiring, for the benchmarks.

What ``prompt_caching``, ``side_models``, ``tool_steps`` and ``history_scaling`` share: a
``Runtime`` on a SQLite store and queue in a temporary directory (in-memory connections, the
in-process push), an image with its session, and a user message submitted as a turn job for
``process_turn``. The benchmarks time or read what they measure around these calls (the usage
records are ``rt.store.list_usage(TENANT)``).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.messages import UserMessage
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.records import ImageRecord, SessionRecord, TurnJob
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll
from agentvm.turns.worker import process_turn

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agentvm.agent.loop import TurnOutcome
    from agentvm.ports import ModelResolver
    from agentvm.ports.tools import ToolCatalog

TENANT = "t"
CONTAINER = "c"


@contextlib.contextmanager
def sqlite_runtime(
    models: ModelResolver, turns: TurnSettings, tools: ToolCatalog | None = None
) -> Iterator[Runtime]:
    """A runtime on a fresh SQLite store and queue (closed, and their directory removed, on exit)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        queue = SqliteTurnQueue(Path(tmp) / "queue.db")
        rt = Runtime(
            store=store,
            queue=queue,
            connections=InMemoryConnections(),
            push=LocalPush(),
            models=models,
            turns=turns,
            cancel_poll=CancelPoll(),
            progress=TurnProgress(),
            metrics=NoMetrics(),
            tools=tools,
        )
        try:
            yield rt
        finally:
            queue.close()
            store.close()


async def create_session(
    rt: Runtime, image_id: str = "img_bench", session_id: str = "sess_bench", **image: Any
) -> ImageRecord:
    """Store an image (``image``: its other fields) with its session; both of ``TENANT``."""
    now = rt.clock.now_ms()
    ids = {"tenantId": TENANT, "containerId": CONTAINER, "createdAt": now, "updatedAt": now}
    record = ImageRecord(**ids, imageId=image_id, sessionId=session_id, **{"name": "bench", **image})
    await rt.store.create_image(record, SessionRecord(**ids, sessionId=session_id, imageId=image_id))
    return record


async def submit_turn(
    rt: Runtime, image: ImageRecord, key: str, content: str, *, agent_id: str = "agent_bench"
) -> TurnJob:
    """Append the user's message to the image's session; the turn job the queue would hand a worker.

    Ids are ``msg_{key}``, ``turn_{key}`` and ``r{key}``: ``key`` must be unique in the store.
    """
    user = UserMessage(id=f"msg_{key}", timestamp=rt.clock.now_ms(), content=content)
    appended = await rt.store.append_message(image.sessionId, user)
    return TurnJob(
        turnId=f"turn_{key}",
        tenantId=TENANT,
        containerId=CONTAINER,
        imageId=image.imageId,
        sessionId=image.sessionId,
        agentId=agent_id,
        userMessageId=user.id,
        requestId=f"r{key}",
        enqueuedAt=0,
        userSeq=appended.seq,
    )


async def run_turn(rt: Runtime, image: ImageRecord, key: str, content: str) -> TurnOutcome:
    """Submit a user message and run its turn to the end; a turn that fails raises."""
    outcome = await process_turn(rt, await submit_turn(rt, image, key, content))
    if outcome is None or outcome.error is not None:
        raise RuntimeError(f"turn {key} failed: {outcome}")
    return outcome
