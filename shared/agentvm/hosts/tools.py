"""Tool wiring both hosts share: MCP through the official SDK, HTTP tools through httpx."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.agent.tool_sources import ToolSources
    from agentvm.config import Settings


def tool_sources(settings: Settings, *, allow_stdio: bool) -> ToolSources:
    """Where turns get their tools: MCP through the official SDK, HTTP tools through httpx (both
    imported on first use, not here), built-ins; secrets for headers from ``AVM_TOOL_SECRETS``."""
    from agentvm.agent.tool_sources import ToolSources

    return ToolSources(
        mcp=None,
        http=None,
        secrets={
            tenant: {name: value.get_secret_value() for name, value in values.items()}
            for tenant, values in settings.tool_secrets.items()
        },
        allow_stdio=allow_stdio,
        allow_private_networks=settings.tool_allow_private_networks,
        default_timeout_s=settings.tool_timeout_s,
        max_output_chars=settings.tool_max_output_chars,
    )


__all__ = ["tool_sources"]
