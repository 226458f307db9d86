"""Tools for tests: a recording tool and a ToolSources that hands every image the same tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentvm.agent.tools.sources import ToolSources
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.llm import ToolSpec
from agentvm.ports import ToolOutput

OBJECT = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class WorkerDied(BaseException):
    """Stands for the worker process dying: nothing in the turn catches a BaseException."""


@dataclass
class FakeTool:
    """A tool that records its calls; ``behave`` decides what a call does."""

    name: str
    behave: Any = None
    idempotent: bool = False
    timeout_s: float | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, f"the {self.name} tool", OBJECT)

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        self.calls.append(arguments)
        if self.behave is not None:
            return await self.behave(arguments)
        return ToolOutput(f"{self.name}: sunny in {arguments['city']}")


class FixedToolSources(ToolSources):
    """Every image gets these tools (the declarations' own sources are tested elsewhere)."""

    def __init__(self, *tools: FakeTool, timeout_s: float = 60.0, max_chars: int = 32_000) -> None:
        super().__init__()
        self._tools = tools
        self._timeout = timeout_s
        self._max = max_chars

    async def toolbox(self, store, image, *, storage=None, mcp_oauth=None) -> Toolbox:
        return Toolbox(self._tools, default_timeout_s=self._timeout, max_output_chars=self._max)


def agent_types(events: list[dict[str, Any]]) -> list[str]:
    """The types of a client's agent events, a run of ``text_delta`` (merged per flush window, so
    their number varies) counted as one."""
    out: list[str] = []
    for f in events:
        if f.get("source") != "agent":
            continue
        if not (f["type"] == "text_delta" and out and out[-1] == "text_delta"):
            out.append(f["type"])
    return out
