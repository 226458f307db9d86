"""The MCP client of AgentVM, on the official ``mcp`` SDK: stdio, Streamable HTTP and SSE servers.

The SDK is imported when a session first connects, never at module import (cold starts).

One session is one connection to one server, owned by **one background task**: the SDK's client
is a stack of anyio context managers (transport, session, task group), which must be entered and
left by the same task. Callers (several tool calls of a turn may run at once) talk to it through
the ``Client`` that task holds; ``aclose()`` tells the task to leave its context managers and waits
for it (bounded). A server that is down fails the first call within ``connect_timeout_s`` with a
message naming the server; a call that hangs is cancelled by the caller (``Toolbox`` timeouts,
interrupts) like any coroutine.

stdio servers get the SDK's minimal environment (PATH, HOME, USER, SHELL, TERM, LOGNAME) plus the
declared ``env``, never this process's (which holds provider keys). Their stderr is kept as a
bounded tail (``stderr_tail``) and logged, with the server's name, when it fails to start or
crashes. A server that stops answering (its process exited, its connection closed) is reported as
such (``McpUnavailable``, stage "start" or "call"), never as having refused the call; a refusal
(``McpCallFailed``) is the server answering with a protocol error. ``call_tool`` passes the
server's progress notifications to ``on_progress``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from agentvm.adapters.mcp.stderr_tail import StderrTail
from agentvm.llm import ToolSpec
from agentvm.ports import McpServerFailed, ToolOutput

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.ports import ProgressFn

log = logging.getLogger("agentvm.mcp")

_CLOSE_TIMEOUT_S = 5.0
_MAX_PAGES = 50  # tools/list pages followed before giving up on a server that never ends its list


class McpUnavailable(McpServerFailed):
    """The server could not be reached or did not complete its handshake, or it went away (its
    process exited, its connection closed) during a listing or a call."""


class McpCallFailed(RuntimeError):
    """The server answered a call with a protocol error (an unknown tool, bad arguments...)."""


class SdkMcpConnector:
    """Opens ``SdkMcpSession``s (no I/O until the first use)."""

    def __init__(self, *, connect_timeout_s: float = 10.0) -> None:
        self.connect_timeout_s = connect_timeout_s

    def session(self, server: str, config: Mapping[str, Any]) -> SdkMcpSession:
        return SdkMcpSession(server, dict(config), connect_timeout_s=self.connect_timeout_s)


class SdkMcpSession:
    def __init__(self, server: str, config: dict[str, Any], *, connect_timeout_s: float = 10.0) -> None:
        self.server = server
        self._config = config
        self._connect_timeout_s = connect_timeout_s
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._stderr: StderrTail | None = None  # a stdio server's, while it runs

    async def list_tools(self) -> list[ToolSpec]:
        client = await self._connected()
        specs: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self._guard(client.list_tools(cursor=cursor), "tools/list", "list")
            specs += [ToolSpec(t.name, t.description or "", dict(t.input_schema)) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return specs

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, on_progress: ProgressFn | None = None
    ) -> ToolOutput:
        client = await self._connected("call")
        progress = None
        if on_progress is not None:
            report = on_progress

            async def progress(value: float, total: float | None, message: str | None) -> None:
                report(value, total, message)

        call = client.call_tool(name, arguments, progress_callback=progress)
        result = await self._guard(call, f"tool {name!r}", "call")
        return _output(result)

    async def aclose(self) -> None:
        self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            done, _ = await asyncio.wait({owner}, timeout=_CLOSE_TIMEOUT_S)
            if not done:  # a server that does not let go: cut it off
                owner.cancel()
                await asyncio.wait({owner}, timeout=1.0)

    # -- the connection ------------------------------------------------------------------------
    async def _connected(self, stage: str = "list") -> Any:
        async with self._lock:
            if self._owner is None:
                self._ready = asyncio.get_running_loop().create_future()
                self._owner = asyncio.create_task(self._own(), name=f"mcp:{self.server}")
        assert self._ready is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self._connect_timeout_s)
        except TimeoutError:
            seconds = self._connect_timeout_s
            failure = McpUnavailable(
                self.server, "start", f"is unreachable: no handshake within {seconds:g} s"
            )
            self._log_failure(failure)
            raise failure from None
        except McpUnavailable as failure:
            if failure.stage == "start":
                raise
            raise McpUnavailable(self.server, stage, failure.reason) from None  # closed between uses
        return self._client

    async def _own(self) -> None:
        """Enter the SDK's client in this task, serve until ``aclose``, then leave it here too."""
        assert self._ready is not None
        try:
            from mcp import Client

            async with Client(self._transport()) as client:
                self._client = client
                if self._stderr is not None:
                    self._stderr.release()  # the child holds its own copy from here
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 (reported to the waiting callers, then ended)
            if not self._ready.done():
                failure = McpUnavailable(self.server, "start", f"is unreachable: {_why(exc)}")
                self._log_failure(failure)
                self._ready.set_exception(failure)
                self._ready.exception()  # retrieved: a session closed before its first use waits for none
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.info("MCP session ended", extra={"server": self.server, "error": type(exc).__name__})
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.release()
            if not self._ready.done():
                self._ready.set_exception(McpUnavailable(self.server, "start", "closed the session"))
            elif not self._stop.is_set() and self._ready.exception() is None:
                # it was up and nobody closed it: the next use fails at once, naming why
                self._ready = asyncio.get_running_loop().create_future()
                self._ready.set_exception(McpUnavailable(self.server, "call", "closed the session"))

    def _transport(self) -> Any:
        kind = self._config.get("type") or "stdio"
        if kind == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=self._config["command"],
                args=list(self._config.get("args") or []),
                env=dict(self._config.get("env") or {}),  # merged over the SDK's minimal environment
            )
            self._stderr = StderrTail()
            return stdio_client(params, errlog=self._stderr.writer)
        headers = dict(self._config.get("headers") or {})
        if kind == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self._config["url"], headers=headers, timeout=self._connect_timeout_s)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        return streamable_http_client(
            self._config["url"], http_client=create_mcp_http_client(headers=headers)
        )

    async def _guard(self, call: Any, what: str, stage: str) -> Any:
        """Await an SDK call; a protocol error becomes ``McpCallFailed`` naming the server, a server
        that goes away (exits, closes its connection) ``McpUnavailable`` saying so."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        owner = self._owner
        call_task = asyncio.ensure_future(call)
        waiters: set[asyncio.Future[Any]] = {call_task}
        if owner is not None:
            waiters.add(owner)  # a session that dies mid-call fails the call, not hangs it
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call_task.cancel()
            raise
        if not call_task.done():
            call_task.cancel()
            raise self._gone(what, stage)
        try:
            return call_task.result()
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise self._gone(what, stage) from None
            raise McpCallFailed(f"MCP server {self.server!r} refused {what}: {exc}") from None
        except (OSError, EOFError) as exc:
            raise self._gone(what, stage, _why(exc)) from None

    def _gone(self, what: str, stage: str, why: str | None = None) -> McpUnavailable:
        """The server stopped answering during ``what``: a stdio server crashed (its process
        exited), a remote one closed the connection. Logged with the stderr tail."""
        stdio = self._stderr is not None
        reason = f"crashed during {what}" if stdio else f"closed the connection during {what}"
        failure = McpUnavailable(self.server, stage, reason + (f": {why}" if why else ""))
        self._log_failure(failure)
        return failure

    def _log_failure(self, failure: McpServerFailed) -> None:
        """One log line: the server, the stage, the reason and the tail of its stderr (never its env)."""
        extra: dict[str, Any] = {"server": self.server, "stage": failure.stage, "reason": failure.reason}
        if failure.exit_code is not None:
            extra["exit_code"] = failure.exit_code
        if self._stderr is not None:
            extra["stderr_tail"] = self._stderr.text()
        log.warning("MCP server failed", extra=extra)


def _output(result: Any) -> ToolOutput:
    """A ``CallToolResult`` as text for the model: text parts, else structured content as JSON;
    other parts as short placeholders (their bytes are not text a model can read here)."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "")
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}, {size} bytes base64]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {getattr(resource, 'uri', '')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return ToolOutput("\n".join(parts), is_error=bool(result.is_error))


def _why(exc: BaseException) -> str:
    """A short reason; an exception group (anyio) is unwrapped to its first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


__all__ = ["McpCallFailed", "McpUnavailable", "SdkMcpConnector", "SdkMcpSession"]
