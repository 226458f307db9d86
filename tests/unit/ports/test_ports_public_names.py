"""The ports' public names are pinned, and so is their floor: ``agentvm.ports`` re-exports every
port of its domain modules (``from agentvm.ports import X`` is the one way in), and neither the
ports nor ``agentvm.runtime`` import anything above the vocabulary (ARCHITECTURE.md, "Layout")."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import agentvm.ports as ports

PUBLIC = [
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
MODULES = [
    "centres",
    "clock",
    "connections",
    "elicitations",
    "embeddings",
    "interrupts",
    "knowledge",
    "mcp_oauth",
    "memory",
    "models",
    "observability",
    "queue",
    "replies",
    "sandbox",
    "schedules",
    "security",
    "sessions",
    "store",
    "tools",
    "waits",
    "webhooks",
]
# What ports and the runtime may import from agentvm: the vocabulary, and the ports themselves.
BELOW = {"errors", "records", "messages", "events", "llm", "config", "logs", "addresses", "ports"}
PACKAGE = Path(ports.__file__).resolve().parents[1]


def test_the_public_names_are_exactly_these():
    assert ports.__all__ == PUBLIC


def test_every_public_name_is_its_domain_modules_own():
    found: dict[str, object] = {}
    for module in MODULES:
        mod = importlib.import_module(f"agentvm.ports.{module}")
        assert sorted(mod.__all__) == mod.__all__, module
        for name in mod.__all__:
            assert name not in found, f"{name} is in two port modules"
            found[name] = getattr(mod, name)
    assert sorted(found) == PUBLIC
    for name, value in found.items():
        assert getattr(ports, name) is value, name


def test_ports_and_the_runtime_import_nothing_above_the_vocabulary():
    files = [PACKAGE / "runtime.py", *sorted((PACKAGE / "ports").glob("*.py"))]
    above = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):  # deferred and TYPE_CHECKING imports too
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for module in modules:
                parts = module.split(".")
                if parts[0] == "agentvm" and (len(parts) < 2 or parts[1] not in BELOW):
                    above.append(f"{path.name}:{node.lineno} {module}")
    assert above == []
