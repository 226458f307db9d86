"""The search tool of a knowledge resource, for images built from an agent definition.

An image built from ``resource://agents/...`` that lists ``knowledge`` gets one tool per knowledge
resource, declared in the image as ``{"type": "knowledge", name, description, owner, resource,
version}``: pinned to the exact version the build resolved (``owner`` is the tenant it lives in:
the image's own, or the platform's). Only a build writes such a declaration; an image's inline
``config.tools`` cannot (``agent.tools.declarations.ToolDecl`` has no ``knowledge`` type), so a tenant
cannot point a tool at another tenant's resources.

The tool takes ``{"query": str, "limit": int}`` and answers the best passages, ranked by
``ResourceCentre.search_in``: ``resources.hybrid.hybrid_search`` over the knowledge index (words and,
with an embedder, vectors) on hosts that have one, else the version's BM25 offsets. Each passage
comes with its title and a citation (``[handbook.pdf p.4 — Billing > Refunds]``) the model can
quote and a client can show.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.llm import ToolSpec
from agentvm.ports import ToolOutput

if TYPE_CHECKING:
    from agentvm.ports import ResourceRegistry

DEFAULT_RESULTS = 4
MAX_RESULTS = 10


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

    def __init__(self, decl: KnowledgeToolDecl, resources: ResourceRegistry) -> None:
        self.decl = decl
        self._resources = resources
        self._spec = ToolSpec(decl.name, decl.description, _INPUT)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        d = self.decl
        version = await self._resources.store.get_version(d.owner, "knowledge", d.resource, d.version)
        if version is None:
            raise ValueError(f"the knowledge resource {d.resource}@{d.version} is no longer available")
        limit = max(1, min(int(arguments.get("limit") or DEFAULT_RESULTS), MAX_RESULTS))
        hits, mode = await self._resources.search_in(version, str(arguments["query"]), limit)
        if not hits:
            return ToolOutput("No passage matches this query.")
        if mode != "bm25":
            from agentvm.resources.passages import for_the_model  # on first call: built on every turn

            return ToolOutput(for_the_model(hits))
        parts = []
        for n, hit in enumerate(hits, 1):
            source = hit.title or hit.documentId or f"document {hit.document + 1}"
            ident = f", id {hit.documentId}" if hit.documentId and hit.title else ""
            parts.append(f"[{n}] {source}{ident} (score {hit.score:.2f})\n{hit.text}")
        return ToolOutput("\n\n".join(parts))


def knowledge_tools(decls: list[dict[str, Any]], resources: ResourceRegistry) -> list[KnowledgeSearchTool]:
    return [KnowledgeSearchTool(KnowledgeToolDecl.model_validate(raw), resources) for raw in decls]


__all__ = ["KnowledgeSearchTool", "KnowledgeToolDecl", "knowledge_tools", "tool_name"]
