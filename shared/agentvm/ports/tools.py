"""Tool ports: one callable tool of a turn, MCP sessions, the HTTP tool client, and where a
turn's tools come from (``ToolCatalog``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.llm import ToolSpec
    from agentvm.ports.security import StorageAccount
    from agentvm.ports.store import Store
    from agentvm.records import ImageRecord


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


class ProgressFn(Protocol):
    """Receives a running call's progress (MCP ``notifications/progress``)."""

    def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


class McpServerFailed(ConnectionError):
    """An MCP server could not start, list its tools or answer a call (as opposed to answering with
    a protocol error). ``stage``: "start" | "list" | "call"; ``reason``: a phrase after the server's
    name ("is unreachable: ...", "crashed during tool 'x'"), safe to show a client (no header or
    env value, no stack trace); ``exit_code``: a stdio server's, when it is known."""

    def __init__(self, server: str, stage: str, reason: str, *, exit_code: int | None = None) -> None:
        super().__init__(f"MCP server {server!r} {reason}")
        self.server = server
        self.stage = stage
        self.reason = reason
        self.exit_code = exit_code


class McpSession(Protocol):
    """A connection to one MCP server for the length of a turn (or of one tool listing).

    A server that cannot start, list or answer raises ``McpServerFailed``."""

    async def list_tools(self) -> list[ToolSpec]: ...
    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, on_progress: ProgressFn | None = None
    ) -> ToolOutput: ...
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


class ToolCatalog(Protocol):
    """Where a turn's tools come from: HTTP declarations, MCP servers, the sandbox, built-ins
    (``agent.tools.sources.ToolSources``)."""

    allow_stdio: bool

    async def toolbox(
        self, store: Store, image: ImageRecord, *, storage: StorageAccount | None = None
    ) -> Any:
        """The turn's ``agent.tools.Toolbox`` for ``image`` (``storage``: the workspace's byte account)."""
        ...


__all__ = [
    "FileChange",
    "HttpToolClient",
    "HttpToolResponse",
    "McpConnector",
    "McpServerFailed",
    "McpSession",
    "ProgressFn",
    "Tool",
    "ToolCatalog",
    "ToolOutput",
]
