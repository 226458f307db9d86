"""``avm serve --database-url``: one node of a cluster on PostgreSQL (docs/cluster.md, issue 28).

The same server as the local host (``hosts/local_server.py``: the FastAPI app, ``/ws``, the queue
consumer, the wait and orphan sweeper), built on the PostgreSQL twin of every port
``hosts/local.py`` wires: the ``ClusterNode`` (``hosts/cluster.py``: pool, migrations, the turn
queue, connection registry, push and interrupt signals) and the stores on its pool. What stays on
this machine: the sandbox's workspaces (under the data dir) and, unless ``AVM_AUTH_SECRET`` is set,
the server secret file (every node must share one: set ``AVM_AUTH_SECRET`` on each).

The pool lives in one event loop, so the node is started, the admin key ensured and the server run
in that loop (``serve_cluster``). SIGTERM or SIGINT stops uvicorn; its lifespan cancels the queue
consumer, which hands this node's running turns back to the queue at once (another node resumes
them from their stored steps); then the node's listening connection and pool close (in the
lifespan too: uvicorn re-raises the signal once it is done, so the process ends by it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from agentvm.hosts.cluster import ClusterNode
from agentvm.hosts.local import LocalHost, local_server_secrets
from agentvm.hosts.tools import local_sandbox, tool_sources
from agentvm.runtime import Runtime, turn_settings
from agentvm.security.setup import Security, build_security

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from agentvm.adapters.postgres.database import Database
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.config import Settings
    from agentvm.ports import Clock, TenantStore

log = logging.getLogger("agentvm.hosts.cluster_server")


async def start_node(settings: Settings) -> ClusterNode:
    """This node's pool, migrations, listening connection, queue, registry and push."""
    if settings.database_url is None:
        raise ValueError("the cluster host needs AVM_DATABASE_URL")
    return await ClusterNode.start(
        settings.database_url.get_secret_value(),
        pool_min_size=settings.database_pool_min_size,
        pool_max_size=settings.database_pool_max_size,
        max_per_key=settings.max_connections_per_key,
        queue_options={
            "max_concurrency": settings.turn_slots,
            # The open dev mode has one tenant, who may use every slot (as on the local host).
            "max_per_tenant": settings.turn_slots if settings.open else settings.turn_slots_per_tenant,
        },
    )


def cluster_runtime(settings: Settings, node: ClusterNode) -> LocalHost:
    """The runtime on ``node``'s pool: ``hosts/local.py``'s wiring, port by port, on PostgreSQL."""
    from agentvm.adapters.llm.router import SettingsModelResolver
    from agentvm.adapters.local.prometheus_metrics import PrometheusMetrics
    from agentvm.adapters.local.sqlite.tenant_purge import LocalTenantPurge
    from agentvm.adapters.postgres.config import PostgresConfigStore
    from agentvm.adapters.postgres.memory import PostgresMemoryStore
    from agentvm.adapters.postgres.node_metrics import NodeMetricsBoard
    from agentvm.adapters.postgres.queue_gauges import QueueGaugeSnapshot
    from agentvm.adapters.postgres.replies import PostgresReplyCache
    from agentvm.adapters.postgres.resources import PostgresResourceStore
    from agentvm.adapters.postgres.running import PostgresRunningTurns
    from agentvm.adapters.postgres.sessions import PostgresSessionArchive
    from agentvm.adapters.postgres.store import PostgresStore
    from agentvm.adapters.postgres.tenants import PostgresTenantStore
    from agentvm.adapters.postgres.usage import PostgresUsageRollups
    from agentvm.adapters.postgres.waits import PostgresToolWaits
    from agentvm.configcentre.centre import ConfigCentre, read_config_file
    from agentvm.configcentre.sealing import SecretSealer
    from agentvm.hosts.data_dir import prepare_data_dir
    from agentvm.observability.metrics import NoMetrics
    from agentvm.observability.running import TurnProgress
    from agentvm.observability.tracing import configure_tracing
    from agentvm.ports import MemoryLimits
    from agentvm.resources.centre import ResourceCentre
    from agentvm.turns.cancel_poll import CancelPoll

    db = node.database
    prepare_data_dir(settings.data_dir)  # this node's sandbox workspaces (and secret file, if used)
    sandbox = local_sandbox(settings, settings.data_dir / "workspaces")
    stored_workspaces = None
    if sandbox is not None:
        # every node sees a container's files: its local copy is kept in step with PostgreSQL
        from agentvm.adapters.postgres.workspaces import PostgresWorkspaces
        from agentvm.adapters.sandbox.process import LocalSandbox
        from agentvm.adapters.sandbox.replicated import ReplicatedSandbox

        assert isinstance(sandbox, LocalSandbox)
        stored_workspaces = PostgresWorkspaces(db, max_bytes=sandbox.quota.max_bytes)
        sandbox = ReplicatedSandbox(sandbox, stored_workspaces)
    store = PostgresStore(db)
    # MCP sessions kept across this node's turns (adapters/mcp/pool.py), closed at its shutdown
    tools = tool_sources(settings, allow_stdio=True, sandbox=sandbox, keep_mcp_sessions=True)
    runtime = Runtime(
        store=store,
        queue=node.queue,
        connections=node.connections,
        push=node.push,
        models=SettingsModelResolver(settings),
        # Subscribers are rows of the shared store, as with several local workers: looked up every
        # second, and before the turn's end (a client resuming on another node is caught up).
        turns=turn_settings(settings, subscriber_refresh_s=1.0, pace_reads=True),
        tools=tools,
        sandbox=sandbox,
        waits=PostgresToolWaits(db),
        elicitations=cluster_elicitations(settings, node),
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),  # replaced below, once the gauges exist
    )
    gauges = QueueGaugeSnapshot(node.queue)
    # This node's requests, turns, process and sockets; the queue's gauges are the cluster's (a
    # snapshot refreshed in the background: the same on every node).
    metrics = PrometheusMetrics(
        connections=node.connections, queue=gauges, now_ms=runtime.clock.now_ms, mcp_figures=tools.mcp_figures
    )
    # /v1/metrics shows every live node's figures, labelled ``node``: each node publishes its own
    # to PostgreSQL and reads the others' (adapters/postgres/node_metrics.py).
    board = NodeMetricsBoard(db, node.node, metrics.registry, now_ms=runtime.clock.now_ms)
    metrics.source = board
    runtime.metrics = metrics
    runtime.signals = node.signals  # interrupts to every node (NOTIFY avm_cancel)
    from agentvm.hosts.knowledge import tenant_embedders

    runtime.resources = ResourceCentre(
        PostgresResourceStore(db),
        runtime.clock,
        platform_tenant=settings.platform_tenant,
        storage=lambda: runtime.storage_quota,
        knowledge=lambda: runtime.knowledge_index,
        embedder=tenant_embedders(runtime, settings),  # each tenant's embedding model, billed
    )
    # Knowledge chunks in PostgreSQL: a tsvector for words, real[] vectors (adapters/postgres/knowledge.py)
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from agentvm.ports import KnowledgeLimits

    runtime.knowledge_index = PostgresKnowledgeIndex(db, exact_below=settings.knowledge_exact_below)
    runtime.knowledge_limits = KnowledgeLimits(
        max_file_bytes=settings.knowledge_max_file_bytes,
        max_documents=settings.knowledge_max_documents,
        max_bytes=settings.knowledge_max_bytes,
    )
    runtime.platform_tenant = settings.platform_tenant
    runtime.tenants = PostgresTenantStore(db)
    from agentvm.adapters.postgres.schedules import PostgresSchedules

    runtime.schedules = PostgresSchedules(db)  # every node's scheduler claims a tick once
    from agentvm.adapters.postgres.webhooks import PostgresWebhooks

    webhook_sealer = SecretSealer(lambda: local_server_secrets(settings).newest_first())
    runtime.webhooks = PostgresWebhooks(db, webhook_sealer)  # every node's sender leases an attempt
    runtime.webhooks_allow_private = settings.webhooks_allow_private_networks
    replies = PostgresReplyCache(db)
    runtime.replies = replies
    memory = PostgresMemoryStore(db)  # images opt in (a memory tool)
    runtime.memory = memory
    runtime.memory_limits = MemoryLimits(settings.memory_max_items, settings.memory_max_bytes)
    runtime.tenant_purge = LocalTenantPurge(
        store,
        settings.data_dir / "workspaces",
        replies=replies,
        memory=memory,
        stored_workspaces=stored_workspaces,
    )
    from agentvm.adapters.postgres.mcp_oauth import PostgresMcpOAuthRecords

    # tenants' sealed OAuth tokens of remote MCP servers; a browser flow ends on any node
    runtime.mcp_oauth = PostgresMcpOAuthRecords(db)
    configure_tracing(settings)
    if settings.log_store_max_bytes > 0:  # /v1/logs: every node's lines in one table
        from agentvm.adapters.postgres.logs import PostgresLogStore

        runtime.logs = PostgresLogStore(db, max_bytes=settings.log_store_max_bytes)
    runtime.usage = PostgresUsageRollups(db)
    runtime.running = PostgresRunningTurns(db)
    runtime.sessions = PostgresSessionArchive(db)
    runtime.config = ConfigCentre(
        PostgresConfigStore(db),
        settings,
        runtime.clock,
        file_values=read_config_file(settings.data_dir),
        cache_s=settings.config_cache_s,
        sealer=SecretSealer(lambda: local_server_secrets(settings).newest_first()),
    )
    host = LocalHost(
        runtime=runtime,
        queue=node.queue,
        push=node.push,
        settings=settings,
        node=node.node,
        on_shutdown=[tools.aclose],  # before the node's own steps (its pool, its connection)
    )
    host.background.append(gauges.run)
    host.background.append(board.run)
    return host


def cluster_elicitations(settings: Settings, node: ClusterNode) -> ElicitationDesk:
    """MCP servers' questions as rows of the cluster's database: any node takes the answer, and its
    NOTIFY wakes the node whose call waits (a read every 2 s backs a missed one up)."""
    from agentvm.adapters.postgres.elicitations import BACKSTOP_POLL_S
    from agentvm.agent.tools.elicitation import ElicitationDesk

    assert node.elicitations is not None
    desk = ElicitationDesk(
        timeout_s=settings.mcp_elicitation_timeout_s, store=node.elicitations, poll_s=BACKSTOP_POLL_S
    )
    node.elicitations.on_answer = desk.wake
    return desk


def cluster_security(settings: Settings, clock: Clock, database: Database) -> Security:
    """Keys, budgets and counters in the cluster's database; no authenticator when open."""
    from agentvm.adapters.postgres.budgets import PostgresBudgetStore
    from agentvm.adapters.postgres.counters import PostgresCounters
    from agentvm.adapters.postgres.keys import PostgresKeyStore

    if settings.auth_secret is None and not settings.open:
        log.warning(
            "AVM_AUTH_SECRET is not set: this node uses its data dir's auth_secret file; every node "
            "of a cluster must share one secret (set AVM_AUTH_SECRET on each), or keys made on one "
            "node are refused by the others"
        )
    return build_security(
        settings,
        clock,
        keys=PostgresKeyStore(database),
        budgets=PostgresBudgetStore(database),
        counters=PostgresCounters(database),
        secrets_=None if settings.open else local_server_secrets(settings),
    )


@contextlib.asynccontextmanager
async def cluster_admin(settings: Settings) -> AsyncIterator[tuple[Security, TenantStore]]:
    """The cluster's key store (with budgets and counters) and tenant registry, for ``avm keys
    --database-url`` acting from outside the nodes: a small pool of its own, the migrations applied
    (under their advisory lock, as a node applies them), closed on exit. Keys are hashed with the
    cluster's ``AVM_AUTH_SECRET``, which must be set: a data dir's secret file would make keys that
    no node accepts."""
    from agentvm.adapters.postgres.database import Database
    from agentvm.adapters.postgres.migrations import migrate
    from agentvm.adapters.postgres.tenants import PostgresTenantStore
    from agentvm.runtime import SystemClock

    if settings.database_url is None:
        raise ValueError("no database: pass --database-url or set AVM_DATABASE_URL")
    if settings.auth_secret is None:
        raise ValueError("set AVM_AUTH_SECRET to the cluster's secret (the one every node has)")
    database = Database(settings.database_url.get_secret_value(), min_size=1, max_size=2)
    await database.open()
    try:
        await migrate(database)
        security = cluster_security(settings.model_copy(update={"open": False}), SystemClock(), database)
        yield security, PostgresTenantStore(database)
    finally:
        await database.close()


async def run_node(settings: Settings, *, announce_admin_key: Callable[[str], None]) -> int:
    """Start the node, ensure the admin key, serve until SIGTERM/SIGINT, then stop the node."""
    from agentvm.hosts.local_server import build_server
    from agentvm.security.setup import ensure_admin_key

    node = await start_node(settings)
    host: LocalHost | None = None
    closed = False

    async def stop_node() -> None:
        nonlocal closed
        if closed:
            return
        closed = True
        await _close_logs(None if host is None else host.runtime)
        await node.aclose()
        log.info("cluster node stopped", extra={"node": node.node})

    try:
        host = cluster_runtime(settings, node)
        host.on_shutdown.append(stop_node)
        security = cluster_security(settings, host.runtime.clock, node.database)
        security.attach(host.runtime)
        if host.runtime.config is not None:
            await host.runtime.config.seal_stored_secrets()
        token = None if security.auth is None else await ensure_admin_key(security.auth, settings)
        if token is not None:
            announce_admin_key(token)
        _keep_log_lines(host)
        server, sockets = build_server(host)
        await server.serve(sockets=sockets)
        return 0 if server.started else 3  # 3: uvicorn's STARTUP_FAILURE (the port is taken, ...)
    finally:
        await stop_node()


def serve_cluster(settings: Settings, *, announce_admin_key: Callable[[str], None]) -> int:
    """``avm serve --database-url``: ``run_node`` in an event loop of its own (uvloop if present)."""
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=_loop_factory()) as runner,
    ):
        return runner.run(run_node(settings, announce_admin_key=announce_admin_key))
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _keep_log_lines(host: LocalHost) -> None:
    from agentvm.adapters.postgres.logs import PostgresLogStore
    from agentvm.logs import add_log_handler

    if isinstance(host.runtime.logs, PostgresLogStore):
        add_log_handler(host.runtime.logs.handler())


async def _close_logs(runtime: Runtime | None) -> None:
    from agentvm.adapters.postgres.logs import PostgresLogStore

    if runtime is not None and isinstance(runtime.logs, PostgresLogStore):
        with contextlib.suppress(Exception):
            await asyncio.to_thread(runtime.logs.close)


__all__ = [
    "cluster_admin",
    "cluster_elicitations",
    "cluster_runtime",
    "cluster_security",
    "run_node",
    "serve_cluster",
    "start_node",
]
