"""Tool wiring both hosts share: MCP through the official SDK, HTTP tools through httpx.

Both are built on first use, not here: every Lambda function builds its runtime at init, and most
of them (``$connect``, ``$disconnect``, the HTTP API) never run a tool, so none of them should pay
for importing httpx or the MCP SDK at cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from agentvm.agent.tools.sources import ToolSources
    from agentvm.agent.tools.toolbox import Toolbox
    from agentvm.config import Settings
    from agentvm.ports import (
        HttpToolClient,
        HttpToolResponse,
        McpOAuthAccess,
        McpSession,
        Sandbox,
        StorageAccount,
        Store,
        WorkspaceQuota,
    )
    from agentvm.records import ImageRecord


class LazyHttpToolClient:
    """``HttpxToolClient``, created on the first request."""

    def __init__(self) -> None:
        self._client: HttpToolClient | None = None

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json_body: Any = None,
        timeout_s: float,
        max_bytes: int,
    ) -> HttpToolResponse:
        if self._client is None:
            from agentvm.adapters.http.tools import HttpxToolClient

            self._client = HttpxToolClient()
        return await self._client.request(
            method, url, headers=headers, json_body=json_body, timeout_s=timeout_s, max_bytes=max_bytes
        )


class LazyMcpConnector:
    """``SdkMcpConnector``, created on the first session."""

    def __init__(self) -> None:
        self._connector: Any = None

    def session(self, server: str, config: Mapping[str, Any], *, http_auth: Any = None) -> McpSession:
        if self._connector is None:
            from agentvm.adapters.mcp.client import SdkMcpConnector

            self._connector = SdkMcpConnector()
        return self._connector.session(server, config, http_auth=http_auth)


class LazyToolSources:
    """``ToolSources``, built when a turn first needs a toolbox: the functions that never run a turn
    (``$connect``, ``$disconnect``, the authorizer, the HTTP API) never import the tool machinery.

    ``keep_mcp_sessions``: MCP sessions live across turns in a pool (a host with one long-lived
    event loop: ``avm serve``, a cluster node), closed by ``aclose`` at the host's shutdown."""

    def __init__(
        self,
        settings: Settings,
        *,
        allow_stdio: bool,
        sandbox: Sandbox | None = None,
        remote_sandbox: bool = False,
        keep_mcp_sessions: bool = False,
    ) -> None:
        self._settings = settings
        self.allow_stdio = allow_stdio
        self.max_output_chars = settings.tool_max_output_chars
        self.max_media_block_bytes = settings.tool_max_media_block_bytes
        self.max_media_result_bytes = settings.tool_max_media_result_bytes
        self._sandbox = sandbox
        self._remote_sandbox = remote_sandbox
        self._keep_mcp_sessions = keep_mcp_sessions
        self._built: ToolSources | None = None

    def mcp_figures(self) -> dict[str, int] | None:
        """The MCP session pool's figures (``PooledMcpSessions.figures``); None before the first
        turn built the tools, or without a pool."""
        pool = self._built.mcp_pool if self._built is not None else None
        figures = getattr(pool, "figures", None)
        return figures() if callable(figures) else None

    async def aclose(self) -> None:
        """Close the pooled MCP sessions (no stdio server outlives the host)."""
        if self._built is not None and self._built.mcp_pool is not None:
            await self._built.mcp_pool.aclose()

    async def toolbox(
        self,
        store: Store,
        image: ImageRecord,
        *,
        storage: StorageAccount | None = None,
        mcp_oauth: McpOAuthAccess | None = None,
    ) -> Toolbox:
        return await self._sources().toolbox(store, image, storage=storage, mcp_oauth=mcp_oauth)

    async def task_session(
        self, image: ImageRecord, server: str, *, mcp_oauth: McpOAuthAccess | None = None
    ) -> McpSession:
        return await self._sources().task_session(image, server, mcp_oauth=mcp_oauth)

    def _sources(self) -> ToolSources:
        if self._built is None:
            self._built = _build(
                self._settings,
                allow_stdio=self.allow_stdio,
                sandbox=self._sandbox,
                remote_sandbox=self._remote_sandbox,
                keep_mcp_sessions=self._keep_mcp_sessions,
            )
        return self._built


def tool_sources(
    settings: Settings,
    *,
    allow_stdio: bool,
    sandbox: Sandbox | None = None,
    remote_sandbox: bool = False,
    keep_mcp_sessions: bool = False,
) -> LazyToolSources:
    """Where turns get their tools: built-ins, HTTP tools, MCP servers, and the host's sandbox
    (None: no sandbox tools in the turn; ``remote_sandbox``: its jobs go to a sandbox worker);
    header secrets by tenant from ``AVM_TOOL_SECRETS``. Built on first use (``LazyToolSources``).
    ``keep_mcp_sessions``: a pool keeps MCP sessions across turns (call ``aclose`` at shutdown)."""
    return LazyToolSources(
        settings,
        allow_stdio=allow_stdio,
        sandbox=sandbox,
        remote_sandbox=remote_sandbox,
        keep_mcp_sessions=keep_mcp_sessions,
    )


def local_sandbox(settings: Settings, root: Path) -> Sandbox | None:
    """The workspaces under ``root``, isolated with bubblewrap when it works here. Without it, jobs
    would run as plain processes of the server's user: allowed on a loopback address (the
    developer's own machine) or with ``AVM_SANDBOX_ALLOW_UNISOLATED``, refused otherwise."""
    from agentvm.adapters.sandbox.process import LocalSandbox
    from agentvm.hosts.local_server import is_loopback

    sandbox = LocalSandbox(root, quota=workspace_quota(settings))
    if sandbox.isolated or settings.sandbox_allow_unisolated or is_loopback(settings.host):
        return sandbox
    return None


def workspace_quota(settings: Settings) -> WorkspaceQuota:
    """The server's per-container workspace quota (the same on the local host and the worker)."""
    from agentvm.ports import WorkspaceQuota

    return WorkspaceQuota(settings.sandbox_workspace_mb * 1024 * 1024, settings.sandbox_workspace_entries)


def _build(
    settings: Settings,
    *,
    allow_stdio: bool,
    sandbox: Sandbox | None,
    remote_sandbox: bool = False,
    keep_mcp_sessions: bool = False,
) -> ToolSources:
    from agentvm.adapters.mcp.oauth import StoredOAuth
    from agentvm.adapters.mcp.oauth_flow import callback_url
    from agentvm.agent.tools.sources import ToolSources

    pool = None
    if keep_mcp_sessions:
        from agentvm.adapters.mcp.pool import PooledMcpSessions

        pool = PooledMcpSessions(
            idle_s=settings.mcp_idle_s,
            max_per_tenant=settings.mcp_max_sessions_per_tenant,
            max_per_host=settings.mcp_max_sessions,
        )
    return ToolSources(
        mcp=LazyMcpConnector(),
        mcp_pool=pool,
        tools_ttl_s=settings.mcp_tools_ttl_s,
        http=LazyHttpToolClient(),
        sandbox=sandbox,
        remote_sandbox=remote_sandbox,
        secrets={
            tenant: {name: value.get_secret_value() for name, value in values.items()}
            for tenant, values in settings.tool_secrets.items()
        },
        allow_stdio=allow_stdio,
        allow_private_networks=settings.tool_allow_private_networks,
        default_timeout_s=settings.tool_timeout_s,
        max_output_chars=settings.tool_max_output_chars,
        max_media_block_bytes=settings.tool_max_media_block_bytes,
        max_media_result_bytes=settings.tool_max_media_result_bytes,
        list_deadline_s=settings.mcp_list_deadline_s,
        # the redirect URI is named only in a registration a turn would make (the routes register)
        oauth=StoredOAuth(callback_url(settings.public_url, "http://localhost")),
    )


__all__ = [
    "LazyHttpToolClient",
    "LazyMcpConnector",
    "LazyToolSources",
    "local_sandbox",
    "tool_sources",
    "workspace_quota",
]
