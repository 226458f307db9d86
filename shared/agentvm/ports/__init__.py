"""Ports: what the core needs from the world, one module per domain. Adapters in ``agentvm.adapters``
implement them; ``agentvm.runtime`` holds one of each, wired once per host by ``agentvm.hosts``.

The core imports only these (plus the vocabulary modules and its own domains), never boto3,
pynamodb, sqlite3 or FastAPI. Every I/O port is async: adapters with blocking clients run them off
the event loop. Import from here (``from agentvm.ports import Store``); the modules are:

- ``store``: ``Store`` (containers, images, sessions, messages, turns, usage);
- ``sessions``: ``SessionArchive`` (imports, forks, message search);
- ``connections``: ``Connections``, ``Push`` and the protocol names;
- ``replies``: ``ReplyCache`` (images' cached first replies);
- ``memory``: ``MemoryStore`` (what agents keep about end users across sessions);
- ``queue``: ``TurnQueue``;  ``waits``: ``ToolWaits``;  ``interrupts``: ``CancelWatch``;
- ``knowledge``: ``KnowledgeIndex`` and its value types;
- ``schedules``: ``Schedules`` (cron schedules and their runs);  ``webhooks``: ``Webhooks``;
- ``models``: ``ModelClient``, ``ModelResolver``;  ``embeddings``: ``Embedder``;
- ``tools``: ``Tool``, MCP and HTTP tool clients, ``ToolCatalog``;
- ``elicitations``: ``Elicitations``, ``ElicitationStore`` (MCP servers' questions to users);
- ``mcp_oauth``: ``McpOAuthRecords`` (sealed OAuth records of remote MCP servers), ``McpOAuthAuth``;
- ``sandbox``: ``Sandbox``, ``SandboxJobs`` and their value types;
- ``security``: tenants, keys, counters, budgets, and the security services the runtime holds;
- ``centres``: the config and resource centres' stores and faces;
- ``observability``: usage roll-ups, running turns, ``Metrics``, ``LogStore``, ``StreamProgress``;
- ``clock``: ``Clock``, ``Ids``.
"""

from agentvm.ports.centres import ConfigLayers, ConfigStore, ResourceRegistry, ResourceStore, Sealer
from agentvm.ports.clock import Clock, Ids
from agentvm.ports.connections import (
    PROTOCOL_V1,
    PROTOCOL_V2,
    PROTOCOLS,
    ConnectionInfo,
    Connections,
    Push,
    Subscription,
)
from agentvm.ports.elicitations import (
    ELICITATION_ACTIONS,
    ElicitationAction,
    ElicitationAnswer,
    ElicitationOwner,
    ElicitationRequest,
    Elicitations,
    ElicitationStore,
    ElicitFn,
    PendingElicitation,
)
from agentvm.ports.embeddings import Embedder, EmbedPurpose
from agentvm.ports.interrupts import CancelWatch
from agentvm.ports.knowledge import (
    DRAFT,
    KnowledgeChunk,
    KnowledgeDocument,
    KnowledgeHit,
    KnowledgeIndex,
    KnowledgeLimits,
    vector_dimensions,
)
from agentvm.ports.mcp_oauth import (
    MCP_OAUTH_MAX_KEY_CHARS,
    MCP_OAUTH_MAX_VALUE_BYTES,
    McpOAuthAccess,
    McpOAuthAuth,
    McpOAuthRecords,
    check_mcp_oauth_record,
)
from agentvm.ports.memory import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ITEMS,
    DEFAULT_RECALL_LIMIT,
    MAX_QUERY_WORDS,
    MAX_RECALL_LIMIT,
    MAX_TEXT_CHARS,
    MAX_TOPIC_CHARS,
    MEMORY_SOURCES,
    MemoryItem,
    MemoryLimits,
    MemorySource,
    MemoryStore,
    check_memory_room,
    container_scope,
    image_scope,
    item_size,
    memory_id_for,
    memory_words,
    ranked_by_words,
)
from agentvm.ports.models import ModelClient, ModelResolver
from agentvm.ports.observability import (
    DEFAULT_LOG_LIMIT,
    LogPage,
    LogQuery,
    LogStore,
    Metrics,
    MetricsQuery,
    RunningTurn,
    RunningTurns,
    StreamProgress,
    Transport,
    TurnFigures,
    TurnStatus,
    TurnTokens,
    UsageCell,
    UsageRollups,
)
from agentvm.ports.queue import TurnQueue
from agentvm.ports.replies import (
    DEFAULT_REPLY_SLOTS,
    DEFAULT_REPLY_TTL_S,
    MAX_REPLY_TTL_S,
    REPLY_WAYS,
    CachedReply,
    ReplyCache,
    reply_set,
    way_for,
)
from agentvm.ports.sandbox import (
    Sandbox,
    SandboxJobs,
    SandboxLimits,
    SandboxRun,
    WorkspaceEntry,
    WorkspaceQuota,
    WorkspaceScan,
)
from agentvm.ports.schedules import Schedules
from agentvm.ports.security import (
    Authentication,
    BudgetStore,
    CounterLease,
    Counters,
    KeyStore,
    PerTenantLimits,
    RateLimits,
    StorageAccount,
    TenantPurge,
    TenantStore,
    TokenBudgets,
)
from agentvm.ports.sessions import MessageHit, SearchPage, SearchPosition, SearchTerm, SessionArchive
from agentvm.ports.store import AppendResult, Json, SeqMessage, Store
from agentvm.ports.tools import (
    MCP_TASK_INLINE_S,
    FileChange,
    HttpToolClient,
    HttpToolResponse,
    McpConnector,
    McpServerFailed,
    McpSession,
    McpSessionPool,
    McpTaskHandedOff,
    McpTaskState,
    McpTaskSuspension,
    ProgressFn,
    Tool,
    ToolCatalog,
    ToolOutput,
)
from agentvm.ports.waits import ToolWaits
from agentvm.ports.webhooks import Webhooks

__all__ = [
    "AppendResult",
    "Authentication",
    "BudgetStore",
    "CachedReply",
    "CancelWatch",
    "Clock",
    "ConfigLayers",
    "ConfigStore",
    "ConnectionInfo",
    "Connections",
    "CounterLease",
    "Counters",
    "DEFAULT_LOG_LIMIT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_RECALL_LIMIT",
    "DEFAULT_REPLY_SLOTS",
    "DEFAULT_REPLY_TTL_S",
    "DRAFT",
    "ELICITATION_ACTIONS",
    "ElicitFn",
    "ElicitationAction",
    "ElicitationAnswer",
    "ElicitationOwner",
    "ElicitationRequest",
    "ElicitationStore",
    "Elicitations",
    "EmbedPurpose",
    "Embedder",
    "FileChange",
    "HttpToolClient",
    "HttpToolResponse",
    "Ids",
    "Json",
    "KeyStore",
    "KnowledgeChunk",
    "KnowledgeDocument",
    "KnowledgeHit",
    "KnowledgeIndex",
    "KnowledgeLimits",
    "LogPage",
    "LogQuery",
    "LogStore",
    "MAX_QUERY_WORDS",
    "MAX_RECALL_LIMIT",
    "MAX_REPLY_TTL_S",
    "MAX_TEXT_CHARS",
    "MAX_TOPIC_CHARS",
    "MCP_OAUTH_MAX_KEY_CHARS",
    "MCP_OAUTH_MAX_VALUE_BYTES",
    "MCP_TASK_INLINE_S",
    "MEMORY_SOURCES",
    "McpConnector",
    "McpOAuthAccess",
    "McpOAuthAuth",
    "McpOAuthRecords",
    "McpServerFailed",
    "McpSession",
    "McpSessionPool",
    "McpTaskHandedOff",
    "McpTaskState",
    "McpTaskSuspension",
    "MemoryItem",
    "MemoryLimits",
    "MemorySource",
    "MemoryStore",
    "MessageHit",
    "Metrics",
    "MetricsQuery",
    "ModelClient",
    "ModelResolver",
    "PROTOCOLS",
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "PendingElicitation",
    "PerTenantLimits",
    "ProgressFn",
    "Push",
    "REPLY_WAYS",
    "RateLimits",
    "ReplyCache",
    "ResourceRegistry",
    "ResourceStore",
    "RunningTurn",
    "RunningTurns",
    "Sandbox",
    "SandboxJobs",
    "SandboxLimits",
    "SandboxRun",
    "Schedules",
    "Sealer",
    "SearchPage",
    "SearchPosition",
    "SearchTerm",
    "SeqMessage",
    "SessionArchive",
    "StorageAccount",
    "Store",
    "StreamProgress",
    "Subscription",
    "TenantPurge",
    "TenantStore",
    "TokenBudgets",
    "Tool",
    "ToolCatalog",
    "ToolOutput",
    "ToolWaits",
    "Transport",
    "TurnFigures",
    "TurnQueue",
    "TurnStatus",
    "TurnTokens",
    "UsageCell",
    "UsageRollups",
    "Webhooks",
    "WorkspaceEntry",
    "WorkspaceQuota",
    "WorkspaceScan",
    "check_mcp_oauth_record",
    "check_memory_room",
    "container_scope",
    "image_scope",
    "item_size",
    "memory_id_for",
    "memory_words",
    "ranked_by_words",
    "reply_set",
    "vector_dimensions",
    "way_for",
]
