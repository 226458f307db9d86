"""The local host's composition root: what ``avm serve`` and the CLI run on.

SQLite store and durable turn queue under the data dir, in-memory connections, in-process push,
and security on the same SQLite file (the server secret from ``AVM_AUTH_SECRET`` or
``<data_dir>/auth_secret``). The server process itself is ``hosts.local_server``.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.hosts.tools import local_sandbox, tool_sources
from agentvm.runtime import Runtime, turn_settings
from agentvm.security.apikeys import ServerSecrets
from agentvm.security.setup import Security, build_security, server_secrets
from agentvm.turns.after_reply import AfterReplyTasks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine
    from pathlib import Path

    from agentvm.adapters.local.memory_connections import InMemoryConnections
    from agentvm.adapters.local.push import LocalPush
    from agentvm.adapters.local.relay import RelayPush
    from agentvm.adapters.local.sqlite.connections import SqliteConnections
    from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
    from agentvm.adapters.postgres.push import PostgresPush
    from agentvm.adapters.postgres.queue import PostgresTurnQueue
    from agentvm.config import Settings
    from agentvm.ports import Clock

log = logging.getLogger("agentvm.hosts.local")

SECRET_FILE = "auth_secret"


@dataclass
class LocalHost:
    """The runtime plus the pieces the server drives (queue consumer, push): the local host's, or a
    cluster node's (hosts/cluster_server.py: the same server on PostgreSQL; ``node`` its id)."""

    runtime: Runtime
    queue: SqliteTurnQueue | PostgresTurnQueue
    push: LocalPush | RelayPush | PostgresPush
    settings: Settings
    node: str | None = None
    # awaited at the server's shutdown, after the queue consumer stopped (a cluster node closes its
    # listening connection and pool here: uvicorn re-raises SIGTERM once its shutdown is done)
    on_shutdown: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # run as tasks while the server runs, cancelled at its shutdown (a cluster node's queue gauges)
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    # the work after turns' replies (compactions, titles), off the sessions' queue slots
    after_reply: AfterReplyTasks = field(default_factory=AfterReplyTasks)


def local_runtime(settings: Settings) -> LocalHost:
    """SQLite store and durable queue under ``settings.data_dir``, in-process push."""
    from agentvm.adapters.llm.router import SettingsModelResolver
    from agentvm.adapters.local.relay import RelayPush
    from agentvm.adapters.local.sqlite.checkpoint import checkpoint_in_background
    from agentvm.adapters.local.sqlite.config import SqliteConfigStore
    from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations
    from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
    from agentvm.adapters.local.sqlite.resources import SqliteResourceStore
    from agentvm.adapters.local.sqlite.store import SqliteStore, share_connections
    from agentvm.adapters.local.sqlite.tenant_purge import LocalTenantPurge
    from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore
    from agentvm.adapters.local.sqlite.waits import SqliteToolWaits
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.configcentre.centre import ConfigCentre, read_config_file
    from agentvm.configcentre.sealing import SecretSealer
    from agentvm.hosts.data_dir import prepare_data_dir
    from agentvm.observability.metrics import NoMetrics
    from agentvm.observability.running import TurnProgress
    from agentvm.resources.centre import ResourceCentre
    from agentvm.turns.cancel_poll import CancelPoll

    prepare_data_dir(settings.data_dir)  # 0700, its files 0600 (hosts/data_dir.py)
    # Before any connection opens: their logs are checkpointed off the event loop, and the adapters
    # of agentvm.db share one connection (adapters/local/sqlite/store.py: share_connections).
    checkpoint_in_background(*(settings.data_dir / name for name in ("agentvm.db", "queue.db", "logs.db")))
    share_connections(settings.data_dir / "agentvm.db")
    sandbox = local_sandbox(settings, settings.data_dir / "workspaces")
    store = SqliteStore(settings.data_dir / "agentvm.db")
    queue = SqliteTurnQueue(
        settings.data_dir / "queue.db",
        max_concurrency=settings.turn_slots,
        # The open dev mode has one tenant, who may use every slot.
        max_per_tenant=settings.turn_slots if settings.open else settings.turn_slots_per_tenant,
        worker_id=settings.worker_id,
    )
    connections, push = _connections_and_push(settings, queue)
    # MCP sessions kept across turns (adapters/mcp/pool.py), closed at the server's shutdown
    tools = tool_sources(settings, allow_stdio=True, sandbox=sandbox, keep_mcp_sessions=True)
    runtime = Runtime(
        store=store,
        queue=queue,
        connections=connections,
        push=push,
        models=SettingsModelResolver(settings),
        # Subscribers are an in-memory lookup here: looked up on every send, so a client that
        # resumes mid-turn is caught up at the next frame (with several workers they are rows of
        # the shared store: looked up every second, and before the turn's end). Model streams are
        # read once per flush window (agent/pacing.py): a thousand streams on two cores.
        turns=turn_settings(
            settings, subscriber_refresh_s=0.0 if settings.worker_id is None else 1.0, pace_reads=True
        ),
        tools=tools,
        sandbox=sandbox,
        waits=SqliteToolWaits(settings.data_dir / "agentvm.db"),
        # MCP servers' questions, held by the process that runs the call; with several workers also
        # rows of agentvm.db, so an answer reaching another worker is read there (docs/mcp.md)
        elicitations=ElicitationDesk(
            timeout_s=settings.mcp_elicitation_timeout_s,
            store=None
            if settings.worker_id is None
            else SqliteElicitations(settings.data_dir / "agentvm.db"),
        ),
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),  # replaced below (PrometheusMetrics), as the field's default was
    )
    from agentvm.hosts.knowledge import tenant_embedders

    runtime.resources = ResourceCentre(
        SqliteResourceStore(settings.data_dir / "agentvm.db"),
        runtime.clock,
        platform_tenant=settings.platform_tenant,
        storage=lambda: runtime.storage_quota,
        knowledge=lambda: runtime.knowledge_index,
        embedder=tenant_embedders(runtime, settings),  # each tenant's embedding model, billed
    )
    # Knowledge chunks in the same file: FTS5 words, sqlite-vec vectors (once an embedder is set)
    from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex
    from agentvm.ports import KnowledgeLimits

    runtime.knowledge_index = SqliteKnowledgeIndex(settings.data_dir / "agentvm.db")
    runtime.knowledge_limits = KnowledgeLimits(
        max_file_bytes=settings.knowledge_max_file_bytes,
        max_documents=settings.knowledge_max_documents,
        max_bytes=settings.knowledge_max_bytes,
    )
    runtime.platform_tenant = settings.platform_tenant
    runtime.tenants = SqliteTenantStore(settings.data_dir / "agentvm.db")
    from agentvm.adapters.local.sqlite.schedules import SqliteSchedules

    runtime.schedules = SqliteSchedules(settings.data_dir / "agentvm.db")  # turns/schedules.py
    from agentvm.adapters.local.sqlite.webhooks import SqliteWebhooks

    # endpoints' signing secrets sealed as the config centre's are (configcentre/sealing.py)
    webhook_sealer = SecretSealer(lambda: local_server_secrets(settings).newest_first())
    runtime.webhooks = SqliteWebhooks(settings.data_dir / "agentvm.db", webhook_sealer)
    runtime.webhooks_allow_private = settings.webhooks_allow_private_networks
    from agentvm.adapters.local.sqlite.replies import SqliteReplyCache

    runtime.replies = SqliteReplyCache(settings.data_dir / "agentvm.db")  # images opt in (replyCache)
    from agentvm.adapters.local.sqlite.memory import SqliteMemoryStore
    from agentvm.ports import MemoryLimits

    memory = SqliteMemoryStore(settings.data_dir / "agentvm.db")  # images opt in (a memory tool)
    runtime.memory = memory
    runtime.memory_limits = MemoryLimits(settings.memory_max_items, settings.memory_max_bytes)
    runtime.tenant_purge = LocalTenantPurge(
        store, settings.data_dir / "workspaces", replies=runtime.replies, memory=memory
    )
    from agentvm.adapters.local.sqlite.mcp_oauth import SqliteMcpOAuthRecords

    # tenants' sealed OAuth tokens of remote MCP servers, and their pending browser authorizations
    runtime.mcp_oauth = SqliteMcpOAuthRecords(settings.data_dir / "agentvm.db")
    from agentvm.adapters.local.prometheus_metrics import PrometheusMetrics

    runtime.metrics = PrometheusMetrics(
        connections=connections, queue=queue, now_ms=runtime.clock.now_ms, mcp_figures=tools.mcp_figures
    )
    from agentvm.observability.tracing import configure_tracing

    configure_tracing(settings)  # OpenTelemetry spans, when an exporter is configured
    if settings.log_store_max_bytes > 0:  # /v1/logs (``avm serve`` puts its handler on the root logger)
        from agentvm.adapters.local.sqlite.logs import SqliteLogStore

        runtime.logs = SqliteLogStore(settings.data_dir / "logs.db", max_bytes=settings.log_store_max_bytes)
    from agentvm.adapters.local.sqlite.usage import SqliteUsageRollups

    runtime.usage = SqliteUsageRollups(store)
    from agentvm.adapters.local.sqlite.running import SqliteRunningTurns

    runtime.running = SqliteRunningTurns(settings.data_dir / "agentvm.db", store)
    from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive

    runtime.sessions = SqliteSessionArchive(store)  # session centre: imports, forks, search (FTS5)
    runtime.config = ConfigCentre(
        SqliteConfigStore(settings.data_dir / "agentvm.db"),
        settings,
        runtime.clock,
        file_values=read_config_file(settings.data_dir),
        cache_s=settings.config_cache_s,
        # secrets sealed under the server secret (auth_secret, not in the database), read on first use
        sealer=SecretSealer(lambda: local_server_secrets(settings).newest_first()),
    )
    if isinstance(push, RelayPush):
        from agentvm.adapters.local.relay import RelaySignals

        signals = RelaySignals()
        signals.relay = push
        push.on_cancel = signals.fire_here
        runtime.signals = signals
    host = LocalHost(runtime=runtime, queue=queue, push=push, settings=settings, on_shutdown=[tools.aclose])
    if settings.worker_id is not None:
        # One of `avm serve --workers N`: /v1/metrics answers for every worker, whichever the kernel
        # picked; each publishes its figures to the data dir's database (adapters/prometheus/board.py).
        from agentvm.adapters.local.sqlite.worker_metrics import SqliteWorkerSnapshots
        from agentvm.adapters.prometheus.board import MetricsBoard

        board = MetricsBoard(
            SqliteWorkerSnapshots(settings.data_dir / "agentvm.db"),
            settings.worker_id,
            runtime.metrics.registry,
            now_ms=runtime.clock.now_ms,
            label="worker",
        )
        runtime.metrics.source = board
        host.background.append(board.run)
    return host


def _connections_and_push(
    settings: Settings, queue: SqliteTurnQueue
) -> tuple[InMemoryConnections | SqliteConnections, LocalPush | RelayPush]:
    """One process: connections in memory, frames straight to the sockets. A worker of several
    (docs/scaling.md): connections in the shared store, frames for other workers' sockets relayed
    to them (adapters/local/relay.py), and the queue's wake-ups told to the other workers."""
    from agentvm.adapters.local.memory_connections import InMemoryConnections
    from agentvm.adapters.local.push import LocalPush

    if settings.worker_id is None:
        return InMemoryConnections(max_per_key=settings.max_connections_per_key), LocalPush()
    from agentvm.adapters.local.relay import RelayPush
    from agentvm.adapters.local.sqlite.connections import SqliteConnections

    connections = SqliteConnections(
        settings.data_dir / "agentvm.db",
        worker=settings.worker_id,
        max_per_key=settings.max_connections_per_key,
    )
    connections.forget_worker()  # what this worker's previous run left
    push = RelayPush(settings.data_dir / "workers", connections)
    push.on_wake = queue.wake
    queue.on_change = push.broadcast_wake
    return connections, push


def local_server_secrets(settings: Settings) -> ServerSecrets:
    """``AVM_AUTH_SECRET`` if set, else ``<data_dir>/auth_secret``, generated (mode 0600) if missing."""
    if settings.auth_secret is not None:
        return server_secrets(settings)
    current = _read_or_create_secret(settings.data_dir / SECRET_FILE)
    previous = settings.auth_secret_previous
    return ServerSecrets(current, None if previous is None else previous.get_secret_value().encode())


def _read_or_create_secret(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("the auth secret file is readable by others; chmod 600 it", extra={"path": str(path)})
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:  # O_EXCL: of two processes starting at once, one writes
        f.write(secrets.token_urlsafe(48).encode())
    log.info("generated a new auth secret", extra={"path": str(path)})
    return path.read_bytes().strip()


def local_security(settings: Settings, clock: Clock) -> Security:
    """SQLite key store, budgets and counters in ``<data_dir>/agentvm.db``; no authenticator when open."""
    from agentvm.adapters.local.sqlite.budgets import SqliteBudgetStore
    from agentvm.adapters.local.sqlite.counters import SqliteCounters
    from agentvm.adapters.local.sqlite.keys import SqliteKeyStore

    db = settings.data_dir / "agentvm.db"
    return build_security(
        settings,
        clock,
        keys=SqliteKeyStore(db),
        budgets=SqliteBudgetStore(db),
        counters=SqliteCounters(db),
        secrets_=None if settings.open else local_server_secrets(settings),
    )


__all__ = [
    "LocalHost",
    "SECRET_FILE",
    "local_runtime",
    "local_security",
    "local_server_secrets",
]
