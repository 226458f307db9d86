"""MCP sessions that live across turns: one per (tenant, container, server config), on one host.

A turn leases its servers' sessions (``lease``); the lease connects on first use, or reuses the
session the container's previous turn left open, so a stdio server keeps its process and its state
between turns. The lease's ``aclose`` (the toolbox's end) hands the session back; it is closed
after ``idle_s`` without a lease, at the host's shutdown (``aclose``), or to make room.

- **Never shared**: the key holds the tenant and the container (a stdio server's state belongs to
  one end user), and a fingerprint of the server's config with its resolved headers (another key
  or secret value is another session). The fingerprint is a hash: no secret is kept in a key.
- **Bounded**: at most ``max_per_tenant`` sessions per tenant and ``max_per_host`` in all. At a
  bound the least recently used idle session (no lease open) is closed; when every one is leased,
  the new lease fails with ``McpPoolFull`` naming the bound (never a silent drop).
- **Crashes**: a session whose server went away (a killed process, a dropped connection) is started
  again on its next use (a turn that takes over an open session pings it first: one round trip).
  The first restart is at once; each further crash in a row doubles the wait (``backoff_base_s``,
  at most ``backoff_max_s``), and a use before then fails with an error saying when it is tried
  again. A call that succeeds ends the run of crashes.
- **OAuth**: a remote server's session opened with the key's tenant's tokens (``http_auth``) is
  never another tenant's: the tenant is in the key.
- **Tool lists**: ``tools_changed`` says the server sent ``notifications/tools/list_changed``
  since the session's last listing (``agent.tools.sources`` lists it again).

Sessions belong to the event loop that opened them: a host with one long-lived loop (``avm serve``,
a cluster node) keeps a pool; AWS Lambda does not (docs/mcp.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentvm.adapters.mcp.client import McpUnavailable, SdkMcpConnector, SdkMcpSession

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentvm.llm import ToolSpec
    from agentvm.ports import ElicitationAnswer, ElicitFn, McpTaskState, ProgressFn, ToolOutput

log = logging.getLogger("agentvm.mcp")

DEFAULT_IDLE_S = 300.0
DEFAULT_MAX_PER_TENANT = 16
DEFAULT_MAX_PER_HOST = 128


# What the pool counts: a session started (a server process or HTTP session opened), reused by a
# turn, crashed, closed after AVM_MCP_IDLE_S unused, or closed to make room at a bound.
SESSION_EVENTS = ("started", "reused", "crashed", "closed_idle", "evicted")


class McpPoolFull(McpUnavailable):
    """Every session of the tenant (or of the host) is leased by a running turn: none can be opened."""


class McpBackingOff(McpUnavailable):
    """The server crashed several times in a row; it is not started again before ``retry_at``."""


_Key = tuple[str, str, str, str]  # tenant, container, server, config fingerprint


@dataclass
class _Entry:
    key: _Key
    config: dict[str, Any]
    http_auth: Any = None  # a remote server's OAuth (the key's tenant's tokens)
    session: SdkMcpSession | None = None
    leases: int = 0
    last_used: float = 0.0
    crashes: int = 0  # in a row; a successful call resets it
    retry_at: float = 0.0  # monotonic
    tools_changed: bool = False

    @property
    def tenant(self) -> str:
        return self.key[0]

    @property
    def server(self) -> str:
        return self.key[2]


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """A hash of a server's config (resolved headers included): equal configs share a key."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:24]


class PooledMcpSessions:
    """The host's pool (``ports.McpSessionPool``). Settings: ``AVM_MCP_IDLE_S``,
    ``AVM_MCP_MAX_SESSIONS_PER_TENANT``, ``AVM_MCP_MAX_SESSIONS``."""

    def __init__(
        self,
        connector: SdkMcpConnector | None = None,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        max_per_tenant: int = DEFAULT_MAX_PER_TENANT,
        max_per_host: int = DEFAULT_MAX_PER_HOST,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connector = connector or SdkMcpConnector()
        self.idle_s = idle_s
        self.max_per_tenant = max_per_tenant
        self.max_per_host = max_per_host
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._clock = clock
        self._entries: dict[_Key, _Entry] = {}
        self._lock = asyncio.Lock()
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False
        # what happened to sessions since start (``figures``; /v1/metrics' avm_mcp_sessions_total)
        self.counts = dict.fromkeys(SESSION_EVENTS, 0)

    # -- the port --------------------------------------------------------------------------------
    def lease(
        self, tenant: str, container: str, server: str, config: Mapping[str, Any], *, http_auth: Any = None
    ) -> McpLease:
        key = (tenant, container, server, config_fingerprint(config))
        return McpLease(self, key, dict(config), http_auth)

    def tools_changed(self, tenant: str, container: str, server: str, config: Mapping[str, Any]) -> bool:
        entry = self._entries.get((tenant, container, server, config_fingerprint(config)))
        return entry is not None and entry.tools_changed

    async def aclose(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        entries, self._entries = list(self._entries.values()), {}
        await asyncio.gather(*(_close(e) for e in entries), return_exceptions=True)

    # -- what the pool holds (for tests, metrics and the docs' numbers) ---------------------------
    def figures(self) -> dict[str, int]:
        """The sessions open now (``open``) and each ``SESSION_EVENTS`` count since start."""
        return {"open": self.open_sessions(), **self.counts}

    def open_sessions(self, tenant: str | None = None) -> int:
        return sum(
            1
            for e in self._entries.values()
            if e.session is not None and (tenant is None or e.tenant == tenant)
        )

    async def close_idle(self) -> int:
        """Close the sessions unleased for ``idle_s`` (the sweeper does this every few seconds);
        forget a crashed server's record once its wait is over and it sat unused as long."""
        now = self._clock()
        closed = 0
        for entry in list(self._entries.values()):
            if entry.leases or now - entry.last_used < self.idle_s:
                continue
            if entry.session is not None:
                await _close(entry)
                closed += 1
                self.counts["closed_idle"] += 1
            if now >= entry.retry_at:
                self._entries.pop(entry.key, None)
        return closed

    # -- leases ----------------------------------------------------------------------------------
    async def _acquire(self, key: _Key, config: dict[str, Any], http_auth: Any = None) -> _Entry:
        if self._closed:
            raise McpUnavailable(key[2], "start", "is unavailable: the server is shutting down")
        async with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(key, config, http_auth, last_used=self._clock())
            elif http_auth is not None:
                entry.http_auth = http_auth  # the newest turn's (fresh from the store), for a new session
            entry.leases += 1
            try:
                await self._ensure_session(entry)
            except BaseException:
                entry.leases -= 1
                raise
            self._start_sweeper()
            return entry

    def _release(self, entry: _Entry) -> None:
        entry.leases = max(0, entry.leases - 1)
        entry.last_used = self._clock()

    async def _ensure_session(self, entry: _Entry) -> None:
        if entry.session is not None and entry.session.alive and entry.leases == 1:
            # a turn takes over a session left open: a ping finds a server that died meanwhile
            with contextlib.suppress(McpUnavailable):
                await entry.session.ping()
        if entry.session is not None and not entry.session.alive:
            self._crashed(entry, "it went away between turns")
            await _close(entry)
        if entry.session is not None:
            self.counts["reused"] += 1
            return
        now = self._clock()
        if now < entry.retry_at:
            wait = entry.retry_at - now
            at = datetime.fromtimestamp(time.time() + wait, UTC).strftime("%H:%M:%S UTC")
            raise McpBackingOff(
                entry.server,
                "start",
                f"crashed {entry.crashes} times in a row; it is tried again in {wait:.1f} s (at {at})",
            )
        await self._make_room(entry)
        entry.tools_changed = False

        def changed() -> None:
            entry.tools_changed = True

        entry.session = self._connector.session(
            entry.server, entry.config, on_tools_changed=changed, http_auth=entry.http_auth
        )
        self.counts["started"] += 1

    async def _make_room(self, entry: _Entry) -> None:
        """Close least recently used idle sessions until ``entry`` may open one, or raise."""
        for scope, bound, setting in (
            (entry.tenant, self.max_per_tenant, "AVM_MCP_MAX_SESSIONS_PER_TENANT"),
            (None, self.max_per_host, "AVM_MCP_MAX_SESSIONS"),
        ):
            while self.open_sessions(scope) >= bound:
                idle = [
                    e
                    for e in self._entries.values()
                    if e.session is not None and e.leases == 0 and (scope is None or e.tenant == scope)
                ]
                if not idle:
                    whose = "this tenant's" if scope is not None else "this server's"
                    raise McpPoolFull(
                        entry.server,
                        "start",
                        f"is unavailable: {whose} {bound} MCP sessions are all in use by running turns"
                        f" ({setting}); try again when one ends",
                    )
                oldest = min(idle, key=lambda e: e.last_used)
                log.info("MCP session closed to make room", extra={"server": oldest.server})
                self.counts["evicted"] += 1
                await _close(oldest)
                self._entries.pop(oldest.key, None)

    def _crashed(self, entry: _Entry, why: str) -> None:
        self.counts["crashed"] += 1
        entry.crashes += 1
        delay = 0.0 if entry.crashes == 1 else self.backoff_base_s * 2 ** (entry.crashes - 2)
        entry.retry_at = self._clock() + min(delay, self.backoff_max_s)
        log.warning(
            "MCP session crashed",
            extra={"server": entry.server, "crashes": entry.crashes, "why": why, "retry_in_s": delay},
        )

    async def _failed(self, entry: _Entry, exc: McpUnavailable) -> None:
        if isinstance(exc, McpUnavailable) and entry.session is not None:
            self._crashed(entry, str(exc)[:200])
            await _close(entry)

    def _start_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="mcp-pool-sweeper")

    async def _sweep(self) -> None:
        period = max(0.05, min(self.idle_s / 4, 15.0))
        while self._entries:
            await asyncio.sleep(period)
            try:
                await self.close_idle()
            except Exception:  # noqa: BLE001 (the sweeper must outlive one bad close)
                log.exception("closing idle MCP sessions failed")


async def _close(entry: _Entry) -> None:
    session, entry.session = entry.session, None
    if session is not None:
        await session.aclose()


@dataclass
class McpLease:
    """One turn's hold on a pooled session (``ports.McpSession``); ``aclose`` gives it back."""

    pool: PooledMcpSessions
    key: _Key
    config: dict[str, Any]
    http_auth: Any = None
    _entry: _Entry | None = field(default=None, repr=False)
    _taking: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)  # parallel calls: one lease

    @property
    def server(self) -> str:
        return self.key[2]

    async def list_tools(self) -> list[ToolSpec]:
        entry = await self._held()
        entry.tools_changed = False  # a notification from now on marks this listing stale
        return await self._use(entry, lambda s: s.list_tools())

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressFn | None = None,
        on_elicit: ElicitFn | None = None,
    ) -> ToolOutput:
        entry = await self._held()
        return await self._use(
            entry, lambda s: s.call_tool(name, arguments, on_progress=on_progress, on_elicit=on_elicit)
        )

    async def get_task(self, task_id: str) -> McpTaskState:
        entry = await self._held()
        state: McpTaskState = await self._use(entry, lambda s: s.get_task(task_id))
        return state

    async def cancel_task(self, task_id: str) -> None:
        entry = await self._held()
        await self._use(entry, lambda s: s.cancel_task(task_id))

    async def answer_task(self, task_id: str, answers: Mapping[str, ElicitationAnswer]) -> None:
        entry = await self._held()
        await self._use(entry, lambda s: s.answer_task(task_id, answers))

    async def aclose(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            self.pool._release(entry)

    async def _held(self) -> _Entry:
        async with self._taking:
            entry = self._entry
            if entry is not None and (entry.session is None or not entry.session.alive):
                # crashed during this turn: let it go and take the pool's (restarted) session
                self.pool._release(entry)
                self._entry = entry = None
            if entry is None:
                self._entry = entry = await self.pool._acquire(self.key, self.config, self.http_auth)
            return entry

    async def _use(self, entry: _Entry, call: Callable[[SdkMcpSession], Any]) -> Any:
        session = entry.session
        assert session is not None
        try:
            result = await call(session)
        except McpUnavailable as exc:
            if entry.session is session:
                await self.pool._failed(entry, exc)
            raise
        entry.crashes = 0
        entry.retry_at = 0.0
        entry.last_used = self.pool._clock()
        return result


__all__ = ["McpBackingOff", "McpLease", "McpPoolFull", "PooledMcpSessions", "config_fingerprint"]
