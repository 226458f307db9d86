"""Tool ports: one callable tool of a turn, MCP sessions, the HTTP tool client, and where a
turn's tools come from (``ToolCatalog``)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentvm.llm import ToolBlock, ToolSpec
    from agentvm.ports.centres import Sealer
    from agentvm.ports.elicitations import ElicitationAnswer, ElicitationRequest, ElicitFn
    from agentvm.ports.mcp_oauth import McpOAuthAccess
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
    a sandbox tool also says which workspace files it changed.

    A tool that returns media (an MCP tool's image) also gives ``blocks``: the result in order as
    text and media blocks, for models that take media in a tool result; ``text`` is then the same
    result with the media as placeholders (``agentvm.llm.blocks_text``), for those that do not.
    ``structured``: a JSON value the tool returned beside its content (MCP ``structuredContent``),
    kept with the stored result."""

    text: str
    is_error: bool = False
    files: tuple[FileChange, ...] = ()
    blocks: tuple[ToolBlock, ...] = ()
    structured: Any = None


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


class McpTaskHandedOff(Exception):
    """A call whose MCP task (2026-07-28) still works after the inline follow the turn allowed
    (``MCP_TASK_INLINE_S``): the turn suspends on it (an ``mcp_task`` wait) and the waits sweeper
    follows it from there (``turns/mcp_tasks.py``). ``task_id`` is the server's bearer token for the
    task: never logged, never sent to a client, sealed on the wait; it is left out of ``str`` and
    ``repr``. ``reports``: the progress reports the call sent so far, ``message`` the last status
    message, ``poll_ms`` the server's poll interval."""

    def __init__(self, task_id: str, *, poll_ms: int | None, message: str | None, reports: int) -> None:
        super().__init__("the MCP task still runs: the turn waits for it")
        self.task_id = task_id
        self.poll_ms = poll_ms
        self.message = message
        self.reports = reports
        self.server = ""  # the image's name of the server (set by the toolbox, from the tool)
        self.remaining_s = 0.0  # what is left of the call's deadline (set by the toolbox)

    def __repr__(self) -> str:
        return "McpTaskHandedOff()"


# How long the running call may follow a 2026-07-28 task before handing it off (the toolbox sets it
# for the call; None: follow it to its end, as every host that does not suspend on tasks does)
MCP_TASK_INLINE_S: ContextVar[float | None] = ContextVar("agentvm_mcp_task_inline_s", default=None)


@dataclass(frozen=True)
class McpTaskSuspension:
    """A host whose turns suspend on a long MCP task (AWS): a call follows its 2026-07-28 task
    ``inline_s`` at most (less when the invocation has less left: ``time_left_s``), then the turn
    waits for it (``turns/mcp_tasks.py``); the task id is sealed with ``sealer`` on the wait."""

    sealer: Sealer
    inline_s: float = 20.0
    time_left_s: Callable[[], float | None] | None = None  # None: not bounded by an invocation

    def follow_for_s(self) -> float:
        """How long a call may follow its task now, before handing it off."""
        left = self.time_left_s() if self.time_left_s is not None else None
        return self.inline_s if left is None else max(0.0, min(self.inline_s, left))


@dataclass(frozen=True, slots=True)
class McpTaskState:
    """A task as ``tasks/get`` answered: ``status`` (working, input_required, completed, failed,
    cancelled), the server's status message and poll interval; once completed the tool's
    ``output``, once failed the server's ``error`` message; while ``input_required``, its
    ``questions`` (the ``elicitation/create`` requests of its ``inputRequests``, by their key)."""

    status: str
    message: str | None = None
    poll_ms: int | None = None
    output: ToolOutput | None = None
    error: str | None = None
    questions: Mapping[str, ElicitationRequest] = field(default_factory=dict)


class McpSession(Protocol):
    """A connection to one MCP server for the length of a turn (or of one tool listing).

    A server that cannot start, list or answer raises ``McpServerFailed``."""

    async def list_tools(self) -> list[ToolSpec]: ...
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressFn | None = None,
        on_elicit: ElicitFn | None = None,
    ) -> ToolOutput:
        """``on_elicit`` answers the server's ``elicitation/create`` during this call (None: the
        session answers ``decline``)."""
        ...

    async def get_task(self, task_id: str) -> McpTaskState:
        """One ``tasks/get`` of a 2026-07-28 task (a suspended call's: ``turns/mcp_tasks.py``)."""
        ...

    async def cancel_task(self, task_id: str) -> None:
        """``tasks/cancel`` of a 2026-07-28 task."""
        ...

    async def answer_task(self, task_id: str, answers: Mapping[str, ElicitationAnswer]) -> None:
        """``tasks/update`` of a 2026-07-28 task: the user's answers to its questions, by key."""
        ...

    async def aclose(self) -> None: ...


class McpConnector(Protocol):
    """Opens MCP sessions (official ``mcp`` SDK): stdio, Streamable HTTP or SSE, by config.

    ``config`` is the image's validated AgentX ``McpServerConfig`` as a dict. Opening does no I/O;
    the session connects on first use, so a turn that calls no MCP tool never connects.
    """

    def session(self, server: str, config: Mapping[str, Any], *, http_auth: Any = None) -> McpSession:
        """``http_auth``: an ``httpx.Auth`` for a remote server (its OAuth, ``ports.McpOAuthAuth``)."""
        ...


class McpSessionPool(Protocol):
    """MCP sessions that outlive a turn (``adapters.mcp.pool``): one live session per (tenant,
    container, server config), reused by that container's next turns, never shared with another.

    ``lease`` does no I/O; the lease connects (or reuses the live session) on first use, and its
    ``aclose`` hands the session back to the pool instead of closing it.
    """

    def lease(
        self, tenant: str, container: str, server: str, config: Mapping[str, Any], *, http_auth: Any = None
    ) -> McpSession:
        """``http_auth``: as ``McpConnector.session``'s, used when the lease opens a new session."""
        ...

    def tools_changed(self, tenant: str, container: str, server: str, config: Mapping[str, Any]) -> bool:
        """The server said its tools changed (``notifications/tools/list_changed``) since the last
        listing through this pool."""
        ...

    async def aclose(self) -> None:
        """Close every session (the host's shutdown): no stdio server is left running."""
        ...


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
    # what one tool result may carry (agent/tools/media.py): a result that arrives outside a turn
    # (an MCP task's, through the waits sweeper) is held to the same limits
    max_output_chars: int
    max_media_block_bytes: int
    max_media_result_bytes: int

    async def toolbox(
        self,
        store: Store,
        image: ImageRecord,
        *,
        storage: StorageAccount | None = None,
        mcp_oauth: McpOAuthAccess | None = None,
    ) -> Any:
        """The turn's ``agent.tools.Toolbox`` for ``image`` (``storage``: the workspace's byte account;
        ``mcp_oauth``: the host's OAuth records of remote MCP servers)."""
        ...

    async def task_session(
        self, image: ImageRecord, server: str, *, mcp_oauth: McpOAuthAccess | None = None
    ) -> McpSession:
        """A session of ``image``'s MCP ``server``, its config, header secrets and OAuth tokens
        (``mcp_oauth``) resolved again for the image's tenant (the waits sweeper polls suspended
        calls' tasks through it). Raises
        ``McpServerFailed`` for a server the image no longer has or that cannot be reached."""
        ...


__all__ = [
    "FileChange",
    "HttpToolClient",
    "HttpToolResponse",
    "MCP_TASK_INLINE_S",
    "McpConnector",
    "McpServerFailed",
    "McpSession",
    "McpSessionPool",
    "McpTaskHandedOff",
    "McpTaskState",
    "McpTaskSuspension",
    "ProgressFn",
    "Tool",
    "ToolCatalog",
    "ToolOutput",
]
