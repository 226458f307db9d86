"""AgentVM as an MCP server: ``/mcp`` speaks the MCP Streamable HTTP transport (the official ``mcp``
SDK's server, stateless), so any MCP client (desktop assistants, IDEs, agent frameworks) can use
an AgentVM agent as a tool. docs/mcp.md, "AgentVM as an MCP server".

- Auth: the AgentVM API key as ``Authorization: Bearer`` (any scope: ``client`` is enough), checked
  and rate-limited as every ``/v1`` route is (``api/deps.authenticate``); none or a bad one is 401
  with ``WWW-Authenticate: Bearer``, before the MCP SDK reads the body.
- ``tools/list``: one tool per image of the key's tenant (every container's, as a client key sees
  them over the WebSocket), named from the image's name (``tool_names``), described from its
  definition. Input: ``message`` (required) and ``requestId`` (optional; see below).
- ``tools/call``: the message goes through ``turns.submit.send_message``, the path of every
  WebSocket turn (budgets, quotas, the storage account, the image's concurrency policy, usage,
  exactly-once by request id); the call then follows the turn in the store
  (``turns.watch.follow_turn``), sends ``notifications/progress`` for each change (queued, running,
  each tool call and result) when the client gave a ``progressToken``, and answers the reply's text.
  A refused, failed, interrupted or suspended turn is an ``isError`` result saying why. A call waits
  at most ``AVM_MCP_CALL_DEADLINE_S`` (120 s; 25 s on AWS, under API Gateway's 30 s); past it the
  turn goes on, and the answer (``isError``) says to call again with the same ``requestId``, which
  never stores the message twice nor runs a second turn, but waits for the first one's reply.

Each request gets its own SDK server and stateless session manager: the caller's identity is the
server's lifespan state, and no task outlives the request (the same on Lambda, through Mangum).
The MCP SDK is imported on the first ``/mcp`` request, never on another route's path.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from agentvm import __version__
from agentvm.api.deps import authenticate
from agentvm.api.errors import agentvm_error
from agentvm.errors import AgentVMError, Forbidden

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    import mcp_types
    from mcp.server.context import ServerRequestContext
    from starlette.types import Receive, Scope, Send

    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MCP_PATH = "/mcp"
MAX_TOOL_NAME = 128  # the MCP spec's limit (SEP-986)
PAGE_SIZE = 100  # tools per tools/list page
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")  # the characters an MCP tool name may hold
INSTRUCTIONS = (
    "Each tool is an AgentVM agent (an image): call it with a message and it answers, continuing "
    "its one conversation (its session). A call that runs out of time says so; call again with "
    "the same requestId to get the reply."
)


@dataclass(frozen=True, slots=True)
class McpCaller:
    """Who calls, as each handler reads it (the request's server lifespan state)."""

    runtime: Runtime
    principal: Principal


def tool_names(images: Iterable[ImageRecord]) -> dict[str, ImageRecord]:
    """Each image's tool name: its name with the characters MCP allows (``_`` for the others).
    Names shared by several images get ``__<containerId>``, and, if that is shared too,
    ``__<imageId>``: every name is unique, and stable while the tenant's images are."""
    images = list(images)
    base = {i.imageId: (_NOT_IN_NAME.sub("_", i.name).strip("_") or "agent")[:64] for i in images}
    out: dict[str, ImageRecord] = {}
    for image in images:
        name = base[image.imageId]
        shared = [i for i in images if base[i.imageId] == name]
        if len(shared) > 1:
            container = _NOT_IN_NAME.sub("_", image.containerId)[:40]
            same_container = [i for i in shared if i.containerId == image.containerId]
            name = f"{name}__{container}" if len(same_container) == 1 else f"{name}__{image.imageId}"
        out[name[:MAX_TOOL_NAME]] = image
    return out


async def tools_of(caller: McpCaller) -> dict[str, ImageRecord]:
    """The caller's tools by name: the images of its tenant."""
    return tool_names(await caller.runtime.store.list_images(caller.principal.tenant_id))


def tool_of(name: str, image: ImageRecord) -> mcp_types.Tool:
    import mcp_types

    from agentvm.api.mcp_calls import INPUT_SCHEMA

    about = image.description or f"The AgentVM agent {image.name!r}."
    return mcp_types.Tool(
        name=name,
        title=image.name,
        description=f"{about} (container {image.containerId}, image {image.imageId})",
        input_schema=INPUT_SCHEMA,
        annotations=mcp_types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
    )


# -- the MCP handlers ---------------------------------------------------------------------------
async def list_tools(
    ctx: ServerRequestContext[McpCaller], params: mcp_types.PaginatedRequestParams | None
) -> mcp_types.ListToolsResult:
    import mcp_types

    tools = sorted((await tools_of(ctx.lifespan_context)).items())
    start = _page_start(params.cursor if params is not None else None)
    page = tools[start : start + PAGE_SIZE]
    more = start + PAGE_SIZE < len(tools)
    return mcp_types.ListToolsResult(
        tools=[tool_of(name, image) for name, image in page],
        next_cursor=str(start + PAGE_SIZE) if more else None,
    )


async def call_tool(
    ctx: ServerRequestContext[McpCaller], params: mcp_types.CallToolRequestParams
) -> mcp_types.CallToolResult:
    from mcp_types import INVALID_PARAMS

    from agentvm.api.mcp_calls import run_call

    caller = ctx.lifespan_context
    image = (await tools_of(caller)).get(params.name)
    if image is None:  # another tenant's image reads as one that does not exist
        from mcp.shared.exceptions import MCPError

        raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
    return await run_call(caller, image, params.arguments or {}, ctx.session.report_progress)


def _page_start(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        raise MCPError(INVALID_PARAMS, "invalid cursor")
    return int(cursor)


# -- the endpoint -------------------------------------------------------------------------------
class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then one stateless SDK server for the request."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        runtime: Runtime = request.app.state.runtime
        try:
            await authenticate(request, runtime)
            principal: Principal = request.state.principal
            if not principal.allows("client"):
                raise Forbidden("this API key may not call agents")
        except AgentVMError as exc:
            response = await agentvm_error(request, exc)
            await response(scope, receive, send)
            return
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        server = _server(McpCaller(runtime, principal))
        # The open dev mode takes no key: only loopback hosts and origins then (DNS rebinding: a web
        # page must not reach a keyless local server through its own host name).
        security = _loopback_only() if request.app.state.open_tenant is not None else None
        manager = StreamableHTTPSessionManager(app=server, stateless=True, security_settings=security)
        async with manager.run():
            await manager.handle_request(scope, receive, send)


def _loopback_only() -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _server(caller: McpCaller) -> Any:
    from mcp.server.lowlevel import Server

    @contextlib.asynccontextmanager
    async def lifespan(_: object) -> AsyncIterator[McpCaller]:
        yield caller

    return Server(
        "agentvm",
        version=__version__,
        title="AgentVM",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


__all__ = [
    "MCP_PATH",
    "McpCaller",
    "McpEndpoint",
    "call_tool",
    "list_tools",
    "tool_names",
    "tool_of",
    "tools_of",
]
