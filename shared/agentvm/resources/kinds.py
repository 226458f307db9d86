"""What each kind of resource holds (its ``spec``), validated at publish, and what it refers to.

* ``prompt``: ``{template, variables}``: ``{{name}}`` placeholders, each declared with a type
  (``string``, ``number``, ``integer``, ``boolean``), whether it is required and a default.
  ``render`` fills it with checked arguments.
* ``tool``: ``{tool: <a tool declaration as images take them>}`` (``http``, ``builtin``,
  ``client``) or ``{mcpServer: {name, config}}`` (AgentX's McpServerConfig).
* ``sandbox``: a sandbox profile: the limits of ``{"type": "sandbox"}`` (``wallS``, ``cpuS``,
  ``memoryMb``, ``outputBytes``, ``processes``) and ``packages`` (recorded with the profile; not
  installed yet).
* ``agent``: ``{systemPrompt | prompt: {uri, arguments}, model, tools: [uri], sandbox: uri,
  knowledge: [uri], maxSteps, approval}``: what an image is built from.
* ``knowledge``: ``{documents: [{id, title, text}]}`` (inline, small), or ``{draft: true}``: the
  files uploaded to the resource since (``/v1/knowledge``, ``resources/uploads.py``), published as
  ``{uploads: [{id, title, chunks, bytes}]}`` with their chunks in the knowledge index. Searchable
  by an agent.
* ``file``: ``{type, content}``: a named blob as ResourceX stores them (the ``/v1/registry``
  compatibility layer): ``text`` or ``skill`` (a string), ``json`` (any JSON value) or ``binary``
  (base64). A file keeps the type of its first version.

A bad spec is an ``invalid_resource`` error naming the field (``spec.variables.city.type: ...``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator

from agentvm.agent.tools.declarations import (
    ApprovalConfig,
    BuiltinToolDecl,
    ClientToolDecl,
    HttpToolDecl,
    parse_mcp_servers,
)
from agentvm.errors import InvalidResource
from agentvm.resources.uri import ResourceRef, parse

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
MAX_TEMPLATE = 100_000
MAX_DOCUMENTS = 500
MAX_KNOWLEDGE_BYTES = 256 * 1024  # a version is one DynamoDB item on AWS (at most 400 KB)
MAX_FILE_BYTES = 256 * 1024  # the content as stored (JSON-encoded), for the same reason
FILE_TYPES = ("text", "json", "binary", "skill")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class Variable(_Spec):
    type: Literal["string", "number", "integer", "boolean"] = "string"
    required: StrictBool = True
    default: StrictStr | int | float | bool | None = None
    description: StrictStr | None = Field(default=None, max_length=1000)


class PromptSpec(_Spec):
    template: StrictStr = Field(min_length=1, max_length=MAX_TEMPLATE)
    variables: dict[str, Variable] = Field(default_factory=dict)

    @field_validator("variables")
    @classmethod
    def _names(cls, v: dict[str, Variable]) -> dict[str, Variable]:
        for name in v:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                raise ValueError(f"{name!r}: variable names are letters, digits and _")
        return v


class McpServerRef(_Spec):
    name: StrictStr = Field(min_length=1, max_length=64)
    config: dict[str, Any]


class ToolSpec(_Spec):
    tool: HttpToolDecl | BuiltinToolDecl | ClientToolDecl | None = Field(default=None, discriminator="type")
    mcpServer: McpServerRef | None = None


class SandboxSpec(_Spec):
    wallS: float = Field(default=30.0, gt=0, le=600)
    cpuS: int = Field(default=20, ge=1, le=600)
    memoryMb: int = Field(default=512, ge=64, le=8192)
    outputBytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    processes: int = Field(default=128, ge=8, le=4096)
    packages: list[StrictStr] = Field(default_factory=list, max_length=100)


class PromptUse(_Spec):
    uri: StrictStr
    arguments: dict[str, Any] = Field(default_factory=dict)


class AgentSpec(_Spec):
    systemPrompt: StrictStr | None = Field(default=None, max_length=MAX_TEMPLATE)
    prompt: PromptUse | None = None
    model: StrictStr | None = Field(default=None, max_length=200)
    tools: list[StrictStr] = Field(default_factory=list, max_length=64)
    sandbox: StrictStr | None = None
    knowledge: list[StrictStr] = Field(default_factory=list, max_length=16)
    maxSteps: int | None = Field(default=None, ge=1, le=100)
    approval: ApprovalConfig | None = None


class Document(_Spec):
    id: StrictStr | None = Field(default=None, max_length=200)
    title: StrictStr | None = Field(default=None, max_length=1000)
    text: StrictStr = Field(min_length=1)


class KnowledgeSpec(_Spec):
    documents: list[Document] | None = Field(default=None, min_length=1, max_length=MAX_DOCUMENTS)
    draft: Literal[True] | None = None  # publish the documents uploaded to the resource's draft


class FileSpec(_Spec):
    type: Literal["text", "json", "binary", "skill"]
    content: Any


SPECS: dict[str, type[_Spec]] = {
    "prompt": PromptSpec,
    "tool": ToolSpec,
    "sandbox": SandboxSpec,
    "agent": AgentSpec,
    "knowledge": KnowledgeSpec,
    "file": FileSpec,
}


def validate_spec(kind: str, raw: Any) -> dict[str, Any]:
    """The spec as stored (validated, unset fields dropped); raises ``InvalidResource`` naming the field."""
    if not isinstance(raw, dict):
        raise InvalidResource("spec: must be an object")
    try:
        spec = SPECS[kind].model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidResource(f"spec.{where}: {err['msg']}") from None
    except ValueError as exc:  # a tool declaration's own checks
        raise InvalidResource(f"spec: {exc}") from None
    _check(kind, spec)
    if isinstance(spec, FileSpec):  # the content as given: JSON nulls inside it are data
        return {"type": spec.type, "content": spec.content}
    return spec.model_dump(exclude_none=True)


def _check(kind: str, spec: _Spec) -> None:
    if isinstance(spec, PromptSpec):
        used = set(PLACEHOLDER.findall(spec.template))
        undeclared = sorted(used - set(spec.variables))
        if undeclared:
            raise InvalidResource(f"spec.template: {{{{{undeclared[0]}}}}} is not declared in spec.variables")
    elif isinstance(spec, ToolSpec):
        if (spec.tool is None) == (spec.mcpServer is None):
            raise InvalidResource("spec: give exactly one of 'tool' and 'mcpServer'")
        if spec.mcpServer is not None:
            try:
                parse_mcp_servers({spec.mcpServer.name: spec.mcpServer.config}, allow_stdio=True)
            except ValueError as exc:
                raise InvalidResource(f"spec.mcpServer.{exc}") from None
    elif isinstance(spec, AgentSpec):
        if spec.systemPrompt is not None and spec.prompt is not None:
            raise InvalidResource("spec: give 'systemPrompt' or 'prompt', not both")
        dependencies("agent", spec.model_dump(exclude_none=True))  # every reference parses
    elif isinstance(spec, FileSpec):
        _check_file(spec)
    elif isinstance(spec, KnowledgeSpec):
        if (spec.documents is None) == (spec.draft is None):
            raise InvalidResource("spec: give exactly one of 'documents' and 'draft'")
        size = sum(len(d.text.encode()) for d in spec.documents or [])
        if size > MAX_KNOWLEDGE_BYTES:
            raise InvalidResource(f"spec.documents: {size} bytes of text (at most {MAX_KNOWLEDGE_BYTES})")


def _check_file(spec: FileSpec) -> None:
    if spec.type in ("text", "skill", "binary") and not isinstance(spec.content, str):
        raise InvalidResource(f"spec.content: a {spec.type} file holds a string")
    if spec.type == "binary":
        try:
            base64.b64decode(spec.content, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidResource("spec.content: a binary file holds base64") from None
    size = len(json.dumps(spec.content, ensure_ascii=False).encode())
    if size > MAX_FILE_BYTES:
        raise InvalidResource(f"spec.content: {size} bytes (at most {MAX_FILE_BYTES})")


def dependencies(kind: str, spec: dict[str, Any]) -> list[ResourceRef]:
    """The resources a spec refers to, as written (a version, ``latest`` or a tag)."""
    if kind != "agent":
        return []
    out: list[ResourceRef] = []
    prompt = spec.get("prompt")
    if prompt:
        out.append(parse(prompt["uri"], kind="prompt"))
    out += [parse(uri, kind="tool") for uri in spec.get("tools", [])]
    if spec.get("sandbox"):
        out.append(parse(spec["sandbox"], kind="sandbox"))
    out += [parse(uri, kind="knowledge") for uri in spec.get("knowledge", [])]
    return out


def render(spec: dict[str, Any], arguments: dict[str, Any]) -> str:
    """A prompt's template filled with checked ``arguments`` (missing, unknown or mistyped:
    ``InvalidResource`` naming the argument)."""
    variables = {name: Variable.model_validate(v) for name, v in spec.get("variables", {}).items()}
    unknown = sorted(set(arguments) - set(variables))
    if unknown:
        raise InvalidResource(f"arguments.{unknown[0]}: not a variable of this prompt")
    values: dict[str, str] = {}
    for name, var in variables.items():
        if name in arguments:
            value = arguments[name]
        elif var.default is not None:
            value = var.default
        elif var.required:
            raise InvalidResource(f"arguments.{name}: required")
        else:
            value = ""
        if value != "" and not _typed(var.type, value):
            raise InvalidResource(f"arguments.{name}: must be a {var.type}")
        values[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], spec["template"])


def _typed(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


__all__ = ["FILE_TYPES", "SPECS", "dependencies", "render", "validate_spec"]
