"""The Runtime: every port the core needs, typed by ``agentvm.ports`` only, wired once per host by
``agentvm.hosts`` (which also builds its cancel poll, stream progress and metrics)."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentvm.ports.knowledge import KnowledgeLimits  # a value type (its defaults): a tiny module

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.config import Settings
    from agentvm.ports import (
        Authentication,
        CancelWatch,
        Clock,
        ConfigLayers,
        Connections,
        Counters,
        Elicitations,
        Embedder,
        Ids,
        KnowledgeIndex,
        LogStore,
        McpOAuthAccess,
        McpOAuthRecords,
        McpTaskSuspension,
        MemoryLimits,
        MemoryStore,
        Metrics,
        ModelResolver,
        PerTenantLimits,
        Push,
        RateLimits,
        ReplyCache,
        ResourceRegistry,
        RunningTurns,
        Sandbox,
        SandboxJobs,
        Schedules,
        Sealer,
        SessionArchive,
        StorageAccount,
        Store,
        StreamProgress,
        TenantPurge,
        TenantStore,
        TokenBudgets,
        ToolCatalog,
        ToolWaits,
        TurnQueue,
        UsageRollups,
        Webhooks,
    )


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """Plain values the core reads; built from ``Settings`` by ``turn_settings``."""

    flush_s: float = 0.25
    flush_max_s: float = 0.0  # the window grows (x2 per flush) up to this; <= flush_s = fixed
    batch_flush_max_s: float = 0.25  # live batched text cadence grows up to this (streaming.batch_cadence)
    batch_flush_s: float = 0.0  # ...from this first window (at least flush_s; AVM_BATCH_FLUSH_MS: 250 ms)
    economy_flush_max_s: float = 2.0  # the economy cadence likewise (AVM_ECONOMY_FLUSH_MAX_MS)
    economy_flush_s: float = 2.0  # (AVM_ECONOMY_FLUSH_MS)
    stream_cadence: str = "live"  # batched connections' cadence when neither they nor the image name one
    history_window: int = 50
    history_window_step: int = 20  # the window's start moves in steps (agent/window.py); 0 = slides
    max_output_tokens: int = 1024
    cancel_poll_s: float = 0.0  # 0 = rely on in-process signals only (local host)
    subscriber_refresh_s: float = 2.0  # how often a turn looks its subscribers up again (0: every send)
    max_frame_bytes: int = 256 * 1024
    max_body_bytes: int = 1024 * 1024  # HTTP request bodies (api/body_limit.py)
    compaction_threshold_tokens: int = 8000  # 0 = never summarise older history
    compaction_model: str | None = None  # None = the image's side model (agent/side_model.py)
    turn_deadline_s: float = 600.0  # a turn (all its steps and tools) is stopped after this; 0 = none
    mcp_call_deadline_s: float = 120.0  # an MCP tools/call waits this long for its turn (api/mcp.py)
    mcp_poll_s: float = 0.1  # ...reading the turn's status and steps this often
    auto_title: bool = False  # name an untitled session after its first turn (turns/title.py)
    title_model: str | None = None  # the model that names it; None = the image's side model
    prompt_caching: bool = True  # mark turns' stable prefix for the provider's cache (images may refuse)
    reply_cache: bool = True  # images that opt in answer common first questions from their cache
    pace_reads: bool = False  # read model streams once per flush window (agent/pacing.py; local host)
    # where the queue cannot be asked (SQS): a queued or running turn whose record has not changed for
    # this long has no job left (VisibilityTimeout 5,400 s x maxReceiveCount 5; turns/orphans.py)
    orphan_after_s: float = 27_000.0


def turn_settings(
    settings: Settings,
    *,
    cancel_poll_s: float = 0.0,
    subscriber_refresh_s: float = 2.0,
    pace_reads: bool = False,
) -> TurnSettings:
    return TurnSettings(
        flush_s=settings.flush_ms / 1000,
        flush_max_s=settings.flush_max_ms / 1000,
        batch_flush_max_s=settings.batch_flush_max_ms / 1000,
        batch_flush_s=settings.batch_flush_ms / 1000,
        economy_flush_max_s=settings.economy_flush_max_ms / 1000,
        economy_flush_s=settings.economy_flush_ms / 1000,
        stream_cadence=settings.stream_cadence,
        history_window=settings.history_window,
        history_window_step=settings.history_window_step,
        max_output_tokens=settings.max_output_tokens,
        cancel_poll_s=cancel_poll_s,
        subscriber_refresh_s=subscriber_refresh_s,
        max_frame_bytes=settings.max_frame_bytes,
        max_body_bytes=settings.max_body_bytes,
        compaction_threshold_tokens=settings.compaction_threshold_tokens,
        compaction_model=settings.compaction_model,
        turn_deadline_s=settings.turn_deadline_s,
        mcp_call_deadline_s=settings.mcp_call_deadline_s,
        mcp_poll_s=settings.mcp_poll_ms / 1000,
        auto_title=settings.auto_title,
        title_model=settings.title_model,
        prompt_caching=settings.prompt_caching,
        reply_cache=settings.reply_cache,
        pace_reads=pace_reads,
    )


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"  # ascending in ASCII: ids sort by time


def _base36(n: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _ALPHABET[r] + out
    return out or "0"


class RandomIds:
    """Ids shaped like AgentX's (``img_<ms base36>_<suffix>``); clients treat them as opaque.

    The suffix is 10 random base36 characters, fresh every millisecond. Within one millisecond
    the next id's suffix is the previous one plus a random step, so ids made in the same
    millisecond still sort in creation order ("newest first" listings break ties by id). No
    counter outlives a millisecond: an id tells nobody how many ids were made before it (a
    process-wide counter let one tenant count another's activity).
    """

    _SPACE = 36**10

    def __init__(
        self,
        *,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        randbelow: Callable[[int], int] = secrets.randbelow,
    ) -> None:
        self._now_ms = now_ms
        self._randbelow = randbelow
        self._last_ms = -1
        self._last = 0

    def new(self, prefix: str) -> str:
        ms = self._now_ms()
        if ms == self._last_ms and self._last < self._SPACE - (1 << 21):
            self._last += 1 + self._randbelow(1 << 20)
        else:
            self._last_ms, self._last = ms, self._randbelow(self._SPACE // 2)  # room to step up
        return f"{prefix}_{_base36(ms)}_{_base36(self._last).rjust(10, '0')}"


@dataclass
class CancelSignals:
    """In-process interrupt signals: instant when gateway and worker share a process."""

    _events: dict[str, asyncio.Event] = field(default_factory=dict)

    def event_for(self, turn_id: str) -> asyncio.Event:
        return self._events.setdefault(turn_id, asyncio.Event())

    def fire(self, turn_id: str) -> None:
        ev = self._events.get(turn_id)
        if ev is not None:
            ev.set()

    def forget(self, turn_id: str) -> None:
        self._events.pop(turn_id, None)


@dataclass
class Runtime:
    store: Store
    queue: TurnQueue
    connections: Connections
    push: Push
    models: ModelResolver
    clock: Clock = field(default_factory=SystemClock)
    ids: Ids = field(default_factory=RandomIds)
    turns: TurnSettings = field(default_factory=TurnSettings)
    signals: CancelSignals = field(default_factory=CancelSignals)
    # the worker's interrupt poll, one read per interval for all its turns (when cancel_poll_s > 0):
    # ``turns.cancel_poll.CancelPoll()``, built by the host
    cancel_poll: CancelWatch = field(kw_only=True)
    # Security (SECURITY.md). None = not enforced: without an authenticator, ``auth`` frames are
    # ignored and a connection is whatever tenant the host registered it as (the open dev mode).
    auth: Authentication | None = None
    budgets: TokenBudgets | None = None
    rate_limiter: RateLimits | None = None
    storage_quota: StorageAccount | None = None  # bytes a tenant may store (None: no quota)
    # The security stores' atomic counters, also for claims every worker and node sees (a session's
    # compaction runs once: agent/compaction.py). None: claims are not shared (one process's tests).
    counters: Counters | None = None
    # Connections, keys and requests per tenant (security/tenant_limits.py). None: not bounded per
    # tenant (the open dev mode has one tenant).
    tenant_limits: PerTenantLimits | None = None
    # Where a turn's tools come from (agent/tools/sources.py). None: images' tools are not run.
    tools: ToolCatalog | None = None
    # Containers' workspaces (sandbox tools, the workspace routes). None: this host has no sandbox.
    sandbox: Sandbox | None = None
    # The questions MCP servers ask users mid-call (agent/tools/elicitation.py), held in this
    # process. None: every question is declined at once (AWS: the answer would reach another Lambda).
    elicitations: Elicitations | None = None
    # Tenants' sealed OAuth records of remote MCP servers (ports/mcp_oauth.py). None: servers that
    # need OAuth cannot be authorized on this host (a turn reports them unavailable).
    mcp_oauth: McpOAuthRecords | None = None
    # What seals those records. None: the config centre's sealer (AWS, whose config centre seals
    # nothing, gives one of its own, derived from the server secret as the webhooks' is).
    mcp_oauth_sealer: Sealer | None = None
    # The tool calls suspended turns wait on (turns/waits.py). None: tools never wait (a call that
    # needs approval or the client is answered with an error instead).
    waits: ToolWaits | None = None
    # Where sandbox jobs go when they do not run in the turn (AWS). None: they run in the turn.
    sandbox_jobs: SandboxJobs | None = None
    # Turns suspend on MCP tasks that outlive the inline follow (AWS: turns/mcp_tasks.py). None: a
    # call follows its task to its end (a host whose worker may run as long as a task does).
    mcp_tasks: McpTaskSuspension | None = None
    # The resource centre (agentvm/resources). None: this host serves no /v1/resources.
    resources: ResourceRegistry | None = None
    # Knowledge versions' chunks, searched by words and vectors (resources/indexing.py). None: a
    # knowledge version keeps BM25 chunk offsets in its record, and nothing can be uploaded.
    knowledge_index: KnowledgeIndex | None = None
    # Turns text into vectors for the knowledge index (hybrid search). None: words only.
    embedder: Embedder | None = None
    # What uploads may add to a knowledge resource (resources/uploads.py; AVM_KNOWLEDGE_*).
    knowledge_limits: KnowledgeLimits = field(default_factory=KnowledgeLimits)
    # The config centre (agentvm/configcentre): layered settings applied per turn. None: only what
    # was read at start applies.
    config: ConfigLayers | None = None
    # The tenant registry (security/tenants.py). None: this host serves no /v1/tenants.
    tenants: TenantStore | None = None
    # Deletes a deleted tenant's conversations at once (the local host). None: they are kept.
    tenant_purge: TenantPurge | None = None
    # Admin keys of this tenant are platform admins (tenants, server settings, platform resources).
    platform_tenant: str = "platform"
    # Requests, turns and connections counted (observability/metrics.py); /v1/metrics reads them.
    # Built by the host (``observability.metrics.NoMetrics()`` where nothing is kept).
    metrics: Metrics = field(kw_only=True)
    # Recent log lines for /v1/logs (observability/logstore.py). None: this host keeps none.
    logs: LogStore | None = None
    # The usage records summed per hour and day (observability/usage.py). None: no usage reports.
    usage: UsageRollups | None = None
    # The turns not finished yet, per tenant and container (observability/running.py). None: not
    # kept (no /v1/turns).
    running: RunningTurns | None = None
    # What the model calls streaming in this process have produced so far: an
    # ``observability.running.TurnProgress()``, built by the host.
    progress: StreamProgress = field(kw_only=True)
    # The session centre's store (agentvm/sessions): imports, forks, message search. None: this host
    # serves no /v1/sessions import, fork or search.
    sessions: SessionArchive | None = None
    # Images' cached first replies (turns/reply_cache.py; images opt in). None: no reply cache.
    replies: ReplyCache | None = None
    # What agents keep about their end users across sessions (docs/memory.md). None: this host keeps
    # no memory (the memory tools are left out, and /v1/memory answers 404).
    memory: MemoryStore | None = None
    memory_limits: MemoryLimits | None = None  # None: the defaults (AVM_MEMORY_MAX_ITEMS, _BYTES)
    # Tenants' cron schedules and their runs (turns/schedules.py). None: this host runs no schedules.
    schedules: Schedules | None = None
    # Tenants' webhook endpoints and the outbox of deliveries (turns/webhooks.py). None: no webhooks.
    webhooks: Webhooks | None = None
    # Webhook URLs may reach loopback and private addresses (AVM_WEBHOOKS_ALLOW_PRIVATE_NETWORKS: dev, tests)
    webhooks_allow_private: bool = False

    def mcp_oauth_access(self) -> McpOAuthAccess | None:
        """The OAuth records of remote MCP servers with the sealer that opens them
        (``mcp_oauth_sealer``, else the config centre's); None when this host keeps no such records
        or seals no secrets."""
        from agentvm.ports.mcp_oauth import McpOAuthAccess

        sealer = self.mcp_oauth_sealer or (self.config.sealer if self.config is not None else None)
        if self.mcp_oauth is None or sealer is None:
            return None
        return McpOAuthAccess(self.mcp_oauth, sealer)


__all__ = [
    "CancelSignals",
    "RandomIds",
    "Runtime",
    "SystemClock",
    "TurnSettings",
    "turn_settings",
]
