"""ResourceX locators, mapped onto the resource centre (the ``/v1/registry`` compatibility layer).

Two grammars are accepted, told apart by their shape:

* **RXL** (ResourceX 1.x, what Deepractice's AgentVM serves): ``[domain/[path/]]name[.type][@version]``.
  The first segment is a domain when it holds a ``.`` or is ``localhost``; ``.type`` is the text
  after the last dot of the last segment when it names a type this registry knows (otherwise the
  dot stays in the name).
* **RXI** (ResourceX 2.9 on, Docker style): ``[registry/][path/]name[:tag][@sha256:<hex>]``. A
  locator is RXI when its last segment holds ``:`` or it ends in a digest. The registry segment (a
  ``.``, a ``:port`` or ``localhost``) is kept like a domain, without its port. RXI carries no
  type: it is looked up, or given with the upload.

**Mapping.** Registry names live in the caller's tenant (ResourceX is not tenant-aware; here the
tenant is the owner and the domain is only part of the name). ``localhost`` means "this registry"
and is dropped: ``localhost/team/greeting.prompt@1.0.0`` is ``resource://prompts/team/greeting@1.0.0``
and ``deepractice.ai/team/greeting.prompt`` is ``resource://prompts/deepractice.ai/team/greeting``.
The type picks the kind: ``prompt`` (aliases ``template``, ``system-prompt``) is a prompt;
``text``, ``json``, ``binary`` and ``skill`` (and ResourceX's aliases) are files; ``tool``,
``sandbox``, ``agent`` and ``knowledge`` are ours, their content a spec. A version that is an
integer or semver is a version; ``latest`` or nothing is the latest; anything else is a tag.

Security checks as ResourceX makes them: at most 256 characters, no absolute path, no ``..``, none
of ``; | & $ ` \\ \\n \\0 \\r``; then every segment must be a resource-name segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentvm.errors import InvalidLocator, InvalidResource
from agentvm.resources.uri import LATEST, ResourceRef, check_name, check_tag, is_version

MAX_LOCATOR = 256
_FORBIDDEN = set(";|&$`\\\n\0\r")
_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
LOCAL = "localhost"


@dataclass(frozen=True, slots=True)
class RegistryType:
    name: str
    kind: str  # the resource kind it is stored as
    aliases: tuple[str, ...]
    description: str


TYPES = (
    RegistryType(
        "prompt", "prompt", ("template", "system-prompt"), "a prompt template; resolves to its text"
    ),
    RegistryType("text", "file", ("txt", "plaintext"), "text; resolves to a string"),
    RegistryType("json", "file", ("config", "manifest"), "any JSON value; resolves to it"),
    RegistryType("binary", "file", ("bin", "blob", "raw"), "bytes, uploaded and resolved as base64"),
    RegistryType("skill", "file", (), "an Agent Skill (SKILL.md text); resolves to a string"),
    RegistryType("tool", "tool", (), "an AgentVM tool definition (a JSON spec)"),
    RegistryType("sandbox", "sandbox", (), "an AgentVM sandbox profile (a JSON spec)"),
    RegistryType("agent", "agent", (), "an AgentVM agent definition (a JSON spec)"),
    RegistryType("knowledge", "knowledge", (), "AgentVM knowledge documents (a JSON spec)"),
)
_BY_NAME = {alias: t for t in TYPES for alias in (t.name, *t.aliases)}


def registry_type(name: str) -> RegistryType:
    found = _BY_NAME.get(name.lower())
    if found is None:
        raise InvalidLocator(f"unknown type {name!r} (types: {', '.join(t.name for t in TYPES)})")
    return found


def type_of(kind: str, file_type: str | None = None) -> str:
    """The registry type a resource shows: a file's own type, else its kind."""
    return file_type if kind == "file" and file_type else kind


@dataclass(frozen=True, slots=True)
class Locator:
    domain: str | None  # None: this registry (localhost)
    path: str | None  # the middle segments, "/"-joined
    name: str
    type: str | None  # a canonical type name, or None when the locator has none (RXI)
    selector: str = LATEST  # a version, "latest" or a tag
    digest: str | None = None  # the hex of sha256:<hex> (RXI)
    raw: str = ""  # as written (for messages)

    @property
    def resource_name(self) -> str:
        """The name in the resource centre: ``[domain/][path/]name``."""
        return "/".join(p for p in (self.domain, self.path, self.name) if p)

    def ref(self, kind: str) -> ResourceRef:
        return ResourceRef(kind, self.resource_name, self.selector)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds it may be stored as: its type's, or every kind a type maps to."""
        if self.type is not None:
            return (registry_type(self.type).kind,)
        return tuple(dict.fromkeys(t.kind for t in TYPES))


def parse_locator(raw: object) -> Locator:
    """A locator in either grammar; ``InvalidLocator`` says what is wrong."""
    if not isinstance(raw, str) or not raw:
        raise InvalidLocator("locator: a non-empty string")
    if len(raw) > MAX_LOCATOR:
        raise InvalidLocator(f"locator: at most {MAX_LOCATOR} characters")
    bad = sorted(_FORBIDDEN & set(raw))
    if bad:
        raise InvalidLocator(f"locator {raw!r}: {bad[0]!r} is not allowed")
    if raw.startswith("/") or ".." in raw:
        raise InvalidLocator(f"locator {raw!r}: no absolute paths and no '..'")
    rest, digest = raw, None
    if "@sha256:" in rest:
        rest, _, hexdigest = rest.rpartition("@")
        found = _DIGEST.match(hexdigest)
        if found is None:
            raise InvalidLocator(f"locator {raw!r}: a digest is sha256:<64 lowercase hex digits>")
        digest = found.group(1)
    rest, at, version = rest.partition("@")
    if at and (not version or digest is not None):
        raise InvalidLocator(f"locator {raw!r}: one '@' (a version, or a sha256 digest)")
    segments = rest.split("/")
    if any(not s for s in segments):
        raise InvalidLocator(f"locator {raw!r}: an empty segment")
    last = segments[-1]
    rxi = digest is not None or ":" in last
    domain = None
    if len(segments) > 1 and _is_domain(segments[0], rxi=rxi):
        domain = segments[0].partition(":")[0] if rxi else segments[0]
        segments = segments[1:]
    if any(":" in s for s in segments[:-1]):
        raise InvalidLocator(f"locator {raw!r}: ':' only before a tag, or in a registry's port")
    type_name = None
    if rxi:
        if at:
            raise InvalidLocator(f"locator {raw!r}: a name:tag locator takes a digest, not @<version>")
        last, _, version = last.partition(":")
        if ":" in version or (not version and ":" in segments[-1]):
            raise InvalidLocator(f"locator {raw!r}: nothing (or another ':') after ':'")
    else:
        base, dot, suffix = last.rpartition(".")
        if dot and base and suffix.lower() in _BY_NAME:
            last, type_name = base, _BY_NAME[suffix.lower()].name
    locator = Locator(
        domain=None if domain == LOCAL else domain,
        path="/".join(segments[:-1]) or None,
        name=last,
        type=type_name,
        selector=version or LATEST,
        digest=digest,
        raw=raw,
    )
    try:
        check_name(locator.resource_name)
        if locator.selector != LATEST and not is_version(locator.selector):
            check_tag(locator.selector)
    except InvalidResource as exc:
        raise InvalidLocator(f"locator {raw!r}: {exc.message}") from None
    return locator


def _is_domain(segment: str, *, rxi: bool) -> bool:
    host = segment.partition(":")[0] if rxi else segment
    return "." in host or host == LOCAL or (rxi and ":" in segment)


def format_locator(name: str, type_name: str, version: str) -> str:
    """The RXL locator of a resource version: ``domain/[path/]name.type@version`` (``localhost``
    when its name has no domain)."""
    first, _, rest = name.partition("/")
    if not rest or not _is_domain(first, rxi=False):
        name = f"{LOCAL}/{name}"
    return f"{name}.{type_name}@{version}"


def manifest_parts(name: str) -> dict[str, str]:
    """``domain``, ``path`` (when there is one) and ``name`` of a resource name, as RXL splits them."""
    segments = name.split("/")
    domain = LOCAL
    if len(segments) > 1 and _is_domain(segments[0], rxi=False):
        domain, segments = segments[0], segments[1:]
    out = {"domain": domain, "name": segments[-1]}
    if len(segments) > 1:
        out["path"] = "/".join(segments[:-1])
    return out


__all__ = [
    "LOCAL",
    "TYPES",
    "Locator",
    "RegistryType",
    "format_locator",
    "manifest_parts",
    "parse_locator",
    "registry_type",
    "type_of",
]
