"""Stored records: containers, images, sessions, turns, usage, API keys and budgets, and the few
names every floor derives from them: the terminal turn statuses (``TERMINAL``), a turn's id from
its user message's (``turn_id_for``), an untitled image's name (``DEFAULT_IMAGE_NAME``) and a
container's workspace name (``workspace_digest``).

Every record carries ``tenantId``: container ids are chosen by clients but scoped by tenant, so
tenant A's ``user-alice`` and tenant B's ``user-alice`` are different containers.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ConcurrencyPolicy = Literal["queue", "reject", "interrupt"]
TurnStatus = Literal["queued", "running", "suspended", "completed", "interrupted", "failed"]
# ``mcp_task``: a 2026-07-28 MCP task that outlives its turn worker's inline follow (AWS:
# turns/mcp_tasks.py; docs/mcp.md, "AWS: a task that outlives a Lambda").
WaitKind = Literal["approval", "client", "sandbox", "mcp_task"]
WaitStatus = Literal["pending", "approved", "denied", "answered", "timed_out", "cancelled"]
UsageKind = Literal["turn", "step", "compaction", "title", "reply_cache", "embedding"]
Scope = Literal["admin", "client"]
TenantStatus = Literal["active", "deleting", "deleted"]

# A turn in one of these statuses is over: a redelivered job for it does nothing.
TERMINAL: frozenset[str] = frozenset({"completed", "interrupted", "failed"})
DEFAULT_IMAGE_NAME = "New Conversation"  # an image created with no name (auto-titled: turns/title.py)


def turn_id_for(user_message_id: str) -> str:
    """The turn that answers a user message: one per message, its id derived from the message's."""
    return "turn_" + user_message_id.removeprefix("msg_")


def user_message_id_for(turn_id: str) -> str:
    """The user message a turn answers: ``turn_id_for`` read backwards."""
    return "msg_" + turn_id.removeprefix("turn_")


def workspace_digest(tenant_id: str, container_id: str) -> str:
    """The name of a container's workspace (a directory here, an S3 prefix on AWS): a hash of the
    ids, so client-chosen names never become path components and tenants never share one."""
    return hashlib.sha256(f"{tenant_id}\0{container_id}".encode()).hexdigest()[:40]


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)  # built on first use: cold starts


class ContainerRecord(_Record):
    tenantId: str
    containerId: str
    createdAt: int
    updatedAt: int


class ImageRecord(_Record):
    """A built agent config: what users see as a conversation. One image owns one session."""

    tenantId: str
    imageId: str
    containerId: str
    sessionId: str
    name: str
    description: str | None = None
    systemPrompt: str | None = None
    model: str | None = None  # "provider/model"; None = the server default
    mcpServers: dict[str, Any] | None = None  # AgentX McpServerConfig map (agent/tools/declarations.py)
    tools: list[dict[str, Any]] | None = None  # HTTP and built-in tool declarations (agent/tools/)
    maxSteps: int | None = None  # model calls per turn; None = DEFAULT_MAX_STEPS
    promptCaching: bool | None = None  # False: no prompt-cache breakpoints; None = on (llm.promptCaching)
    # Which tools need a person's approval before they run: {"tools": [names] | "*", "timeoutS": n}
    approval: dict[str, Any] | None = None
    # The MCP servers' tool lists (agent/tools/sources.py), listed again past AVM_MCP_TOOLS_TTL_S or
    # on list_changed: {"key": <fingerprint of mcpServers>, "servers": {name: [{name, description,
    # inputSchema}]}, "listedAt": <epoch seconds>}
    toolCatalog: dict[str, Any] | None = None
    concurrency: ConcurrencyPolicy = "queue"
    # Batched connections' text cadence on this image's turns, unless they ask for one
    # (streaming/batch_cadence.py): "live" or "economy"; None = the tenant's ``streaming.cadence``
    cadence: Literal["live", "economy"] | None = None
    # Side calls' model (titles, compaction): None = the model's cheap sibling, "" = the model itself
    # (agent/side_model.py)
    sideModel: str | None = None
    # Mixed-model routing (agent/model_policy.py): None = off
    fastModel: str | None = None
    fastMaxChars: int | None = None  # the short-first-message rule's limit; None = 200
    # The reply cache of common first questions (turns/reply_cache.py): {"enabled": bool, "ttlS": n};
    # None = off
    replyCache: dict[str, Any] | None = None
    # The context diet (agent/diet.py): {"enabled", "keepSteps", "maxResultChars", "headChars"};
    # None = off
    contextDiet: dict[str, Any] | None = None
    # Built from an agent resource (``agentvm.resources.build``): the definition as written, the
    # exact versions it is pinned to, the dependency edges it holds, and the earlier builds.
    build: dict[str, Any] | None = None
    # An application's own data (AgentX 2.x customData): stored and returned, never read
    customData: dict[str, Any] | None = None
    agentId: str | None = None  # set while the image is "running" (online)
    createdAt: int
    updatedAt: int

    def to_wire(self) -> dict[str, Any]:
        """The protocol's ImageListItem: record fields minus mcpServers/tenant, plus ``online``."""
        out: dict[str, Any] = {
            "imageId": self.imageId,
            "containerId": self.containerId,
            "sessionId": self.sessionId,
            "name": self.name,
            "createdAt": self.createdAt,
            "updatedAt": self.updatedAt,
            "online": self.agentId is not None,
        }
        for key in ("description", "systemPrompt", "model", "customData", "agentId"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.build is not None:  # additive: what a built image is pinned to
            out["build"] = {k: v for k, v in self.build.items() if k != "targets"}
        return out


class SessionRecord(_Record):
    tenantId: str
    sessionId: str
    imageId: str
    containerId: str
    createdAt: int
    updatedAt: int


class TurnJob(_Record):
    """What the queue carries: enough to run one turn without any other lookup but the image."""

    turnId: str
    tenantId: str
    containerId: str
    imageId: str
    sessionId: str
    agentId: str
    userMessageId: str
    requestId: str
    enqueuedAt: int
    # The user message's per-session seq and its timestamp: the turn's frames are numbered from
    # the seq (``core.frames``), and its first frame, ``message_persisted``, carries the time.
    userSeq: int = 0
    userSavedAt: int = 0
    # A continuation of a suspended turn: what resumed it ("<toolCallId>:<status>"), so each
    # decision enqueues its own job (the queues deduplicate by ``jobKey``).
    resume: str | None = None
    # AgentX v2: the ``message.send`` its worker answers when the turn ends (or suspends): the
    # connection it came on and its JSON-RPC id (``gateway.agentx_v2``). None: nothing to answer.
    rpcConnectionId: str | None = None
    rpcId: str | int | None = None

    @property
    def jobKey(self) -> str:
        return self.turnId if self.resume is None else f"{self.turnId}#{self.resume}"


class FrameMap(_Record):
    """What one attempt of a turn sent, compactly: enough to send it again to a resuming client.

    Frame ``i`` had seq ``firstSeq + i``. ``kinds[i]`` is its event type, or, for a ``text_delta``,
    the length of the turn's text once that frame was sent (an int: all its steps' text, every part
    of a continued turn's included): the text itself is the stored replies'. ``data`` holds, by frame
    index, the ``data`` of the frames that storage does not hold (``message_start``,
    ``message_stop``, ``conversation_end``...); messages come from storage.

    ``earlier``: the maps of the turn's parts before this attempt, oldest first, when it continues a
    turn that suspended (``streaming.frames``, "Continued turns"): each one attempt's frames, with
    no ``earlier`` of its own. Empty for a turn that never suspended.
    """

    firstSeq: int
    kinds: list[str | int] = Field(default_factory=list)
    data: dict[str, dict[str, Any]] = Field(default_factory=dict)
    agentId: str = ""
    earlier: list[FrameMap] = Field(default_factory=list)


class TurnRecord(_Record):
    turnId: str
    sessionId: str
    status: TurnStatus
    updatedAt: int
    userSeq: int = 0  # the user message's seq (0: a record from before sequence numbers)
    attempt: int = 0  # which run of the turn wrote this (a retry after a worker died: one more)
    # with ``suspended`` or a terminal status: what the turn sent (resume); with ``running``: what
    # the parts before the running attempt sent (a continuation's; None for a turn never suspended)
    frames: FrameMap | None = None
    # with ``running`` on a host that polls for interrupts (AWS): the worker's poller id, under
    # which an interrupt marks the turn too (turns/cancel_poll.py); None: nobody polls for it
    poller: str | None = None


class ToolWait(_Record):
    """A tool call a suspended turn waits on: a person's approval, or the client's result.

    Created ``pending`` by the turn's worker; decided exactly once (a conditional write: approved,
    denied, answered, timed_out or cancelled), and the decision enqueues ``job`` with ``resume`` set
    (the continuation). ``consumed`` once a worker stored the call's result. ``checkAt`` is when
    the sweeper looks at it next: the deadline while pending, then a backstop that enqueues the
    continuation again if a decided wait was never consumed (a lost enqueue).
    """

    tenantId: str
    containerId: str
    imageId: str
    sessionId: str
    turnId: str
    toolCallId: str
    toolName: str
    input: dict[str, Any] = Field(default_factory=dict)
    kind: WaitKind
    status: WaitStatus = "pending"
    createdAt: int
    deadlineAt: int
    checkAt: int
    decidedAt: int | None = None
    decidedBy: str | None = None  # the API key id that decided it (None: the open mode, the sweeper)
    reason: str | None = None  # a denial's or cancellation's reason
    output: str | None = None  # a client tool's or a sandbox job's result, as the model reads it
    isError: bool = False
    # an MCP task's rich result beside ``output``: its stored ``content`` parts (text and media, within
    # the host's media limits) and ``structuredContent``; what the continuation stores, as inline
    content: list[dict[str, Any]] = Field(default_factory=list)
    structured: Any = None
    files: list[dict[str, Any]] = Field(default_factory=list)  # a sandbox job's changed files
    consumed: bool = False
    job: TurnJob
    # an ``mcp_task`` wait's task (turns/mcp_tasks.py): ``server``, ``sealedTaskId`` (the task id is
    # the server's bearer token for it: sealed, and never in ``to_wire``), ``pollMs``, and what the
    # client was last told (``reports``, ``message``)
    task: dict[str, Any] | None = None

    @property
    def callId(self) -> str:
        """The tool call's id (a sandbox job's wait is keyed ``<call id>#job``, an MCP task's
        ``<call id>#task``: the same call may have waited for approval first)."""
        return self.toolCallId.removesuffix(JOB_SUFFIX).removesuffix(TASK_SUFFIX)

    def to_wire(self) -> dict[str, Any]:
        """What clients see: no tenant, no job."""
        out = self.model_dump(
            include={
                "containerId",
                "imageId",
                "sessionId",
                "turnId",
                "toolCallId",
                "toolName",
                "input",
                "kind",
                "status",
                "createdAt",
                "deadlineAt",
                "decidedAt",
                "reason",
            }
        )
        return {k: v for k, v in out.items() if v is not None}


JOB_SUFFIX = "#job"
TASK_SUFFIX = "#task"


class SandboxJob(_Record):
    """One sandbox tool call for the sandbox worker (AWS: the sandbox queue). Its result answers
    the wait ``(turnId, waitId)``; a job whose wait is no longer pending is dropped."""

    turnId: str
    waitId: str  # the wait's toolCallId: "<call id>#job"
    tenantId: str
    containerId: str
    tool: str  # sh | python | read | write | edit | ls
    input: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)  # SandboxLimits fields
    enqueuedAt: int = 0


# The path segment of each kind in resource URIs (resource://<plural>/<name>).
RESOURCE_PLURALS = {
    "prompt": "prompts",
    "tool": "tools",
    "sandbox": "sandboxes",
    "agent": "agents",
    "knowledge": "knowledge",
    "file": "files",
}


class ResourceVersion(_Record):
    """One immutable version of a resource of the resource centre (``agentvm.resources``)."""

    tenantId: str
    kind: str
    name: str
    version: str
    seq: int  # publish order among the name's versions: 1, 2, ...
    spec: dict[str, Any]
    description: str | None = None
    dependencies: list[str] = Field(default_factory=list)  # URIs as written (version, latest or tag)
    # Where each dependency was found at publish: [tenant, kind, name, selector] (the edges to remove
    # when this version is deleted; a platform resource lives in the platform tenant).
    targets: list[list[str]] = Field(default_factory=list)
    digest: str  # sha256 of the canonical spec
    createdAt: int
    createdBy: str | None = None  # the API key that published it
    # knowledge: the search index built at publish (``agentvm.resources.search``: chunk boundaries)
    index: dict[str, Any] | None = None

    @property
    def uri(self) -> str:
        return f"resource://{RESOURCE_PLURALS[self.kind]}/{self.name}@{self.version}"


class ResourceHead(_Record):
    """A resource by name: its latest version (the one published last), its tags, how many versions."""

    tenantId: str
    kind: str
    name: str
    latest: str
    seq: int  # the latest version's seq
    versions: int
    tags: dict[str, str] = Field(default_factory=dict)  # tag -> version
    description: str | None = None
    updatedAt: int
    type: str | None = None  # a file's type (text, json, binary, skill), fixed at its first version


class TenantLimitOverrides(_Record):
    """A platform admin's limits for one tenant (``security/tenant_limits.py``); ``None`` keeps the
    server's setting, ``0`` means no limit."""

    maxConnections: int | None = None  # live WebSocket connections
    maxApiKeys: int | None = None  # active API keys
    rateLimitPerMinute: int | None = None  # requests per minute of all its keys together
    storageBytes: int | None = None  # bytes it may store, every write path (its storage account)


class TenantRecord(_Record):
    """A tenant of the registry (``/v1/tenants``): keys, budgets, resources and data hang off its id.

    Deleting marks it ``deleting`` (before anything is removed: an interrupted deletion is resumed
    by deleting again), then ``deleted``: the record stays as a tombstone, so the id is never reused
    and what still has to be purged is known (``purgedAt`` unset: its conversations are kept).
    """

    tenantId: str
    name: str
    description: str | None = None
    createdAt: int
    updatedAt: int
    status: TenantStatus = "active"
    deletedAt: int | None = None  # when its deletion started
    purgedAt: int | None = None  # when its conversations were deleted (None: kept, to be purged)
    limits: TenantLimitOverrides | None = None  # set by platform admins; None: the server's limits

    def to_wire(self) -> dict[str, Any]:
        """Deepractice's ``Tenant`` shape plus ``status`` (unset fields are absent)."""
        return self.model_dump(exclude_none=True)


class ConfigValues(_Record):
    """The values set through the config centre's API for one scope (``server`` or ``tenant:<id>``).

    One record per scope, written whole with a version check, so a PUT of several keys is all or
    nothing. Secret values are stored here (locally in the data dir's database) and never leave it."""

    scope: str
    values: dict[str, Any] = Field(default_factory=dict)
    version: int = 0  # bumped by every write (optimistic concurrency)
    updatedAt: int = 0


class ConfigChange(_Record):
    """One audited change of the config centre: who, when, old -> new (secrets elided)."""

    scope: str
    key: str
    old: Any = None
    new: Any = None
    by: str | None = None  # the API key id (None: the open dev mode)
    at: int


class UsageRecord(_Record):
    """Provider-reported tokens of one turn: the unit of metering and billing."""

    turnId: str
    tenantId: str
    containerId: str
    imageId: str
    sessionId: str
    model: str
    inputTokens: int = 0  # every input token, cached ones included
    outputTokens: int = 0
    # Of ``inputTokens``, those read from the provider's prompt cache (Anthropic
    # ``cache_read_input_tokens``, OpenAI ``prompt_tokens_details.cached_tokens``) and those written
    # to it (Anthropic ``cache_creation_input_tokens``); 0 when the provider reports none.
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0
    ttftMs: int | None = None
    durationMs: int = 0
    status: TurnStatus = "completed"
    createdAt: int = Field(default=0)
    # "step": a later model call of a tool turn (turnId "<turn>:step:<n>", n >= 1; the first call is
    # the "turn" record itself), so every step's tokens are billed as soon as the step ends.
    # "compaction": the tokens of summarising a session's older history (core/compaction.py),
    # billed like a turn's; its turnId is "<turn that triggered it>:compact:<upToSeq>".
    # "title": the tokens of naming a session after its first turn (turns/title.py), turnId
    # "<turn>:title". "embedding": the input tokens of embedding texts (knowledge indexing and search,
    # agent/side_calls.bill_embeddings), under the caller's key; no output tokens.
    kind: UsageKind = "turn"
    # True when the provider never reported the usage (an interrupted or cut stream): output is the
    # text deltas received, input what the provider said at the start, else a chars/4 estimate.
    estimated: bool = False
    # The routing rule that sent this call to ``model`` instead of the image's (agent/model_policy.py,
    # e.g. "short-first-message"); None: the image's model (or a side call's).
    routedBy: str | None = None
    # "reply_cache": a first question answered from the image's reply cache (turns/reply_cache.py),
    # no model called: its tokens are 0 (free), and these are the tokens the cached reply cost when
    # the model wrote it, i.e. what the hit saved.
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    # Why this turn's prompt prefix differs from the session's previous turn's, so the provider's
    # prompt cache is written again from that point (agent/window.py): "compaction" (a new summary),
    # "window" (the history window's start moved), "diet" (the context diet elided more); None: the
    # same prefix (or the session's first turn). Set on the turn's first call only.
    prefixBreak: Literal["compaction", "window", "diet"] | None = None


class SessionSummary(_Record):
    """A compaction summary of a session's messages up to ``upToSeq`` (inclusive).

    Later turns send it (as a system-prompt addendum) instead of those messages; the messages
    themselves are never deleted, so ``image_messages_request`` still returns everything.
    """

    sessionId: str
    upToSeq: int  # the seq of the last message the summary covers
    text: str
    model: str  # "provider/model" that wrote it
    messages: int = 0  # how many messages it covers in all (earlier summaries included)
    inputTokens: int = 0
    outputTokens: int = 0
    createdAt: int = 0
    # The newest seq the compaction had read when it wrote this summary: a turn whose previous
    # turn's messages all lie at or below it is the first to send this summary (agent/window.py)
    seenSeq: int = 0


class SessionImport(_Record):
    """The ledger entry of an import (or a fork) into a container (``agentvm.sessions``): what makes
    it idempotent by its ``key`` (per tenant) and lets a crashed one be finished or cleaned up.

    Claimed ``importing`` by ``owner`` before anything is written, ``done`` once the image, its
    session and every message are; a claim older than the lease whose writer died is taken over.
    """

    tenantId: str
    key: str  # "import:<exportId>:<containerId>" or "fork:<sessionId>:<requestId>"
    containerId: str
    imageId: str
    sessionId: str
    status: Literal["importing", "done"] = "importing"
    owner: str
    claimedAt: int
    messages: int = 0
    source: dict[str, Any] = Field(default_factory=dict)  # what was imported: the export's header


class ApiKeyRecord(_Record):
    """An API key as stored: never the token, only its HMAC-SHA256 under the server secret.

    ``secretId`` names which server secret made ``secretHash`` (a fingerprint, not the secret), so
    a key hashed under the previous secret is verified with that one during a rotation.
    """

    keyId: str
    tenantId: str
    scopes: list[Scope]
    name: str | None = None
    secretHash: str  # hex HMAC-SHA256(server secret, token)
    secretId: str
    createdAt: int
    revokedAt: int | None = None
    rateLimitPerMinute: int | None = None  # None = the server default

    def to_public(self) -> dict[str, Any]:
        """What clients may see: no hash, no secret fingerprint."""
        return {
            "keyId": self.keyId,
            "tenantId": self.tenantId,
            "name": self.name,
            "scopes": list(self.scopes),
            "createdAt": self.createdAt,
            "revokedAt": self.revokedAt,
            "rateLimitPerMinute": self.rateLimitPerMinute,
        }


class BudgetRecord(_Record):
    """Token limits (input + output) of a tenant (``containerId=None``) or of one of its containers."""

    tenantId: str
    containerId: str | None = None
    dailyTokens: int | None = None  # per UTC day; None = no limit
    monthlyTokens: int | None = None  # per UTC calendar month; None = no limit
    updatedAt: int = 0


SessionPolicy = Literal["same", "new"]
RunStatus = Literal["claimed", "sent", "skipped", "failed"]


class ScheduleRecord(_Record):
    """A tenant's cron schedule: at each tick of ``cron`` (in ``timezone``) send ``message`` to an
    image's session (``same``), or to a new image made from its config each run (``new``)
    (``turns/schedules.py``, docs/schedules.md). ``nextAt``: the next tick, epoch ms."""

    tenantId: str
    scheduleId: str
    imageId: str
    containerId: str
    cron: str
    timezone: str = "UTC"
    message: str
    sessionPolicy: SessionPolicy = "same"
    tokensPerRun: int | None = None  # a run that used more pauses the schedule
    tokensPerDay: int | None = None  # ticks past it (in the schedule's day) are skipped
    paused: bool = False
    pausedReason: str | None = None
    nextAt: int
    createdAt: int
    updatedAt: int
    createdBy: str | None = None


class ScheduleRun(_Record):
    """One tick of a schedule, claimed exactly once (its key: ``scheduleId`` and ``tickAt``)."""

    tenantId: str
    scheduleId: str
    tickAt: int
    status: RunStatus = "claimed"
    claimedAt: int
    imageId: str | None = None
    sessionId: str | None = None
    turnId: str | None = None
    reason: str | None = None
    tokens: int | None = None  # the run's turn's input + output tokens, once known


WebhookEventType = Literal["turn.ended", "turn.failed", "approval.needed", "budget.reached"]
DeliveryStatus = Literal["pending", "delivered", "failed"]


class WebhookEndpoint(_Record):
    """A tenant's webhook endpoint (``turns/webhooks.py``, docs/webhooks.md). Its signing secret is
    stored sealed (``configcentre.sealing``), never in this record."""

    tenantId: str
    endpointId: str
    url: str
    events: list[WebhookEventType]
    description: str | None = None
    createdAt: int


class WebhookDelivery(_Record):
    """One event for one endpoint: stored once per (endpoint, event) in the outbox, sent until a 2xx
    or ``failed`` after the last attempt. ``deliveryId`` is the ``webhook-id`` header."""

    tenantId: str
    endpointId: str
    deliveryId: str
    eventId: str
    eventType: WebhookEventType
    payload: str  # the JSON body, as signed
    status: DeliveryStatus = "pending"
    attempts: int = 0
    nextAttemptAt: int
    lastStatusCode: int | None = None
    lastError: str | None = None
    createdAt: int
    deliveredAt: int | None = None


__all__ = [
    "DeliveryStatus",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEventType",
    "RunStatus",
    "ScheduleRecord",
    "ScheduleRun",
    "SessionPolicy",
    "ApiKeyRecord",
    "BudgetRecord",
    "ConcurrencyPolicy",
    "ContainerRecord",
    "DEFAULT_IMAGE_NAME",
    "FrameMap",
    "ImageRecord",
    "Scope",
    "SessionRecord",
    "SessionSummary",
    "TERMINAL",
    "TurnJob",
    "TurnRecord",
    "TurnStatus",
    "JOB_SUFFIX",
    "TASK_SUFFIX",
    "RESOURCE_PLURALS",
    "ResourceHead",
    "ResourceVersion",
    "SandboxJob",
    "SessionImport",
    "TenantLimitOverrides",
    "TenantRecord",
    "TenantStatus",
    "ToolWait",
    "WaitKind",
    "WaitStatus",
    "UsageKind",
    "UsageRecord",
    "turn_id_for",
    "user_message_id_for",
    "workspace_digest",
]
