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

**Elicitation.** The session declares the ``elicitation`` capability (form and URL modes) and hands
each ``elicitation/create`` to the ``on_elicit`` of the call it belongs to. The 2026-07-28 revision
embeds the question in the call's own result, so it is the calling task's; earlier revisions send it
as a request of the server's with nothing naming the call, so it goes to the oldest call of this
session still running (a container's session usually runs one call at a time; with several, a
question may be shown against the wrong one of them). No call to answer it, or a call without
``on_elicit``: ``decline`` at once.

**Tasks.** A call the server runs as a task (2025-11-25: a tool whose ``taskSupport`` allows it, on a
server that declares task support; 2026-07-28: any call, at the server's choice, since the session
declares the ``io.modelcontextprotocol/tasks`` extension) is followed to its end by
``adapters.mcp.tasks``: its status messages are the call's progress, and a call cancelled while its
task runs sends ``tasks/cancel``. Where the call allows (``ports.MCP_TASK_INLINE_S``: a host that
suspends turns on tasks), a 2026-07-28 task still working after that long ends the call with
``McpTaskHandedOff``; ``get_task`` and ``cancel_task`` are how the waits sweeper follows it then.
"""

from __future__ import annotations

import asyncio
import json
import logging
import warnings
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from agentvm.adapters.mcp.oauth import NeedsAuthorization
from agentvm.adapters.mcp.stderr_tail import StderrTail
from agentvm.agent.tools.reports import MCP_NEEDS_AUTHORIZATION
from agentvm.llm import IMAGE_MEDIA_TYPES, Attachment, ToolBlock, ToolSpec, blocks_text
from agentvm.ports import McpServerFailed, ToolOutput

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentvm.ports import ElicitationAnswer, ElicitFn, McpTaskState, ProgressFn

log = logging.getLogger("agentvm.mcp")

_CLOSE_TIMEOUT_S = 5.0
_CANCEL_WAIT_S = 6.0  # a cancelled call waits this long for its task's ``tasks/cancel`` (adapters.mcp.tasks)
_MAX_PAGES = 50  # tools/list pages followed before giving up on a server that never ends its list
# the running call's elicitation handler, for questions dispatched in its own task (2026-07-28)
_CALL_ELICITOR: ContextVar[ElicitFn | None] = ContextVar("agentvm_mcp_call_elicitor", default=None)


class McpUnavailable(McpServerFailed):
    """The server could not be reached or did not complete its handshake, or it went away (its
    process exited, its connection closed) during a listing or a call."""


class McpCallFailed(RuntimeError):
    """The server answered a call with a protocol error (an unknown tool, bad arguments...)."""


class SdkMcpConnector:
    """Opens ``SdkMcpSession``s (no I/O until the first use)."""

    def __init__(self, *, connect_timeout_s: float = 10.0) -> None:
        self.connect_timeout_s = connect_timeout_s

    def session(
        self,
        server: str,
        config: Mapping[str, Any],
        *,
        on_tools_changed: Callable[[], None] | None = None,
        http_auth: Any = None,
    ) -> SdkMcpSession:
        """``on_tools_changed``: called when the server sends ``notifications/tools/list_changed``;
        ``http_auth``: an ``httpx.Auth`` for a remote server (``oauth.turn_auth``)."""
        return SdkMcpSession(
            server,
            dict(config),
            connect_timeout_s=self.connect_timeout_s,
            on_tools_changed=on_tools_changed,
            http_auth=http_auth,
        )


class SdkMcpSession:
    def __init__(
        self,
        server: str,
        config: dict[str, Any],
        *,
        connect_timeout_s: float = 10.0,
        on_tools_changed: Callable[[], None] | None = None,
        http_auth: Any = None,
    ) -> None:
        self.server = server
        self._config = config
        self._http_auth = http_auth  # an httpx.Auth for a remote server (the SDK's OAuth provider)
        self._connect_timeout_s = connect_timeout_s
        self._on_tools_changed = on_tools_changed
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._dead = False  # the connection closed under us (a server process that died)
        self._stderr: StderrTail | None = None  # a stdio server's, while it runs
        self._elicitors: list[ElicitFn | None] = []  # the running calls' handlers, oldest first
        self._task_support: dict[str, str] | None = None  # tools' ``execution.taskSupport``, once listed

    async def list_tools(self) -> list[ToolSpec]:
        client = await self._connected()
        specs: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self._guard(client.list_tools(cursor=cursor), "tools/list", "list")
            specs += [ToolSpec(t.name, t.description or "", dict(t.input_schema)) for t in page.tools]
            support = self._task_support = {} if cursor is None else (self._task_support or {})
            support.update({t.name: t.execution.task_support or "" for t in page.tools if t.execution})
            cursor = page.next_cursor
            if not cursor:
                break
        return specs

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressFn | None = None,
        on_elicit: ElicitFn | None = None,
    ) -> ToolOutput:
        client = await self._connected("call")
        progress = None
        if on_progress is not None:
            report = on_progress

            async def progress(value: float, total: float | None, message: str | None) -> None:
                report(value, total, message)

        # set only once connected: the session's own task (``_own``, created by the first use) must
        # not inherit one call's handler, or a pooled session would route later questions to it
        from agentvm.adapters.mcp import tasks

        as_task = await self._runs_as_task(client, name)
        self._elicitors.append(on_elicit)
        token = _CALL_ELICITOR.set(on_elicit)  # inherited by the call's task (``_guard``)
        reporter = tasks.CALL_PROGRESS.set(on_progress)  # a 2026-07-28 task's status reports
        asker = tasks.CALL_ELICIT.set(self._on_elicit)  # and its questions (``inputRequests``)
        try:
            if as_task:
                call = tasks.call_tool_as_task_2025(client.session, name, arguments, on_progress=on_progress)
            else:
                call = client.call_tool(name, arguments, progress_callback=progress)
            # a call that may run as a task is given time to send ``tasks/cancel`` when it is cancelled
            settle_s = _CANCEL_WAIT_S if as_task or self._tasks_extension_spoken(client) else 0.0
            result = await self._guard(call, f"tool {name!r}", "call", settle_s=settle_s)
        except tasks.TaskEnded as ended:
            return ToolOutput(f"Error: the MCP task {ended.status}: {ended}", is_error=True)
        finally:
            tasks.CALL_ELICIT.reset(asker)
            tasks.CALL_PROGRESS.reset(reporter)
            _CALL_ELICITOR.reset(token)
            self._elicitors.remove(on_elicit)
        return _output(result)

    async def get_task(self, task_id: str) -> McpTaskState:
        """One ``tasks/get`` of a 2026-07-28 task (a suspended call's, polled by the waits sweeper)."""
        from agentvm.adapters.mcp import tasks

        client = await self._connected("call")
        call = tasks.get_task_2026(client.session, task_id, to_output=_output)
        state: McpTaskState = await self._guard(call, "tasks/get", "call")
        return state

    async def cancel_task(self, task_id: str) -> None:
        """``tasks/cancel`` of a 2026-07-28 task."""
        from agentvm.adapters.mcp import tasks

        client = await self._connected("call")
        await self._guard(tasks.cancel_task_2026(client.session, task_id), "tasks/cancel", "call")

    async def answer_task(self, task_id: str, answers: Mapping[str, ElicitationAnswer]) -> None:
        """``tasks/update`` of a 2026-07-28 task: the user's answers to its questions."""
        from agentvm.adapters.mcp import tasks

        client = await self._connected("call")
        await self._guard(tasks.answer_task_2026(client.session, task_id, answers), "tasks/update", "call")

    @staticmethod
    def _tasks_extension_spoken(client: Any) -> bool:
        """The server declares the 2026-07-28 tasks extension: any call may come back as a task."""
        from agentvm.adapters.mcp import tasks

        extensions = getattr(client.server_capabilities, "extensions", None) or {}
        return tasks.TASKS_EXTENSION in extensions

    async def _runs_as_task(self, client: Any, name: str) -> bool:
        """A 2025-11-25 server that runs tool calls as tasks, for a tool whose ``taskSupport`` allows
        it (learnt from this session's listing: one ``tools/list`` first when the turn took the list
        from the image record). 2026-07-28 servers decide per call (``tasks.tasks_extension``)."""
        from agentvm.adapters.mcp import tasks

        version = str(client.protocol_version or "")
        if version >= "2026-07-28" or not tasks.supports_tasks(client.server_capabilities):
            return False
        if self._task_support is None:
            await self.list_tools()
        return (self._task_support or {}).get(name) in tasks.TASK_CAPABLE

    @property
    def alive(self) -> bool:
        """Not yet connected, or connected and not ended (a crashed server's session is not)."""
        return not self._dead and (self._owner is None or not self._owner.done())

    async def ping(self, timeout_s: float = 5.0) -> None:
        """Check that a connected server still answers (a pooled session, before a turn reuses it);
        raises ``McpUnavailable`` if it does not."""
        if self._owner is None:
            return
        client = await self._connected()
        # The stateless revision (2026-07-28) has no ping; its servers refuse it, which still says
        # that they are there. Earlier revisions must answer it: a refusal there means the server
        # no longer knows the session (a Streamable HTTP server that restarted).
        warnings.filterwarnings("ignore", message="ping is removed as of 2026-07-28")
        try:
            await asyncio.wait_for(self._guard(client.send_ping(), "ping", "call"), timeout_s)
        except TimeoutError:
            self._dead = True
            raise McpUnavailable(self.server, "call", "does not answer a ping") from None
        except McpUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 (refused: gone before 2026-07-28, there since)
            version = str(getattr(client, "protocol_version", "") or "")
            if version and version < "2026-07-28":  # ping is part of these: a refusal is a lost session
                self._dead = True
                raise McpUnavailable(self.server, "call", f"lost the session: {_why(exc)}") from None

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

            from agentvm.adapters.mcp.tasks import tasks_extension

            async with Client(
                self._transport(),
                message_handler=self._on_message,
                elicitation_callback=self._on_elicit,
                extensions=[tasks_extension()],  # 2026-07-28: servers may answer a call with a task
            ) as client:
                self._client = client
                if self._stderr is not None:
                    self._stderr.release()  # the child holds its own copy from here
                self._ready.set_result(None)
                listener = None
                version = str(client.protocol_version or "")
                if self._on_tools_changed is not None and version >= "2026-07-28":
                    listener = asyncio.create_task(self._listen(client))  # notifications need a stream
                try:
                    await self._stop.wait()
                finally:
                    if listener is not None:
                        listener.cancel()
                        await asyncio.wait({listener}, timeout=1.0)
        except BaseException as exc:  # noqa: BLE001 (reported to the waiting callers, then ended)
            if not self._ready.done():
                reason = (
                    MCP_NEEDS_AUTHORIZATION if _needs_authorization(exc) else f"is unreachable: {_why(exc)}"
                )
                failure = McpUnavailable(self.server, "start", reason)
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

    async def _listen(self, client: Any) -> None:
        """The stateless revision (2026-07-28) sends change events only on a ``subscriptions/listen``
        stream; earlier ones send ``notifications/tools/list_changed`` to ``_on_message``."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    if self._on_tools_changed is not None:
                        self._on_tools_changed()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 (a server without the stream: the TTL refreshes its list)
            log.info("MCP tool change events unavailable", extra={"server": self.server, "error": _why(exc)})

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        changed = isinstance(getattr(message, "root", message), ToolListChangedNotification)
        if changed and self._on_tools_changed is not None:
            self._on_tools_changed()

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """The server asks the user something (``elicitation/create``): the call's ``on_elicit``
        answers (see the module docstring for which call that is)."""
        from mcp.types import ElicitResult

        from agentvm.adapters.mcp.tasks import elicitation_request

        handler = _CALL_ELICITOR.get()
        if handler is None and self._elicitors:
            handler = self._elicitors[0]
        if handler is None:
            return ElicitResult(action="decline")
        request = elicitation_request(params)
        answer = await handler(request)
        content = answer.content if answer.action == "accept" and request.mode == "form" else None
        return ElicitResult(action=answer.action, content=content)

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

            return sse_client(
                self._config["url"], headers=headers, timeout=self._connect_timeout_s, auth=self._http_auth
            )
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        return streamable_http_client(
            self._config["url"], http_client=create_mcp_http_client(headers=headers, auth=self._http_auth)
        )

    async def _guard(self, call: Any, what: str, stage: str, *, settle_s: float = 0.0) -> Any:
        """Await an SDK call; a protocol error becomes ``McpCallFailed`` naming the server, a server
        that goes away (exits, closes its connection) ``McpUnavailable`` saying so. Cancelled, it
        cancels the call and waits at most ``settle_s`` for it to end (a task's ``tasks/cancel``)."""
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
            if settle_s > 0:
                await asyncio.wait({call_task}, timeout=settle_s)
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
        self._dead = True
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
    """A ``CallToolResult`` as the model's blocks, in order: text as text; images, audio and
    embedded blobs as media blocks (``Attachment``); embedded text resources inline; resource links
    as a line naming them. ``structuredContent`` is kept, and the model reads it as JSON unless a
    text block already carries it (the spec asks servers with an output schema to send both).
    Without media the result is plain text, as before."""
    blocks: list[ToolBlock] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            blocks.append(block.text)
        elif kind in ("image", "audio"):
            blocks.append(_media(block.mime_type, block.data or ""))
        elif kind == "resource_link":
            mime = f" ({block.mime_type})" if block.mime_type else ""
            blocks.append(f"[resource {block.name}: {block.uri}{mime}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                blocks.append(text)
            else:
                blob = getattr(resource, "blob", "") or ""
                blocks.append(
                    _media(resource.mime_type or "application/octet-stream", blob, str(resource.uri))
                )
    structured = result.structured_content
    if structured is not None and not _carries(blocks, structured):
        blocks.append(json.dumps(structured, ensure_ascii=False, default=str))
    media = any(isinstance(b, Attachment) for b in blocks)
    return ToolOutput(
        blocks_text(blocks),
        is_error=bool(result.is_error),
        blocks=tuple(blocks) if media else (),
        structured=structured,
    )


def _media(mime_type: str, data: str, name: str | None = None) -> Attachment:
    kind: Literal["image", "file"] = "image" if mime_type in IMAGE_MEDIA_TYPES else "file"
    return Attachment(kind, mime_type, data, name)


def _carries(blocks: list[ToolBlock], structured: Any) -> bool:
    """A text block already holds ``structured``: as JSON, or, for the ``{"result": value}`` that
    SDK servers wrap a plain return value in (their output schema), as that value's text."""
    wrapped = (
        structured["result"] if isinstance(structured, dict) and structured.keys() == {"result"} else None
    )
    for block in blocks:
        if not isinstance(block, str):
            continue
        if wrapped is not None and block == (wrapped if isinstance(wrapped, str) else None):
            return True
        try:
            parsed = json.loads(block)
        except ValueError:
            continue
        if parsed == structured or (wrapped is not None and parsed == wrapped):
            return True
    return False


def _needs_authorization(exc: BaseException) -> bool:
    """The SDK's OAuth provider reached the point where a browser would open (``oauth.turn_auth``)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, NeedsAuthorization)


def _why(exc: BaseException) -> str:
    """A short reason; an exception group (anyio) is unwrapped to its first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


__all__ = ["McpCallFailed", "McpUnavailable", "SdkMcpConnector", "SdkMcpSession"]
