"""A turn's tools: the toolbox (validation, timeouts, caps), declarations (what an image may
declare), sources (built-ins, HTTP, MCP, sandbox, client tools → one toolbox), the built-ins, the
sandbox tools, and egress rules for tools that reach the network.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.agent.tools.builtin import (
        BUILTIN_TOOLS,
        BuiltinTool,
    )
    from agentvm.agent.tools.declarations import (
        DEFAULT_APPROVAL_TIMEOUT_S,
        DEFAULT_CLIENT_TIMEOUT_S,
        DEFAULT_MAX_STEPS,
        MAX_TOOLS,
        MAX_WAIT_S,
        MEMORY_TOOLS,
        TOOL_NAME,
        ApprovalConfig,
        BuiltinToolDecl,
        ClientToolDecl,
        HttpToolDecl,
        McpRemoteServer,
        McpStdioServer,
        MemoryToolDecl,
        SandboxToolDecl,
        SecretRef,
        ToolDecl,
        check_input_schema,
        parse_mcp_servers,
    )
    from agentvm.agent.tools.egress import (
        EgressRefused,
        check_public,
    )
    from agentvm.agent.tools.media import (
        DEFAULT_MAX_BLOCK_BYTES,
        DEFAULT_MAX_RESULT_BYTES,
        bounded_blocks,
    )
    from agentvm.agent.tools.memory import (
        MEMORY_SPECS,
        MemoryTool,
        memory_scope,
        memory_tools,
    )
    from agentvm.agent.tools.reports import (
        MCP_SERVER_FAILED,
        PROGRESS_INTERVAL_S,
        TOOL_PROGRESS,
        CallProgress,
        ToolReports,
        current_progress,
        reset_current_progress,
        set_current_progress,
    )
    from agentvm.agent.tools.sandbox import (
        MAX_READ_BYTES,
        SPECS,
        RemoteSandboxTool,
        SandboxTool,
        limits_of,
        remote_sandbox_tools,
        sandbox_tools,
    )
    from agentvm.agent.tools.sources import (
        HttpTool,
        McpTool,
        MissingSecret,
        ToolSources,
        TurnMcpSessions,
        servers_fingerprint,
        tenant_secrets,
    )
    from agentvm.agent.tools.toolbox import (
        DEFAULT_MAX_OUTPUT_CHARS,
        DEFAULT_TIMEOUT_S,
        ClientTool,
        Toolbox,
        ToolRun,
        capped,
        output_text,
        schema_problem,
        tool_output,
    )


__all__ = [
    "ApprovalConfig",
    "BUILTIN_TOOLS",
    "BuiltinTool",
    "BuiltinToolDecl",
    "CallProgress",
    "ClientTool",
    "ClientToolDecl",
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "DEFAULT_CLIENT_TIMEOUT_S",
    "DEFAULT_MAX_BLOCK_BYTES",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TIMEOUT_S",
    "EgressRefused",
    "HttpTool",
    "HttpToolDecl",
    "MAX_READ_BYTES",
    "MAX_TOOLS",
    "MAX_WAIT_S",
    "MCP_SERVER_FAILED",
    "McpRemoteServer",
    "McpStdioServer",
    "McpTool",
    "MissingSecret",
    "PROGRESS_INTERVAL_S",
    "RemoteSandboxTool",
    "SPECS",
    "SandboxTool",
    "MEMORY_TOOLS",
    "MemoryToolDecl",
    "SandboxToolDecl",
    "SecretRef",
    "TOOL_NAME",
    "TOOL_PROGRESS",
    "ToolDecl",
    "ToolReports",
    "ToolRun",
    "ToolSources",
    "Toolbox",
    "TurnMcpSessions",
    "bounded_blocks",
    "capped",
    "check_input_schema",
    "check_public",
    "current_progress",
    "limits_of",
    "output_text",
    "parse_mcp_servers",
    "remote_sandbox_tools",
    "reset_current_progress",
    "sandbox_tools",
    "schema_problem",
    "servers_fingerprint",
    "set_current_progress",
    "tenant_secrets",
    "tool_output",
    "MEMORY_SPECS",
    "MemoryTool",
    "memory_scope",
    "memory_tools",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "builtin": [
            "BUILTIN_TOOLS",
            "BuiltinTool",
        ],
        "declarations": [
            "ApprovalConfig",
            "BuiltinToolDecl",
            "ClientToolDecl",
            "DEFAULT_APPROVAL_TIMEOUT_S",
            "DEFAULT_CLIENT_TIMEOUT_S",
            "DEFAULT_MAX_STEPS",
            "HttpToolDecl",
            "MAX_TOOLS",
            "MAX_WAIT_S",
            "McpRemoteServer",
            "McpStdioServer",
            "MEMORY_TOOLS",
            "MemoryToolDecl",
            "SandboxToolDecl",
            "SecretRef",
            "TOOL_NAME",
            "ToolDecl",
            "check_input_schema",
            "parse_mcp_servers",
        ],
        "egress": [
            "EgressRefused",
            "check_public",
        ],
        "media": [
            "DEFAULT_MAX_BLOCK_BYTES",
            "DEFAULT_MAX_RESULT_BYTES",
            "bounded_blocks",
        ],
        "reports": [
            "CallProgress",
            "MCP_SERVER_FAILED",
            "PROGRESS_INTERVAL_S",
            "TOOL_PROGRESS",
            "ToolReports",
            "current_progress",
            "reset_current_progress",
            "set_current_progress",
        ],
        "sandbox": [
            "MAX_READ_BYTES",
            "RemoteSandboxTool",
            "SPECS",
            "SandboxTool",
            "limits_of",
            "remote_sandbox_tools",
            "sandbox_tools",
        ],
        "sources": [
            "HttpTool",
            "McpTool",
            "MissingSecret",
            "ToolSources",
            "TurnMcpSessions",
            "servers_fingerprint",
            "tenant_secrets",
        ],
        "toolbox": [
            "ClientTool",
            "DEFAULT_MAX_OUTPUT_CHARS",
            "DEFAULT_TIMEOUT_S",
            "ToolRun",
            "Toolbox",
            "capped",
            "output_text",
            "schema_problem",
            "tool_output",
        ],
        "memory": [
            "MEMORY_SPECS",
            "MemoryTool",
            "memory_scope",
            "memory_tools",
        ],
    },
)
