"""Build an image from an agent definition: definition -> build -> image -> running agent.

``image_create_request`` with ``config.agent: "resource://agents/<name>[@<version>|@<tag>]"``
resolves the agent and everything it refers to (``ResourceCentre.resolve``), and turns the
closure into the image's own fields: the system prompt (the agent's, or its prompt resource
rendered with the agent's arguments), the model, tool declarations and MCP servers (from tool
resources), the sandbox tools (from a sandbox profile), a search tool per knowledge resource
(``agent.knowledge_tools``), ``maxSteps`` and ``approval``. The image keeps this snapshot: later
versions of the resources change nothing for it. ``image_update`` with ``rebuild: true`` (or
``POST /v1/images/{imageId}/rebuild``) resolves the definition again as it was written and moves
the image to what it resolves to now; each build is recorded in ``build.history``.

While an image is pinned to resource versions, those versions cannot be deleted: the build
records dependency edges from ``image:<imageId>`` (removed when the image is rebuilt or deleted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.errors import InvalidResource, InvalidUri
from agentvm.resources.uri import parse

if TYPE_CHECKING:
    from agentvm.ports import ResourceRegistry
    from agentvm.records import ImageRecord, ResourceVersion

MAX_HISTORY = 20
# What a build sets on the image; an image built from a definition takes none of these inline.
BUILT_FIELDS = ("systemPrompt", "model", "tools", "mcpServers", "maxSteps", "approval")


@dataclass(frozen=True)
class Build:
    fields: dict[str, Any]  # ImageRecord fields: systemPrompt, model, tools, mcpServers, maxSteps, approval
    pins: list[ResourceVersion]  # the agent and its closure, exact versions
    agent: ResourceVersion

    def record(
        self, written: str, now_ms: int, by: str | None, previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``ImageRecord.build``: what the image is pinned to, and the builds before this one."""
        entry = {
            "resolved": self.agent.uri,
            "pins": sorted({v.uri for v in self.pins}),
            "builtAt": now_ms,
            "builtBy": by,
        }
        history = [*(previous or {}).get("history", []), entry][-MAX_HISTORY:]
        return {"agent": written, **entry, "history": history, "targets": [list(t) for t in self.targets()]}

    def targets(self) -> list[tuple[str, str, str, str]]:
        """The dependency edges the image holds: (owner tenant, kind, name, exact version)."""
        return sorted({(v.tenantId, v.kind, v.name, v.version) for v in self.pins})


def dependent_of(image: ImageRecord) -> str:
    return f"{image.tenantId}|image:{image.imageId}"


def edges_of(build: dict[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """The dependency edges an image's build holds: (owner tenant, kind, name, exact version)."""
    return [tuple(t) for t in (build or {}).get("targets", [])]


async def build_agent(centre: ResourceRegistry, tenant_id: str, uri: str) -> Build:
    """Resolve ``uri`` (an agent resource) and turn its closure into image fields."""
    from agentvm.resources.kinds import render

    try:
        ref = parse(uri, kind="agent")
    except InvalidUri as exc:
        raise InvalidUri(f"config.agent: {exc.message}") from None
    resolved = await centre.resolve(tenant_id, ref)
    agent = resolved.resource
    closure = {str(parse(u)): v for u, v in resolved.closure.items()}

    def dep(uri_: str) -> ResourceVersion:  # a reference as the spec writes it
        return closure[str(parse(uri_))]

    spec = agent.spec
    fields: dict[str, Any] = {}
    if "systemPrompt" in spec:
        fields["systemPrompt"] = spec["systemPrompt"]
    elif "prompt" in spec:
        prompt = dep(spec["prompt"]["uri"])
        fields["systemPrompt"] = render(prompt.spec, spec["prompt"].get("arguments", {}))
    for key in ("model", "maxSteps", "approval"):
        if key in spec:
            fields[key] = spec[key]
    tools: list[dict[str, Any]] = []
    servers: dict[str, Any] = {}
    for uri_ in spec.get("tools", []):
        tool = dep(uri_)
        if "tool" in tool.spec:
            tools.append(tool.spec["tool"])
        else:
            server = tool.spec["mcpServer"]
            if server["name"] in servers:
                raise InvalidResource(
                    f"spec.tools: two tool resources declare the MCP server {server['name']!r}"
                )
            servers[server["name"]] = server["config"]
    if "sandbox" in spec:
        profile = {k: v for k, v in dep(spec["sandbox"]).spec.items() if k != "packages"}
        tools.append({"type": "sandbox", **profile})
    for uri_ in spec.get("knowledge", []):
        tools.append(_knowledge_decl(dep(uri_)))
    names = [t["name"] for t in tools if t.get("name")]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidResource(f"spec.tools: two tools are named {duplicates[0]!r}")
    if tools:
        fields["tools"] = tools
    if servers:
        fields["mcpServers"] = servers
    return Build(fields=fields, pins=[agent, *closure.values()], agent=agent)


def _knowledge_decl(v: ResourceVersion) -> dict[str, Any]:
    from agentvm.resources.knowledge_tool import tool_name

    about = v.description or f"the {v.name} knowledge base"
    documents = len(v.spec.get("documents") or v.spec.get("uploads") or [])  # inline, or uploaded files
    return {
        "type": "knowledge",
        "name": tool_name(v.name),
        "description": f"Search {about} ({documents} documents): the best-matching "
        "passages for a query, with their titles and a citation. Use it before answering questions it "
        "may cover, and cite what you use.",
        "owner": v.tenantId,
        "resource": v.name,
        "version": v.version,
    }


async def build_into(
    centre: ResourceRegistry, image: ImageRecord, written: str, *, now_ms: int, by: str | None
) -> tuple[ImageRecord, Build]:
    """``image`` with the fields and build record of ``written`` resolved now (not stored)."""
    build = await build_agent(centre, image.tenantId, written)
    cleared = dict.fromkeys(BUILT_FIELDS)
    record = build.record(written, now_ms, by, image.build)
    updated = image.model_copy(
        update={**cleared, **build.fields, "build": record, "toolCatalog": None, "updatedAt": now_ms}
    )
    return updated, build


async def move_edges(centre: ResourceRegistry, image: ImageRecord, before: dict[str, Any] | None) -> None:
    """The image's dependency edges: the old build's removed, the current one's added."""
    dependent = dependent_of(image)
    old, new = set(edges_of(before)), set(edges_of(image.build))
    if old - new:
        await centre.store.remove_edges(dependent, sorted(old - new))
    if new - old:
        await centre.store.add_edges(dependent, sorted(new - old))


__all__ = ["BUILT_FIELDS", "Build", "build_agent", "build_into", "dependent_of", "edges_of", "move_edges"]
