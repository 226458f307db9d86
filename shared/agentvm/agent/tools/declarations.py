"""What an image may declare about tools, validated at ``image_create`` / ``image_update``.

Three sources, all in the image's ``config``:

* ``mcpServers``: AgentX's ``McpServerConfig`` map (protocol §6.1): stdio ``{command, args, env}``
  (local host only), ``{"type": "http", url, headers}`` (Streamable HTTP) or ``{"type": "sse", ...}``;
  a remote one may add ``"auth": "oauth"``: it is reached with the tenant's OAuth tokens for its URL
  (an admin authorizes it once, docs/mcp.md "OAuth").
* ``tools``: a list of declarations: ``{"type": "http", name, description, inputSchema, method, url,
  headers, timeoutS, idempotent}``, ``{"type": "builtin", name}`` (``agent.tools.builtin``) or
  ``{"type": "sandbox", wallS, cpuS, memoryMb, outputBytes, processes}`` (``agent.sandbox_tools``: the tools
  ``sh``, ``python``, ``read``, ``write``, ``edit``, ``ls`` on the container's workspace), or
  ``{"type": "client", name, description, inputSchema, timeoutS}``: a tool the *client* runs (the
  turn suspends until it sends the result, at most ``timeoutS``, default 600 s), or
  ``{"type": "memory", scope: "container" | "image", tools: ["remember", "recall", "forget"]}``:
  what the agent keeps across sessions (``agent.tools.memory``, docs/memory.md).
* ``approval``: ``{"tools": ["name", ...] | "*", "timeoutS": 3600}``: which tools (by the name the
  model sees) wait for a person's approval before they run; the turn suspends meanwhile.
* ``maxSteps``: how many model calls one turn may make (default 20).

A header value may be a plain string (stored with the image: not for secrets) or ``{"secret":
"NAME"}``, a reference to the server's ``AVM_TOOL_SECRETS`` resolved at call time: the value is
never stored in the image, returned, or logged. A bad declaration is a ``bad_request`` naming the
field (``config.tools.0.url: ...``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

from agentvm.agent.tools.builtin import BUILTIN_TOOLS

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what Anthropic, OpenAI and Bedrock all accept
DEFAULT_MAX_STEPS = 20
MAX_TOOLS = 64
MAX_SERVERS = 16


class _Decl(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class SecretRef(_Decl):
    """A header value taken from the server's ``AVM_TOOL_SECRETS`` by name at call time."""

    secret: StrictStr = Field(min_length=1, max_length=128)


HeaderValue = StrictStr | SecretRef


def _check_url(v: str) -> str:
    if not re.match(r"^https?://[^\s/]+", v):
        raise ValueError("must be an http:// or https:// URL")
    return v


class HttpToolDecl(_Decl):
    """An HTTP endpoint the model may call. ``{name}`` placeholders in ``url`` are filled from the
    input (URL-quoted); the rest of the input is the JSON body (POST/PUT/PATCH) or the query (GET/DELETE)."""

    type: Literal["http"]
    name: StrictStr
    description: StrictStr = Field(max_length=4000)
    inputSchema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: StrictStr = Field(max_length=2000)
    headers: dict[str, HeaderValue] = Field(default_factory=dict)
    timeoutS: float | None = Field(default=None, gt=0, le=900)
    idempotent: StrictBool | None = None  # None: GET is idempotent, the rest are not

    _url = field_validator("url")(_check_url)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not TOOL_NAME.match(v):
            raise ValueError("must be 1-64 characters of A-Z a-z 0-9 _ -")
        return v

    @field_validator("inputSchema")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_input_schema(v)


class BuiltinToolDecl(_Decl):
    type: Literal["builtin"]
    name: StrictStr
    timeoutS: float | None = Field(default=None, gt=0, le=900)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in BUILTIN_TOOLS:
            raise ValueError(f"unknown built-in tool; known: {', '.join(sorted(BUILTIN_TOOLS))}")
        return v


class SandboxToolDecl(_Decl):
    """The sandbox tools (``agent.sandbox_tools``) on the container's workspace, with job limits."""

    type: Literal["sandbox"]
    wallS: float = Field(default=30.0, gt=0, le=600)
    cpuS: int = Field(default=20, ge=1, le=600)
    memoryMb: int = Field(default=512, ge=64, le=8192)
    outputBytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    processes: int = Field(default=128, ge=8, le=4096)


DEFAULT_CLIENT_TIMEOUT_S = 600.0
DEFAULT_APPROVAL_TIMEOUT_S = 3600.0
MAX_WAIT_S = 7 * 24 * 3600.0  # the longest a turn may stay suspended on one call


class ClientToolDecl(_Decl):
    """A tool the client executes: the call is sent to the client, which returns the result."""

    type: Literal["client"]
    name: StrictStr
    description: StrictStr = Field(max_length=4000)
    inputSchema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    timeoutS: float = Field(default=DEFAULT_CLIENT_TIMEOUT_S, gt=0, le=MAX_WAIT_S)

    _name = field_validator("name")(HttpToolDecl._name.__func__)  # type: ignore[attr-defined]
    _schema = field_validator("inputSchema")(HttpToolDecl._schema.__func__)  # type: ignore[attr-defined]


MemoryToolName = Literal["remember", "recall", "forget"]
MEMORY_TOOLS: tuple[MemoryToolName, ...] = ("remember", "recall", "forget")


class MemoryToolDecl(_Decl):
    """The memory tools (``agent/tools/memory.py``) on one scope: ``container`` (what the agent keeps
    about this end user, shared by the container's images) or ``image`` (what it keeps for all end
    users of images of this name); ``tools``: which of ``remember``, ``recall``, ``forget``."""

    type: Literal["memory"]
    scope: Literal["container", "image"] = "container"
    tools: list[MemoryToolName] = Field(
        default_factory=lambda: list(MEMORY_TOOLS), min_length=1, max_length=3
    )

    @field_validator("tools")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("each memory tool at most once")
        return v


class ApprovalConfig(_Decl):
    """Tools that need a person's approval: by the name the model sees, or ``"*"`` for all."""

    tools: list[StrictStr] | Literal["*"] = Field(max_length=MAX_TOOLS)
    timeoutS: float = Field(default=DEFAULT_APPROVAL_TIMEOUT_S, gt=0, le=MAX_WAIT_S)


ToolDecl = Annotated[
    HttpToolDecl | BuiltinToolDecl | SandboxToolDecl | ClientToolDecl | MemoryToolDecl,
    Field(discriminator="type"),
]


class McpStdioServer(_Decl):
    type: Literal["stdio"] | None = None
    command: StrictStr = Field(min_length=1, max_length=1000)
    args: list[StrictStr] = Field(default_factory=list)
    env: dict[str, StrictStr] = Field(default_factory=dict)
    timeoutS: float | None = Field(default=None, gt=0, le=900)


class McpRemoteServer(_Decl):
    type: Literal["http", "sse"]
    url: StrictStr = Field(max_length=2000)
    headers: dict[str, HeaderValue] = Field(default_factory=dict)
    timeoutS: float | None = Field(default=None, gt=0, le=900)
    # "oauth": reached with the tenant's OAuth tokens for this URL (docs/mcp.md, "OAuth")
    auth: Literal["oauth"] | None = None

    _url = field_validator("url")(_check_url)


def check_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema must be a valid JSON Schema of an object."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    if schema.get("type", "object") != "object":
        raise ValueError("must describe an object ({'type': 'object', ...})")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"is not a valid JSON Schema ({exc.message})") from None
    return schema


def parse_mcp_servers(
    raw: dict[str, Any], *, allow_stdio: bool
) -> dict[str, McpStdioServer | McpRemoteServer]:
    """Validate an image's ``mcpServers``; raises ``ValueError`` naming the server and field."""
    from pydantic import ValidationError

    if len(raw) > MAX_SERVERS:
        raise ValueError(f"at most {MAX_SERVERS} servers")
    out: dict[str, McpStdioServer | McpRemoteServer] = {}
    for name, cfg in raw.items():
        if not TOOL_NAME.match(name):
            raise ValueError(f"{name!r}: server names must be 1-64 characters of A-Z a-z 0-9 _ -")
        if not isinstance(cfg, dict):
            raise ValueError(f"{name}: must be an object")
        kind = cfg.get("type")
        if "auth" in cfg and kind not in ("http", "sse"):
            raise ValueError(
                f"{name}.auth: OAuth is for remote servers only ({{'type': 'http' or 'sse', 'url': ..., "
                "'auth': 'oauth'})"
            )
        try:
            if kind in (None, "stdio"):
                server: McpStdioServer | McpRemoteServer = McpStdioServer.model_validate(cfg)
            elif kind in ("http", "sse"):
                server = McpRemoteServer.model_validate(cfg)
            else:
                raise ValueError(f"{name}.type: must be 'stdio', 'http' or 'sse' (got {kind!r})")
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"{name}.{loc}: {err['msg']}") from None
        if isinstance(server, McpStdioServer) and not allow_stdio:
            raise ValueError(
                f"{name}.command: stdio MCP servers run only on the local host; "
                "on AWS use a Streamable HTTP server ({'type': 'http', 'url': ...})"
            )
        out[name] = server
    return out


__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "DEFAULT_CLIENT_TIMEOUT_S",
    "DEFAULT_MAX_STEPS",
    "MAX_WAIT_S",
    "ApprovalConfig",
    "ClientToolDecl",
    "MAX_TOOLS",
    "MEMORY_TOOLS",
    "MemoryToolDecl",
    "TOOL_NAME",
    "BuiltinToolDecl",
    "HttpToolDecl",
    "McpRemoteServer",
    "McpStdioServer",
    "SandboxToolDecl",
    "SecretRef",
    "ToolDecl",
    "check_input_schema",
    "parse_mcp_servers",
]
