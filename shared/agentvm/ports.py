"""Ports: what the core needs from the world. Adapters in ``agentvm.adapters`` implement them.

The core imports only this module (plus the domain modules), never boto3, pynamodb, sqlite3 or
FastAPI. Every port is async: adapters with blocking clients run them off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection, Mapping, Sequence

    from agentvm.llm import ModelEvent, ModelRequest, ToolSpec
    from agentvm.messages import Message
    from agentvm.records import (
        ApiKeyRecord,
        BudgetRecord,
        ConfigChange,
        ConfigValues,
        ContainerRecord,
        ImageRecord,
        ResourceHead,
        ResourceVersion,
        SandboxJob,
        SessionImport,
        SessionRecord,
        SessionSummary,
        TenantRecord,
        TenantStatus,
        ToolWait,
        TurnJob,
        TurnRecord,
        UsageRecord,
    )


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Outcome of an idempotent append: the stored message and whether this call created it."""

    message: Message
    seq: int
    created: bool


@dataclass(frozen=True, slots=True)
class SeqMessage:
    """A stored message with its per-session sequence number."""

    seq: int
    message: Message


class Store(Protocol):
    """Durable state: containers, images + sessions, messages, turns, usage.

    Reads are always scoped by tenant; an id of another tenant reads as absent.
    """

    # containers
    async def put_container(self, record: ContainerRecord) -> bool:
        """Create if absent. True if this call created it."""
        ...

    async def get_container(self, tenant_id: str, container_id: str) -> ContainerRecord | None: ...
    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]: ...

    # images (each with its one session)
    async def create_image(self, image: ImageRecord, session: SessionRecord) -> None: ...
    async def get_image(self, tenant_id: str, image_id: str) -> ImageRecord | None: ...
    async def list_images(self, tenant_id: str, container_id: str | None = None) -> list[ImageRecord]:
        """Newest first. ``container_id=None`` lists every image of the tenant."""
        ...

    async def put_image(self, image: ImageRecord) -> None:
        """Overwrite an existing image record (update, run, stop)."""
        ...

    async def delete_image(self, tenant_id: str, image_id: str) -> None:
        """Delete the image, its session and all its messages."""
        ...

    async def get_session(self, tenant_id: str, session_id: str) -> SessionRecord | None: ...

    # messages: one item per message, a per-session sequence
    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        """Append at the next sequence number. With a key, a repeated call returns the first result."""
        ...

    async def list_messages(self, session_id: str) -> list[Message]:
        """The whole history, oldest first (for ``image_messages_request``)."""
        ...

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The last ``limit`` messages, oldest first."""
        ...

    async def recent_messages_after(
        self, session_id: str, after_seq: int, limit: int, *, fresh: bool = True
    ) -> list[SeqMessage]:
        """The last ``limit`` messages whose seq is above ``after_seq``, oldest first, with their seqs.

        What a turn reads (``after_seq``: what the session's compaction summary covers): one
        bounded read, whatever the length of the history. ``fresh=False``: the newest messages
        may be missing for a moment (on DynamoDB an eventually consistent read, half the price);
        the caller checks what it needs is there (``agent.context.load_context``).
        """
        ...

    # compaction summaries: one per session, only ever replaced by one covering more messages
    async def put_summary(self, summary: SessionSummary) -> bool:
        """Store unless the session's summary covers as much already (``upToSeq``). True if stored."""
        ...

    async def get_summary(self, session_id: str) -> SessionSummary | None: ...

    # turns and usage
    async def put_turn(self, turn: TurnRecord) -> None: ...
    async def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    async def put_usage(self, usage: UsageRecord) -> bool:
        """Idempotent by ``turnId`` (first write wins). True if this call stored it: only then is
        the usage counted against budgets, so a retried turn never counts twice."""
        ...

    async def list_usage(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        """The tenant's usage records (of one container), oldest first; with ``since_ms``, only
        those created at or after it (a session export reads from its session's creation on, not
        the tenant's whole history)."""
        ...

    # interrupt marks: set by the gateway, checked by the worker (turns/cancel_poll.py)
    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        """Mark the turn cancelled; then, if its record (read after the mark is written) says it
        is ``running`` under a poller, make it one of that poller's ``cancel_requests``."""
        ...

    async def is_cancel_requested(self, session_id: str, turn_id: str, *, fresh: bool = True) -> bool:
        """``fresh=False``: a poll that looks again soon may read a mark a moment late (on
        DynamoDB an eventually consistent read, half the price)."""
        ...

    async def cancel_requests(self, poller: str) -> set[str]:
        """The turns ``request_cancel`` found running under ``poller`` (its running record named
        it): one read for all of them, which may be a moment late (a poll that looks again soon; on
        DynamoDB an eventually consistent Query). A turn cancelled before its running record named
        the poller may be missing: its attempt reads ``is_cancel_requested`` after that write."""
        ...


class ToolWaits(Protocol):
    """The tool calls suspended turns wait on (``records.ToolWait``), by ``(turnId, toolCallId)``."""

    async def put_wait(self, wait: ToolWait) -> bool:
        """Create if absent. True if this call created it."""
        ...

    async def get_wait(self, turn_id: str, call_id: str) -> ToolWait | None: ...
    async def turn_waits(self, turn_id: str) -> list[ToolWait]:
        """Every wait of one turn, consumed ones included."""
        ...

    async def decide(self, turn_id: str, call_id: str, changes: Mapping[str, Any]) -> ToolWait | None:
        """Apply ``changes`` if the wait is still ``pending`` (atomically); the wait as it is now,
        or None if it was not pending (decided already) or does not exist."""
        ...

    async def consume(self, turn_id: str, call_id: str) -> None:
        """The call's result is stored: the wait is done (no longer listed nor swept)."""
        ...

    async def reschedule(self, wait: ToolWait, check_at: int) -> None:
        """Set when the sweeper looks at this (unconsumed) wait next."""
        ...

    async def list_waits(self, tenant_id: str, container_id: str | None = None) -> list[ToolWait]:
        """The tenant's unconsumed waits (of one container), oldest first."""
        ...

    async def due_waits(self, now_ms: int, limit: int) -> list[ToolWait]:
        """Unconsumed waits whose ``checkAt`` has passed, across tenants (for the sweeper)."""
        ...


class TenantStore(Protocol):
    """The tenant registry. Records are never removed: a deleted tenant stays as a tombstone."""

    async def create_tenant(self, tenant: TenantRecord) -> bool:
        """Create if the id is free (tombstones included). True if this call created it."""
        ...

    async def get_tenant(self, tenant_id: str) -> TenantRecord | None:
        """The tenant in any status; None if the id was never registered."""
        ...

    async def replace_tenant(self, tenant: TenantRecord, *, status: TenantStatus) -> bool:
        """Overwrite the tenant only if its stored status is still ``status`` (atomically), so an
        update never revives a tenant being deleted. True if written."""
        ...

    async def list_tenants(
        self, *, statuses: Collection[TenantStatus] | None = None, limit: int = 100, after: str | None = None
    ) -> tuple[list[TenantRecord], str | None]:
        """Up to ``limit`` tenants (in one of ``statuses``; None: any) by id, after the id ``after``;
        and the cursor of the next page (None on the last)."""
        ...


class TenantPurge(Protocol):
    """Deletes a deleted tenant's conversations at once, where the host can do that cheaply.

    Containers, images, sessions, messages, turns and workspaces go; usage records stay (they are
    what the tenant is billed for). Hosts without one keep the conversations (docs/tenants.md).
    """

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete them; returns how many images (conversations) there were."""
        ...


class ConfigStore(Protocol):
    """The config centre's values set through the API, one record per scope, and its audit log."""

    async def get_values(self, scope: str) -> ConfigValues | None: ...
    async def put_values(self, values: ConfigValues, changes: Sequence[ConfigChange]) -> bool:
        """Store ``values`` (whose ``version`` is one more than the stored one's, or 1 for a new
        scope) and append ``changes`` to the audit log; False if another write came first."""
        ...

    async def list_changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        """The scope's audit log, newest first."""
        ...


class ResourceStore(Protocol):
    """The resource centre's versions, heads (by name) and dependency edges, per tenant.

    An edge says "``dependent`` refers to ``(tenant, kind, name)`` with ``selector``" (a version,
    ``latest`` or a tag); ``dependent`` is ``"<tenant>|<uri>"`` of the referring version.
    """

    async def create_version(self, version: ResourceVersion) -> bool:
        """Create if absent (versions are immutable). True if this call created it."""
        ...

    async def get_version(
        self, tenant_id: str, kind: str, name: str, version: str
    ) -> ResourceVersion | None: ...
    async def list_versions(self, tenant_id: str, kind: str, name: str) -> list[ResourceVersion]:
        """Oldest first (by ``seq``)."""
        ...

    async def delete_version(self, tenant_id: str, kind: str, name: str, version: str) -> None: ...
    async def put_head(self, head: ResourceHead, *, force: bool = False) -> bool:
        """Store unless a head with a higher ``seq`` is stored (a later publish won); ``force``:
        always (after a delete). True if stored."""
        ...

    async def get_head(self, tenant_id: str, kind: str, name: str) -> ResourceHead | None: ...
    async def delete_head(self, tenant_id: str, kind: str, name: str) -> None: ...
    async def list_heads(self, tenant_id: str, kind: str | None = None) -> list[ResourceHead]:
        """By kind, then name."""
        ...

    async def add_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        """``targets``: (tenant, kind, name, selector) the dependent refers to."""
        ...

    async def remove_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None: ...
    async def dependents(self, tenant_id: str, kind: str, name: str) -> list[tuple[str, str]]:
        """(dependent, selector) of every edge to the named resource."""
        ...


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """A word or a "quoted phrase" of a message search, as tokens (``agentvm.sessions.search``);
    ``prefix``: its last token matches any token that starts with it."""

    tokens: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class SearchPosition:
    """Where a page of search results ended; the next page continues after it. Results come by
    image (newest first: ``createdAt``, then id), then by message (newest first: ``seq``)."""

    created_at: int
    image_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class MessageHit:
    image: ImageRecord
    seq: int
    message: Message


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[MessageHit]
    next: SearchPosition | None  # None: there is nothing more


class SessionArchive(Protocol):
    """Whole sessions written at once (imports and forks) and message search (``agentvm.sessions``).

    A write is claimed first in a ledger (``SessionImport``, by tenant and key), so a retried one
    returns the first result and a crashed one can be finished or cleaned up; readers never see a
    half-written session: the image, which makes it listed, is written last.
    """

    async def claim_import(self, claim: SessionImport) -> SessionImport:
        """Store ``claim`` if its key is free for its tenant; returns the entry as stored now."""
        ...

    async def replace_import(self, stored: SessionImport, claim: SessionImport) -> bool:
        """Replace the entry by ``claim`` only if it is still exactly ``stored``. True if replaced."""
        ...

    async def write_import(
        self,
        claim: SessionImport,
        image: ImageRecord,
        session: SessionRecord,
        messages: Sequence[Message],
        summary: SessionSummary | None,
    ) -> SessionImport:
        """Write the session, its messages (seqs 1..n), its summary and the image, then mark the claim
        ``done`` (returned). Raises ``Conflict`` if the claim is no longer this writer's."""
        ...

    async def discard_import(self, claim: SessionImport) -> None:
        """Delete what a failed ``write_import`` of ``claim`` left behind, and the claim if it is
        still this writer's (so the key can be imported again)."""
        ...

    async def search_messages(
        self,
        tenant_id: str,
        terms: Sequence[SearchTerm],
        *,
        container_id: str | None,
        limit: int,
        after: SearchPosition | None,
    ) -> SearchPage:
        """Up to ``limit`` user and assistant messages of the tenant (of one container) whose text
        holds every term, after ``after``. A page may hold fewer (even none) and still have a
        ``next``: an adapter that scans stops at its budget per call."""
        ...


class TurnQueue(Protocol):
    """Where accepted turns wait for a worker. Turns of one session run in order."""

    async def enqueue(self, job: TurnJob) -> None:
        """Idempotent by ``job.jobKey``."""
        ...


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    connection_id: str
    tenant_id: str | None  # None until authenticated
    connected_at: int
    key_id: str | None = None  # the API key that authenticated it (None: open mode, or not yet)
    # The protocol its first frame chose (``PROTOCOLS``); None: no frame yet, or (AWS) v1, which
    # is never recorded (docs/protocol.md, "AgentX v2").
    protocol: str | None = None
    # Declared at the upgrade (``?frames=batch``, streaming/batching.py): one WebSocket message may
    # carry several frames (a JSON array). False: one frame per message, as AgentX clients expect.
    batch: bool = False
    # When the adapter forgets it (epoch seconds; None: never, e.g. in memory). Read with the
    # connection, so that ``subscribe(..., known=info)`` need not read it again.
    expires_at: int | None = field(default=None, compare=False)
    # The sessions it was subscribed to when read, each with its stored cursor (None: none), as far
    # as the adapter read them in the same request (AWS: the first few); a session not in it may
    # still be subscribed. ``subscribe(..., known=info)`` skips a write that would change nothing.
    subscribed: Mapping[str, int | None] = field(default_factory=dict, compare=False)


PROTOCOL_V1 = "v1"  # AgentX 1.x SystemEvent frames
PROTOCOL_V2 = "v2"  # AgentX 2.x JSON-RPC 2.0 frames
PROTOCOLS = (PROTOCOL_V1, PROTOCOL_V2)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscriber of a session: its cursor (``after_seq``) and the protocol it is sent frames in."""

    connection_id: str
    after_seq: int | None = None
    protocol: str = PROTOCOL_V1
    batch: bool = False  # its connection takes batched frames (ConnectionInfo.batch)
    # When it was first made (epoch ms), where the adapter records it (AWS; None: not recorded). A
    # turn whose user message was saved after it sends it the turn from its first frame even if its
    # worker finds it late (the AWS index lags), as a cursor of 0 would (``streaming.sink``).
    subscribed_at: int | None = field(default=None, compare=False)


class Connections(Protocol):
    """Live WebSocket connections, who they are, and which sessions they subscribed to."""

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        """Record the connection (again, after an ``auth`` frame). ``tenant_cap`` > 0: raises
        ``RateLimited`` instead if its tenant already holds that many live connections and this
        one is not one of them (``security/tenant_limits.py``)."""
        ...

    async def get(self, connection_id: str) -> ConnectionInfo | None: ...
    async def remove(self, connection_id: str) -> None: ...
    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,
    ) -> None:
        """Subscribe (idempotent). ``after_seq``: the last frame seq the connection has of the session,
        so the running turn's worker sends it what came after (resume). Subscribing again without
        one keeps the cursor a previous call stored; with one, replaces it. ``known``: the
        connection as ``get`` returned it for this very frame (an adapter need not read it again)."""
        ...

    async def subscribers(self, session_id: str) -> Sequence[str]: ...
    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        """``subscribers``, each with the ``after_seq`` it subscribed with (None: none given)."""
        ...

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        """The subscribers with their cursors and protocols: the one lookup a turn's worker makes."""
        ...

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        """Record ``protocol`` as the connection's unless one is recorded; returns the connection's.
        Called for a connection whose ``get`` shows none. A subscription carries the protocol its
        connection had when it was made. An adapter may leave v1 unrecorded (the default) when
        recording costs a write: then a connection that subscribed before its first v2 frame is v1."""
        ...


class Push(Protocol):
    """Deliver one serialised frame to one connection. Raises ``ConnectionGone`` (HTTP 410)."""

    async def send(self, connection_id: str, payload: str) -> None: ...


class ModelClient(Protocol):
    """A model provider. See ``agentvm.llm`` for the event contract."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


class ModelResolver(Protocol):
    """Maps a model reference like ``anthropic/claude-haiku-4-5`` to a client and model name."""

    def resolve(self, ref: str | None) -> tuple[ModelClient, str, str]:
        """Returns (client, provider model name, canonical "provider/name"). None = default."""
        ...


@dataclass(frozen=True, slots=True)
class FileChange:
    """A workspace file a sandbox tool created, modified or deleted (sent as ``file_changed``)."""

    path: str  # relative to the workspace root
    change: str  # "created" | "modified" | "deleted"
    size: int = 0


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned: text for the model (JSON is serialised), and whether it is an error;
    a sandbox tool also says which workspace files it changed."""

    text: str
    is_error: bool = False
    files: tuple[FileChange, ...] = ()


class Tool(Protocol):
    """One callable tool of a turn (an HTTP declaration, an MCP server's tool, a built-in).

    ``call`` gets input already validated against ``spec.input_schema``. It may raise: the turn
    turns any exception into an error result for the model (``agent.tools.Toolbox``), and it is
    cancelled on interrupt or when ``timeout_s`` passes (None: the toolbox default).
    """

    @property
    def spec(self) -> ToolSpec: ...
    @property
    def timeout_s(self) -> float | None: ...
    @property
    def idempotent(self) -> bool:
        """Safe to run again when a worker died while it ran (else it is reported as interrupted)."""
        ...

    async def call(self, arguments: dict[str, Any]) -> ToolOutput: ...


class McpSession(Protocol):
    """A connection to one MCP server for the length of a turn (or of one tool listing)."""

    async def list_tools(self) -> list[ToolSpec]: ...
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutput: ...
    async def aclose(self) -> None: ...


class McpConnector(Protocol):
    """Opens MCP sessions (official ``mcp`` SDK): stdio, Streamable HTTP or SSE, by config.

    ``config`` is the image's validated AgentX ``McpServerConfig`` as a dict. Opening does no I/O;
    the session connects on first use, so a turn that calls no MCP tool never connects.
    """

    def session(self, server: str, config: Mapping[str, Any]) -> McpSession: ...


@dataclass(frozen=True, slots=True)
class HttpToolResponse:
    status: int
    text: str  # the body, decoded; at most ``max_bytes`` of it (``truncated`` says so)
    truncated: bool = False


class HttpToolClient(Protocol):
    """Sends the request of an HTTP tool declaration (an ``httpx`` adapter)."""

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json_body: Any = None,
        timeout_s: float,
        max_bytes: int,
    ) -> HttpToolResponse: ...


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one sandbox job may use. Past a limit the job is stopped and the result says which."""

    wall_s: float = 30.0  # seconds of real time
    cpu_s: int = 20  # seconds of CPU time
    memory_mb: int = 512  # the job's memory (its cgroup), or each process's address space (rlimit)
    output_bytes: int = 64 * 1024  # stdout and stderr together; the rest is cut
    file_mb: int = 64  # the largest file a job may write (and the size of its private /tmp)
    processes: int = 128  # processes alive at once in the job (where it has a cgroup)


@dataclass(frozen=True, slots=True)
class SandboxRun:
    """How a sandbox job ended: its exit code (None when it was stopped), its output (stdout and
    stderr interleaved, cut at the limit), and which limit stopped it, if one did."""

    exit_code: int | None
    output: str
    truncated: bool = False
    # "wall_time" | "cpu_time" | "memory" | "processes" | "output" | "file_size" | "workspace" | "shutdown"
    stopped_by: str | None = None


@dataclass(frozen=True, slots=True)
class WorkspaceEntry:
    path: str  # relative to the workspace root
    kind: str  # "file" | "dir" | "link" | "other" (a FIFO, socket or device)
    size: int


@dataclass(frozen=True, slots=True)
class WorkspaceQuota:
    """What one container's workspace may hold, whatever its jobs and tools do."""

    max_bytes: int = 256 * 1024 * 1024  # the regular files' sizes, added up
    max_entries: int = 20_000  # files, directories, links and others


@dataclass(frozen=True, slots=True)
class WorkspaceScan:
    """What a workspace holds: every regular file (``{path: (size, mtime_ns)}``), the bytes of
    those files, and its entries of every kind (files, directories, links, others). ``complete``
    is False when a bound (entries, depth, time) cut the walk: the counts are then at least."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    bytes: int = 0
    entries: int = 0
    complete: bool = True


class Sandbox(Protocol):
    """A persistent workspace per (tenant, container), and jobs run in it under limits.

    Paths are relative to the workspace root (or under ``/workspace``). ``..``, another absolute
    path, a symlink at any component, and anything but a regular file or a directory raise
    ``ValueError``, whose message names the given path and never a host path. A job sees its own
    workspace only. A workspace past its quota (bytes, entries) refuses writes.
    """

    @property
    def isolated(self) -> bool:
        """Whether jobs run isolated (no other files, no network) or as plain processes."""
        ...

    async def run(
        self,
        tenant_id: str,
        container_id: str,
        argv: Sequence[str],
        *,
        stdin: str | None,
        limits: SandboxLimits,
    ) -> SandboxRun: ...
    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes: ...
    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None: ...
    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]: ...
    async def scan(self, tenant_id: str, container_id: str) -> WorkspaceScan:
        """What the workspace holds (its files, bytes and entries), walked within the sandbox's
        bounds (``complete`` says whether one cut the walk)."""
        ...


class SandboxJobs(Protocol):
    """Where sandbox jobs go when this host does not run them in the turn (AWS: their own queue
    and worker). Idempotent by ``(turnId, waitId)``."""

    async def submit(self, job: SandboxJob) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def monotonic(self) -> float: ...


class Ids(Protocol):
    def new(self, prefix: str) -> str:
        """A new opaque id like ``img_mk2x9a_q8w7e6``."""
        ...


class KeyStore(Protocol):
    """API keys by ``keyId`` (one point read per verification) and by tenant (for listing)."""

    async def put_key(self, key: ApiKeyRecord) -> None:
        """Create or replace the key with this ``keyId`` (replace: re-hashing after a rotation)."""
        ...

    async def get_key(self, key_id: str) -> ApiKeyRecord | None: ...
    async def list_keys(self, tenant_id: str) -> list[ApiKeyRecord]:
        """The tenant's keys, revoked ones included, oldest first."""
        ...

    async def revoke_key(
        self, key_id: str, *, revoked_at: int, tenant_id: str | None = None
    ) -> ApiKeyRecord | None:
        """Mark the key revoked (a key revoked already keeps its first ``revokedAt``).

        With ``tenant_id``, only a key of that tenant (another tenant's key reads as absent).
        Returns the key as stored after the call, or None if there is no such key.
        """
        ...


@dataclass(frozen=True, slots=True)
class CounterLease:
    """What ``Counters.lease`` took: ``granted`` (0 when nothing was left) and the field's value
    after it (``total``; the value it found when it took nothing)."""

    granted: int
    total: int


class Counters(Protocol):
    """Atomic counters with an expiry: token usage per window, requests per minute, stored bytes.

    A counter is a set of named integer fields under one key (so one write adds to a month's total
    and to that day's field at once). Once ``expires_at`` has passed, the counter reads as empty
    and the next ``incr`` (or ``lease``) starts it over from zero.
    """

    async def incr(self, key: str, amounts: Mapping[str, int], *, expires_at: int) -> dict[str, int]:
        """Atomically add ``amounts`` to the fields; returns those fields' new values.

        ``expires_at`` is in epoch seconds (the end of the counter's window). Field names are
        1-16 characters of ``[a-z0-9]``.
        """
        ...

    async def lease(
        self, key: str, field: str, amount: int, *, limit: int, expires_at: int, whole: bool = False
    ) -> CounterLease:
        """Atomically add up to ``amount`` to ``field`` without taking it over ``limit``.

        Adds ``amount`` if the field stays at or under ``limit``; otherwise what is left
        (``limit - value``, at least 1); when nothing is left it writes nothing and grants 0. The
        sum of every lessee's grants within a window is therefore never over ``limit``, whatever
        runs concurrently (``security/ratelimit.py`` leases requests per key this way).
        ``1 <= amount``, ``1 <= limit``; an ``amount`` over ``limit`` is taken as ``limit``.
        ``expires_at`` is as for ``incr``.

        ``whole``: all or nothing. ``amount`` is granted only if all of it fits (an ``amount`` over
        ``limit`` never does); otherwise nothing is written and 0 granted, with the field's value
        as ``total`` (``security/storage_quota.py`` reserves bytes this way).
        """
        ...

    async def get(self, key: str) -> dict[str, int]:
        """Every field of the counter; empty if it does not exist or has expired."""
        ...


class BudgetStore(Protocol):
    """Token budgets of tenants and of their containers."""

    async def put_budget(self, budget: BudgetRecord) -> None:
        """Create or replace the budget of ``(tenantId, containerId)``."""
        ...

    async def get_budget(self, tenant_id: str, container_id: str | None = None) -> BudgetRecord | None:
        """The tenant-wide budget (``container_id=None``) or that of one container of the tenant."""
        ...

    async def delete_budgets(self, tenant_id: str) -> int:
        """Delete the tenant's budgets (its own and its containers'); returns how many there were."""
        ...


@dataclass(frozen=True, slots=True)
class UsageCell:
    """Usage records summed: one tenant's, in one UTC hour or day (``start_ms``), of one model and
    kind, and (day cells) of one container and image. Several cells with the same key add up."""

    tenant_id: str
    start_ms: int  # the hour's or the day's first millisecond (UTC)
    model: str
    kind: str  # "turn" | "step" | "compaction"
    container_id: str | None = None  # day cells only
    image_id: str | None = None  # day cells only
    records: int = 0
    input_tokens: int = 0  # cache reads and writes included
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: int = 0  # records whose tokens are estimates (the provider never reported them)


class UsageRollups(Protocol):
    """The stored usage records, summed per hour and per day (``observability.usage`` reads these).

    Every cell equals the sum of the records it covers, whatever failed or was retried: on AWS closed
    hours are rolled up from the records and the others read from them; locally SQL sums the records.
    """

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        """The tenant's cells per UTC hour, by model and kind, of the hours starting in
        ``[start_ms, end_ms)`` (both on hour boundaries)."""
        ...

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        """The tenant's cells per UTC day, by container, image, model and kind, of the days starting
        in ``[start_ms, end_ms)`` (both on day boundaries); of one container if given."""
        ...

    async def tenants_with_usage(self, start_ms: int, end_ms: int) -> list[str]:
        """Tenants that may have usage in ``[start_ms, end_ms)`` (a superset is allowed), sorted."""
        ...


@dataclass(frozen=True, slots=True)
class RunningTurn:
    """A turn accepted and not yet finished (queued, running or suspended), as the gateway saw it."""

    tenant_id: str
    container_id: str
    image_id: str
    session_id: str
    turn_id: str
    queued_at: int  # epoch ms
    model: str | None = None  # the image's model when the turn was sent (None: the server default)


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """The tokens of a turn's model calls that have finished (each is billed as it ends)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class RunningTurns(Protocol):
    """The turns not finished yet, per tenant and container (``observability.running``): marked by
    the gateway when it queues a turn, unmarked by the worker when the turn ends. A mark outliving
    its turn (a worker died before unmarking) is removed by the next listing that finds the turn
    finished."""

    async def mark(self, turn: RunningTurn) -> None:
        """Idempotent by ``(tenant_id, turn_id)``."""
        ...

    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None: ...
    async def running(
        self, tenant_id: str, container_id: str | None = None, limit: int = 500
    ) -> list[RunningTurn]:
        """The tenant's marked turns (of one container), oldest first, at most ``limit``."""
        ...

    async def tokens(self, turn_ids: Sequence[str]) -> dict[str, TurnTokens]:
        """The billed tokens so far of each turn (its usage records: the first call, then steps)."""
        ...


Json = dict[str, Any]

__all__ = [
    "AppendResult",
    "BudgetStore",
    "Clock",
    "ConnectionInfo",
    "FileChange",
    "HttpToolClient",
    "HttpToolResponse",
    "Connections",
    "CounterLease",
    "Counters",
    "Ids",
    "Json",
    "KeyStore",
    "McpConnector",
    "McpSession",
    "MessageHit",
    "ModelClient",
    "ModelResolver",
    "Push",
    "RunningTurn",
    "RunningTurns",
    "Sandbox",
    "ResourceStore",
    "SandboxJobs",
    "SandboxLimits",
    "SandboxRun",
    "SearchPage",
    "SearchPosition",
    "SearchTerm",
    "SeqMessage",
    "SessionArchive",
    "Store",
    "TenantPurge",
    "TenantStore",
    "Tool",
    "ToolOutput",
    "ToolWaits",
    "TurnQueue",
    "TurnTokens",
    "UsageCell",
    "UsageRollups",
    "WorkspaceEntry",
    "WorkspaceQuota",
    "WorkspaceScan",
    # AgentX v2 (gateway/v2/rpc.py)
    "PROTOCOLS",
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "Subscription",
]
