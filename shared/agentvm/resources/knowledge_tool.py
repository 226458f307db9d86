"""The search tool of a knowledge resource, for images built from an agent definition.

An image built from ``resource://agents/...`` that lists ``knowledge`` gets one tool per knowledge
resource, declared in the image as ``{"type": "knowledge", name, description, owner, resource,
version}``: pinned to the exact version the build resolved (``owner`` is the tenant it lives in:
the image's own, or the platform's). Only a build writes such a declaration; an image's inline
``config.tools`` cannot (``agent.tools.declarations.ToolDecl`` has no ``knowledge`` type), so a tenant
cannot point a tool at another tenant's resources.

The tool takes ``{"query": str, "limit": int}`` and answers the best chunks, ranked
(``agentvm.resources.search``), each with its document's title and id, so the model can cite them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.llm import ToolSpec
from agentvm.ports import ToolOutput

if TYPE_CHECKING:
    from agentvm.ports import ResourceStore

DEFAULT_RESULTS = 4


class KnowledgeToolDecl(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    type: str = "knowledge"
    name: StrictStr
    description: StrictStr = Field(max_length=4000)
    owner: StrictStr
    resource: StrictStr
    version: StrictStr


def tool_name(resource: str) -> str:
    """``search_<name>``, in the characters every provider accepts, at most 64 long."""
    return ("search_" + re.sub(r"[^A-Za-z0-9_-]+", "_", resource).strip("_"))[:64]


_INPUT = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for, in words"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many passages"},
    },
    "required": ["query"],
}


class KnowledgeSearchTool:
    idempotent = True
    timeout_s = 10.0

    def __init__(self, decl: KnowledgeToolDecl, resources: ResourceStore) -> None:
        self.decl = decl
        self._resources = resources
        self._spec = ToolSpec(decl.name, decl.description, _INPUT)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        from agentvm.resources.centre import search_version  # on first call: the tool is built on every turn

        d = self.decl
        version = await self._resources.get_version(d.owner, "knowledge", d.resource, d.version)
        if version is None:
            raise ValueError(f"the knowledge resource {d.resource}@{d.version} is no longer available")
        hits = search_version(
            version, str(arguments["query"]), int(arguments.get("limit") or DEFAULT_RESULTS)
        )
        if not hits:
            return ToolOutput("No passage matches this query.")
        parts = []
        for n, hit in enumerate(hits, 1):
            source = hit.title or hit.documentId or f"document {hit.document + 1}"
            ident = f", id {hit.documentId}" if hit.documentId and hit.title else ""
            parts.append(f"[{n}] {source}{ident} (score {hit.score:.2f})\n{hit.text}")
        return ToolOutput("\n\n".join(parts))


def knowledge_tools(decls: list[dict[str, Any]], resources: ResourceStore) -> list[KnowledgeSearchTool]:
    return [KnowledgeSearchTool(KnowledgeToolDecl.model_validate(raw), resources) for raw in decls]


__all__ = ["KnowledgeSearchTool", "KnowledgeToolDecl", "knowledge_tools", "tool_name"]
