"""Resource URIs: ``resource://<kinds>/<name>[@<version>|@latest|@<tag>]``, where ``<kinds>`` is
``prompts``, ``tools``, ``sandboxes``, ``agents`` or ``knowledge``.

``name`` is one or more ``/``-separated segments of ``A-Z a-z 0-9 . _ -`` (so ResourceX's
``domain/path/name`` maps onto it), at most 200 characters. A version is an integer (``3``) or a
semantic version (``1.2.0``, ``2.0.0-rc.1``); a tag is a movable name for a version (``stable``);
no selector means ``latest``: the version published last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentvm.errors import InvalidResource, InvalidUri
from agentvm.records import RESOURCE_PLURALS

KINDS = tuple(RESOURCE_PLURALS)
KIND_OF = {plural: kind for kind, plural in RESOURCE_PLURALS.items()}
SCHEME = "resource://"
_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]*"
NAME = re.compile(rf"^{_SEGMENT}(/{_SEGMENT})*$")
INTEGER = re.compile(r"^[0-9]{1,9}$")
SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)
TAG = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")
MAX_NAME = 200
LATEST = "latest"


@dataclass(frozen=True, slots=True)
class ResourceRef:
    kind: str
    name: str
    selector: str = LATEST  # a version, "latest" or a tag

    @property
    def pinned(self) -> bool:
        return is_version(self.selector)

    def at(self, selector: str) -> ResourceRef:
        return ResourceRef(self.kind, self.name, selector)

    def __str__(self) -> str:
        return f"{SCHEME}{RESOURCE_PLURALS[self.kind]}/{self.name}@{self.selector}"


def is_version(value: str) -> bool:
    return bool(INTEGER.match(value) or SEMVER.match(value))


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidResource(f"unknown kind {kind!r} (kinds: {', '.join(KINDS)})")
    return kind


def check_name(name: str) -> str:
    if len(name) > MAX_NAME or not NAME.match(name):
        raise InvalidResource(
            f"name {name!r}: 1-{MAX_NAME} characters, '/'-separated segments of A-Z a-z 0-9 . _ - "
            "(each starting with a letter or digit)"
        )
    return name


def check_version(version: str) -> str:
    if not is_version(version):
        raise InvalidResource(f"version {version!r}: an integer (3) or a semantic version (1.2.0)")
    return version


def check_tag(tag: str) -> str:
    if tag == LATEST or not TAG.match(tag) or is_version(tag):
        raise InvalidResource(
            f"tag {tag!r}: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter, not 'latest'"
        )
    return tag


def parse(uri: str, *, kind: str | None = None) -> ResourceRef:
    """A URI as a reference; raises ``InvalidUri`` saying what is wrong. ``kind``: the kind it must be."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise InvalidUri(f"{uri!r} is not a resource URI (resource://<kind>s/<name>[@<version|tag>])")
    rest = uri[len(SCHEME) :]
    plural, _, target = rest.partition("/")
    found = KIND_OF.get(plural)
    if found is None or not target:
        kinds = ", ".join(RESOURCE_PLURALS.values())
        raise InvalidUri(f"{uri!r}: expected resource://<kinds>/<name>, one of {kinds}")
    if kind is not None and found != kind:
        raise InvalidUri(f"{uri!r}: expected a {kind} (resource://{RESOURCE_PLURALS[kind]}/...)")
    name, sep, selector = target.partition("@")
    if sep and not selector:
        raise InvalidUri(f"{uri!r}: nothing after '@' (a version, 'latest' or a tag)")
    try:
        check_name(name)
        if sep and selector != LATEST and not is_version(selector):
            check_tag(selector)
    except InvalidResource as exc:
        raise InvalidUri(f"{uri!r}: {exc.message}") from None
    return ResourceRef(found, name, selector or LATEST)


__all__ = [
    "KINDS",
    "LATEST",
    "ResourceRef",
    "check_kind",
    "check_name",
    "check_tag",
    "check_version",
    "is_version",
    "parse",
]
