"""The memory tools: what an agent keeps across sessions, on the scope its image declares
(``{"type": "memory", "scope": "container" | "image", "tools": [...]}``: ``declarations.MemoryToolDecl``).

* ``remember(text, topic?)``: store one fact; answers its id. Keyed on the turn and the tool call
  (``ports.memory_id_for``), so a call run again (a redelivered turn, a worker that died while it
  ran) finds its item stored and stores nothing twice: the tools are idempotent.
* ``recall(query, limit?)``: the items holding the query's words, best first (at most ``limit``,
  default 5); an empty query: the most recent.
* ``forget(id)``: delete one item of the scope (an id from ``recall``).

The scope is the image's: ``container:<its container>`` or ``image:<its name>``; a tool never
names another, so an agent reads and writes only its own end user's (or its own image's) memory.
A full scope (``memory_full``) or tenant (``storage_quota_exceeded``) is an error result that
says so, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.agent.tools.declarations import MemoryToolDecl
from agentvm.agent.tools.reports import current_progress
from agentvm.agent.tools.toolbox import tool_output
from agentvm.llm import ToolSpec
from agentvm.ports import MAX_RECALL_LIMIT, MAX_TEXT_CHARS, MAX_TOPIC_CHARS, container_scope, image_scope

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentvm.agent.memory import Memory
    from agentvm.ports import ToolOutput
    from agentvm.records import ImageRecord

MEMORY_SPECS: dict[str, ToolSpec] = {
    "remember": ToolSpec(
        "remember",
        "Remember one fact for later conversations (the user's preferences, names, decisions). "
        "Write it short and self-contained; answers its id.",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                "topic": {"type": "string", "maxLength": MAX_TOPIC_CHARS, "description": "e.g. diet"},
            },
            "required": ["text"],
        },
    ),
    "recall": ToolSpec(
        "recall",
        "Look up what was remembered in earlier conversations, by words; answers the best matches "
        "with their ids (an empty query: the most recent).",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 1000},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_LIMIT},
            },
            "required": ["query"],
        },
    ),
    "forget": ToolSpec(
        "forget",
        "Forget one remembered item, by the id recall gave.",
        {"type": "object", "properties": {"id": {"type": "string", "maxLength": 100}}, "required": ["id"]},
    ),
}


@dataclass(frozen=True)
class MemoryTool:
    """One memory tool of one turn, bound to its tenant and scope."""

    spec: ToolSpec
    memory: Memory
    tenant_id: str
    scope: str
    turn_id: str
    timeout_s: float | None = None
    idempotent: bool = True  # remember is keyed on the call; recall reads; forget twice is a miss

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        name = self.spec.name
        if name == "remember":
            progress = current_progress()
            origin = f"{self.turn_id}#{progress.call_id}" if progress is not None else None
            item, _ = await self.memory.remember(
                self.tenant_id,
                self.scope,
                arguments.get("text"),
                topic=arguments.get("topic"),
                source="tool",
                origin=origin,
            )
            return tool_output({"remembered": True, "id": item.id})
        if name == "recall":
            found = await self.memory.recall(
                self.tenant_id, self.scope, arguments.get("query", ""), limit=arguments.get("limit")
            )
            return tool_output({"memories": [{"id": i.id, "topic": i.topic, "text": i.text} for i in found]})
        forgotten = await self.memory.forget(self.tenant_id, self.scope, str(arguments.get("id", "")))
        return tool_output({"forgotten": forgotten.id})


def memory_scope(decl: MemoryToolDecl, image: ImageRecord) -> str:
    """The scope an image's memory declaration names."""
    return container_scope(image.containerId) if decl.scope == "container" else image_scope(image.name)


def memory_tools(
    declarations: Sequence[Mapping[str, Any]], memory: Memory, image: ImageRecord, turn_id: str
) -> list[MemoryTool]:
    """The tools of an image's memory declarations (validated when the image was made)."""
    tools = []
    for raw in declarations:
        decl = MemoryToolDecl.model_validate(raw)
        scope = memory_scope(decl, image)
        tools += [MemoryTool(MEMORY_SPECS[n], memory, image.tenantId, scope, turn_id) for n in decl.tools]
    return tools


__all__ = ["MEMORY_SPECS", "MemoryTool", "memory_scope", "memory_tools"]
