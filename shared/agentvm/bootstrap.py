"""Composition roots: the only code that knows which adapters a host uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.core.runtime import Runtime, TurnSettings

if TYPE_CHECKING:
    from agentvm.adapters.local_push import LocalPush
    from agentvm.adapters.local_queue import SqliteTurnQueue
    from agentvm.config import Settings


def turn_settings(settings: Settings, *, cancel_poll_s: float = 0.0) -> TurnSettings:
    return TurnSettings(
        flush_s=settings.flush_ms / 1000,
        history_window=settings.history_window,
        max_output_tokens=settings.max_output_tokens,
        cancel_poll_s=cancel_poll_s,
        max_frame_bytes=settings.max_frame_bytes,
    )


@dataclass
class LocalHost:
    """The local runtime plus the local-only pieces the server drives (queue consumer, push)."""

    runtime: Runtime
    queue: SqliteTurnQueue
    push: LocalPush
    settings: Settings


def local_runtime(settings: Settings) -> LocalHost:
    """SQLite store and durable queue under ``settings.data_dir``, in-process push."""
    from agentvm.adapters.llm_router import SettingsModelResolver
    from agentvm.adapters.local_push import LocalPush
    from agentvm.adapters.local_queue import SqliteTurnQueue
    from agentvm.adapters.memory_connections import InMemoryConnections
    from agentvm.adapters.sqlite_store import SqliteStore

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(settings.data_dir / "agentvm.db")
    queue = SqliteTurnQueue(settings.data_dir / "queue.db")
    push = LocalPush()
    runtime = Runtime(
        store=store,
        queue=queue,
        connections=InMemoryConnections(),
        push=push,
        models=SettingsModelResolver(settings),
        turns=turn_settings(settings),
    )
    return LocalHost(runtime=runtime, queue=queue, push=push, settings=settings)


__all__ = ["LocalHost", "local_runtime", "turn_settings"]
