"""The tools of one turn (``Toolbox``), and how a call becomes a result the model can read.

``Toolbox.run`` never raises for a tool's own failure: an unknown tool, input that is not valid
JSON or does not match the tool's schema, an exception, a timeout (per tool, default 60 s) and an
oversized output (capped, with a marker saying so) all become a ``ToolResult`` with ``is_error``,
which goes back to the model. Only cancellation (an interrupt, the turn's deadline) propagates,
so the caller can stop a running tool.

Some calls are not run here at all: a client-side tool's and one that needs a person's approval
(``Toolbox.wait_for``). The turn suspends on them (``agent.waits``) and goes on once they are
answered. And a call may become a wait while it runs: with ``task_inline_s`` set (a host that
suspends turns on MCP tasks), an MCP call whose 2026-07-28 task still works after that long comes
back as a run whose ``handoff`` holds the task (``ports.McpTaskHandedOff``): the turn waits for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentvm.agent.tools.elicitation import (
    CallElicitation,
    ElicitationScope,
    reset_current_elicitation,
    set_current_elicitation,
)
from agentvm.agent.tools.media import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_RESULT_BYTES, result_blocks
from agentvm.agent.tools.reports import (
    CallProgress,
    ToolReports,
    reset_current_progress,
    set_current_progress,
)
from agentvm.llm import ToolResult, blocks_text
from agentvm.ports import MCP_TASK_INLINE_S, FileChange, McpTaskHandedOff, ToolOutput

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from agentvm.llm import ToolCall, ToolSpec
    from agentvm.ports import Tool
    from agentvm.records import WaitKind

log = logging.getLogger("agentvm.tools")

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_OUTPUT_CHARS = 32_000
_MAX_ERROR_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class ToolRun:
    """The outcome of one call: the result for the model, and how it went (for events and metrics)."""

    result: ToolResult
    status: str  # "ok" | "error" | "timeout" | "invalid_input" | "unknown_tool" | "denied" | "suspended"
    duration_s: float
    reason: str | None = None  # a denial's reason, as the person gave it
    files: tuple[FileChange, ...] = ()  # workspace files a sandbox tool changed
    structured: Any = None  # a JSON value the tool returned beside its content (MCP structuredContent)
    handoff: McpTaskHandedOff | None = None  # status "suspended": its MCP task runs on; the turn waits


class ClientTool:
    """A tool the client runs (``{"type": "client"}``): never called here; the turn waits for the
    client's result (at most ``timeout_s``)."""

    runs_on_client = True
    idempotent = False

    def __init__(self, spec: ToolSpec, timeout_s: float) -> None:
        self.spec = spec
        self.timeout_s = timeout_s

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        raise RuntimeError("a client-side tool runs on the client, not on the server")


class Toolbox:
    """The tools a turn may call, by the unique name the model sees."""

    def __init__(
        self,
        tools: Sequence[Tool] = (),
        *,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_media_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
        max_media_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        closers: Sequence[Callable[[], Awaitable[None]]] = (),
        notes: Sequence[str] = (),
        approval: frozenset[str] | str = frozenset(),
        approval_timeout_s: float = 3600.0,
        reports: ToolReports | None = None,
    ) -> None:
        self._tools = {tool.spec.name: tool for tool in tools}
        self.default_timeout_s = default_timeout_s
        self.max_output_chars = max_output_chars
        self.max_media_block_bytes = max_media_block_bytes
        self.max_media_result_bytes = max_media_result_bytes
        self._closers = list(closers)
        self.notes = list(notes)  # e.g. an MCP server whose tools could not be listed
        self.approval = approval  # names of the tools that need approval, or "*": all of them
        self.approval_timeout_s = approval_timeout_s
        # what the tools tell the client while the turn runs (MCP failures, progress): reports.py
        self.reports = reports if reports is not None else ToolReports()
        # who answers an MCP server's questions during a call (elicitation.py; the worker sets it).
        # None: every question is declined at once.
        self.elicitation: ElicitationScope | None = None
        # how long a call follows its MCP task before the turn suspends on it (the worker sets it
        # where turns suspend on tasks). None: every task is followed to its end in the call.
        self.task_inline_s: Callable[[], float] | None = None

    def add(self, tools: Sequence[Tool]) -> None:
        """More tools (a name already taken keeps its first tool)."""
        for tool in tools:
            self._tools.setdefault(tool.spec.name, tool)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in self._tools.values())

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __len__(self) -> int:
        return len(self._tools)

    def wait_for(self, call: ToolCall, *, input_error: str | None = None) -> tuple[WaitKind, float] | None:
        """What the call must wait for before it has a result, and for how long at most (seconds):
        the client (a client-side tool) or a person's approval. None: it runs now, and so does a
        call that would fail anyway (unknown tool, bad input): nobody approves an error."""
        tool = self._tools.get(call.name)
        if tool is None or input_error is not None:
            return None
        if schema_problem(tool.spec.input_schema, call.input) is not None:
            return None
        if getattr(tool, "runs_on_client", False):
            return "client", float(tool.timeout_s or self.default_timeout_s)
        if self.approval == "*" or call.name in self.approval:
            return "approval", self.approval_timeout_s
        return self.job_wait(call)

    def job_wait(self, call: ToolCall) -> tuple[WaitKind, float] | None:
        """A call whose job runs elsewhere (a sandbox worker): the turn waits for its result."""
        tool = self._tools.get(call.name)
        if tool is not None and getattr(tool, "runs_remotely", False):
            return "sandbox", float(tool.timeout_s or self.default_timeout_s)
        return None

    async def run(self, call: ToolCall, *, input_error: str | None = None) -> ToolRun:
        loop = asyncio.get_running_loop()
        started = loop.time()

        def done(text: str, status: str, files: tuple[FileChange, ...] = ()) -> ToolRun:
            is_error = status != "ok"
            result = ToolResult(call.id, call.name, self._capped(text), is_error=is_error)
            return ToolRun(result, status, loop.time() - started, files=files)

        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return done(f"Error: there is no tool named {call.name!r} (available: {known})", "unknown_tool")
        if input_error is not None:
            return done(f"Error: {input_error}", "invalid_input")
        problem = schema_problem(tool.spec.input_schema, call.input)
        if problem is not None:
            return done(f"Error: invalid input for {call.name}: {problem}", "invalid_input")
        timeout = tool.timeout_s or self.default_timeout_s
        token = set_current_progress(CallProgress(self.reports, call.id, call.name))
        asking = None
        if self.elicitation is not None:
            asking = CallElicitation(self.elicitation, self.reports, call.id, call.name)
        asking_token = set_current_elicitation(asking)
        inline_token = MCP_TASK_INLINE_S.set(None if self.task_inline_s is None else self.task_inline_s())
        limit: asyncio.Timeout | None = None
        try:
            async with asyncio.timeout(timeout) as limit:  # paused while a user answers a question
                if asking is not None:
                    asking.limit = limit
                output: ToolOutput = await tool.call(call.input)
        except TimeoutError:
            return done(f"Error: {call.name} timed out after {timeout:g} s", "timeout")
        except McpTaskHandedOff as handoff:
            # its task runs on: the turn waits for it, for what is left of the call's deadline
            handoff.server = str(getattr(tool, "server", ""))
            ends = limit.when() if limit is not None else None  # moved on by the questions' pauses
            handoff.remaining_s = max(0.0, (ends or started + timeout) - loop.time())
            return replace(done("", "suspended"), handoff=handoff)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("tool failed", extra={"tool": call.name, "error": type(exc).__name__})
            message = str(exc)[:_MAX_ERROR_CHARS] or type(exc).__name__
            return done(f"Error: {call.name} failed: {message}", "error")
        finally:
            MCP_TASK_INLINE_S.reset(inline_token)
            reset_current_progress(token)
            reset_current_elicitation(asking_token)
            if asking is not None:
                asking.close()
        status = "error" if output.is_error else "ok"
        blocks = result_blocks(output, self)
        if not blocks:  # a text result, or an error (stored as text: its media as placeholders)
            return replace(done(output.text, status, output.files), structured=output.structured)
        result = ToolResult(call.id, call.name, blocks_text(blocks), is_error=output.is_error, blocks=blocks)
        return ToolRun(
            result, status, loop.time() - started, files=output.files, structured=output.structured
        )

    def _capped(self, text: str) -> str:
        return capped(text, self.max_output_chars)

    async def aclose(self) -> None:
        """Close what the tools opened (MCP sessions). Never raises."""
        for close in self._closers:
            try:
                await close()
            except Exception as exc:  # a close that fails must not fail a finished turn
                log.warning("closing a tool source failed", extra={"error": type(exc).__name__})


def capped(text: str, limit: int = DEFAULT_MAX_OUTPUT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying so."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output truncated: {limit} of {len(text)} characters shown]"


def schema_problem(schema: dict[str, Any], value: dict[str, Any]) -> str | None:
    """Why ``value`` does not match ``schema`` (the most relevant error), or None if it does."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")


def output_text(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def tool_output(value: Any, *, is_error: bool = False) -> ToolOutput:
    return ToolOutput(output_text(value), is_error=is_error)


__all__ = [
    "ClientTool",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT_S",
    "ToolRun",
    "Toolbox",
    "capped",
    "output_text",
    "schema_problem",
    "tool_output",
]
