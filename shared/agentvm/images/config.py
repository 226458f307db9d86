"""An image's config: ``ImageConfig`` (what ``image_create`` and ``image_update`` take, and a session
export carries), the default name, and the checks an inline config passes before it is stored.

The checks refuse now what would fail at the first turn: a model whose provider this server lacks,
a tool source the host cannot run (stdio MCP on AWS), and what the caller may not declare (stdio
MCP servers run a command on the server: admin only).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

from agentvm.agent.diet import DEFAULT_HEAD_CHARS, DEFAULT_KEEP_STEPS, DEFAULT_MAX_RESULT_CHARS
from agentvm.agent.tools.declarations import (
    MAX_TOOLS,
    ApprovalConfig,
    McpStdioServer,
    ToolDecl,
    parse_mcp_servers,
)
from agentvm.errors import BadRequest, Forbidden
from agentvm.ports.replies import DEFAULT_REPLY_TTL_S, MAX_REPLY_TTL_S
from agentvm.records import ConcurrencyPolicy

if TYPE_CHECKING:
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

MAX_CUSTOM_DATA_CHARS = 16_384  # an image's customData, as compact JSON


class ReplyCachePolicy(BaseModel):
    """An image's reply cache (turns/reply_cache.py): on (``enabled``) or off, and how long a cached
    reply is served (``ttlS`` seconds)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    enabled: StrictBool = True
    ttlS: int = Field(default=DEFAULT_REPLY_TTL_S, ge=60, le=MAX_REPLY_TTL_S)


class ContextDietPolicy(BaseModel):
    """An image's context diet (agent/diet.py): tool results followed by ``keepSteps`` tool steps are
    elided to a stub; others longer than ``maxResultChars`` show their first ``headChars``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    enabled: StrictBool = True
    keepSteps: int = Field(default=DEFAULT_KEEP_STEPS, ge=1, le=1000)
    maxResultChars: int = Field(default=DEFAULT_MAX_RESULT_CHARS, ge=200, le=10_000_000)
    headChars: int = Field(default=DEFAULT_HEAD_CHARS, ge=0, le=1_000_000)


class ImageConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)

    name: StrictStr | None = Field(default=None, max_length=200)
    description: StrictStr | None = Field(default=None, max_length=2000)
    systemPrompt: StrictStr | None = Field(default=None, max_length=100_000)
    model: StrictStr | None = Field(default=None, max_length=200)
    mcpServers: dict[str, Any] | None = None
    tools: list[ToolDecl] | None = Field(default=None, max_length=MAX_TOOLS)
    maxSteps: int | None = Field(default=None, ge=1, le=100)
    # false: this image's turns send no prompt-cache breakpoints (default: on, unless the tenant's
    # llm.promptCaching is false)
    promptCaching: StrictBool | None = None
    concurrency: ConcurrencyPolicy | None = None
    approval: ApprovalConfig | None = None
    # Additive: build the image from an agent resource (``agentvm.resources.build``), and, in
    # image_update, resolve that definition again (``rebuild``).
    agent: StrictStr | None = Field(default=None, max_length=1000)
    rebuild: StrictBool | None = None
    # Batched connections' text cadence on this image's turns (streaming/batch_cadence.py): "live"
    # (text every 250 ms) or "economy" (every 2 s, fewer billed messages); a connection's
    # ?cadence= wins; None = the tenant's config key streaming.cadence
    cadence: Literal["live", "economy"] | None = None
    # The model of this image's side calls (titles, compaction summaries): a "provider/model" ref;
    # "" (or the image's model) = its own model; None = the cheap sibling of its model on the same
    # provider (agent/side_model.py). The server's sessions.titleModel / compaction.model win.
    sideModel: StrictStr | None = Field(default=None, max_length=200)
    # Mixed-model routing (agent/model_policy.py), off unless set: short first messages (fewer
    # than fastMaxChars characters, default 200, before any tool call) go to fastModel.
    fastModel: StrictStr | None = Field(default=None, max_length=200)
    fastMaxChars: int | None = Field(default=None, ge=1, le=100_000)
    # Opt-in: answer the session's first question from the cache of this config's earlier replies
    # (turns/reply_cache.py), {"enabled": true, "ttlS": 86400}; None = off
    replyCache: ReplyCachePolicy | None = None
    # Opt-in: elide old tool results and show large ones by reference (agent/diet.py),
    # {"enabled": true, "keepSteps": 4, "maxResultChars": 8000, "headChars": 2000}; None = off
    contextDiet: ContextDietPolicy | None = None
    # An application's own data on the image (favorites, sort order, tags: AgentX 2.x's
    # ``customData``), stored and returned as given, never read by AgentVM; an update replaces it
    customData: dict[str, Any] | None = None

    @field_validator("customData", mode="after")
    @classmethod
    def _custom_data(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and len(json.dumps(v, separators=(",", ":"))) > MAX_CUSTOM_DATA_CHARS:
            raise ValueError(f"at most {MAX_CUSTOM_DATA_CHARS} characters as JSON")
        return v

    @field_validator("mcpServers", mode="after")
    @classmethod
    def _mcp_servers(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            parse_mcp_servers(v, allow_stdio=True)  # the host's own rule is checked by the command
        return v

    @field_validator("tools", mode="after")
    @classmethod
    def _unique_names(cls, v: list[Any] | None) -> list[Any] | None:
        from agentvm.agent.tools.sandbox import SPECS as SANDBOX_TOOLS

        names: list[str] = []
        for decl in v or []:  # a sandbox declaration brings its own six tools, a memory one its own
            if decl.type == "sandbox":
                names += list(SANDBOX_TOOLS)
            elif decl.type == "memory":
                names += list(decl.tools)
            else:
                names.append(decl.name)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique (repeated: {', '.join(duplicates)})")
        return v


def tool_decls(tools: list[Any] | None) -> list[dict[str, Any]] | None:
    """Declarations as stored: validated, without unset fields (secret headers stay references)."""
    return None if tools is None else [decl.model_dump(exclude_none=True) for decl in tools]


def check_tool_sources(rt: Runtime, mcp_servers: dict[str, Any] | None, *, admin: bool) -> None:
    """What the host cannot run is refused now, not at the first turn (stdio MCP on AWS), and so is
    what the caller may not declare (stdio MCP servers run commands on the server: admin only)."""
    if not mcp_servers:
        return
    allow_stdio = rt.tools.allow_stdio if rt.tools is not None else True
    try:
        servers = parse_mcp_servers(mcp_servers, allow_stdio=allow_stdio)
    except ValueError as exc:
        raise BadRequest(f"config.mcpServers.{exc}") from None
    stdio = sorted(name for name, s in servers.items() if isinstance(s, McpStdioServer))
    if stdio and not admin:
        raise Forbidden(
            f"config.mcpServers.{stdio[0]}: stdio MCP servers run a command on the server; "
            "only an admin key may declare them (use a Streamable HTTP server)"
        )


def check_built(rt: Runtime, image: ImageRecord, *, admin: bool) -> None:
    """A build passes the checks inline configs pass (the model's provider, who may run MCP stdio)."""
    if image.model:
        rt.models.resolve(image.model)
    check_tool_sources(rt, image.mcpServers, admin=admin)


def reply_cache_policy(config: ImageConfig) -> dict[str, Any] | None:
    """The policy as an image stores it."""
    return None if config.replyCache is None else config.replyCache.model_dump()


def context_diet_policy(config: ImageConfig) -> dict[str, Any] | None:
    """The diet as an image stores it."""
    return None if config.contextDiet is None else config.contextDiet.model_dump()


__all__ = [
    "ContextDietPolicy",
    "ImageConfig",
    "ReplyCachePolicy",
    "check_built",
    "check_tool_sources",
    "context_diet_policy",
    "reply_cache_policy",
    "tool_decls",
]
