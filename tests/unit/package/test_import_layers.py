"""The package's floors only point down, and no two rooms import each other (ARCHITECTURE.md, "Layout").

Every ``import`` in ``shared/agentvm`` counts: at module top, inside functions (deferred) and under
``if TYPE_CHECKING:``. A module may import its own floor's rooms or lower floors; a room (a top-level
package, or one ``adapters/<kind>``) may not reach another room that reaches back, deferred imports
included; and no two files import each other except through ``TYPE_CHECKING``-only imports.

Read from the source with ``ast``, so the rules hold for code paths no test executes. A new room
must be given a floor here; a deliberate exception goes into ``ALLOWED`` with its reason.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "shared" / "agentvm"

# Lowest first. A room is a top-level module or package of agentvm.
FLOORS: list[tuple[str, set[str]]] = [
    ("vocabulary", {"errors", "records", "messages", "events", "llm", "config", "logs", "addresses", "lazy"}),
    ("ports", {"ports", "runtime"}),
    ("domains", {"agent", "streaming", "security", "observability", "configcentre", "resources"}),
    ("services", {"images", "turns", "sessions"}),
    ("protocols and adapters", {"gateway", "api", "adapters", "client", "playground", "fakellm"}),
    ("hosts", {"hosts"}),
    ("commands", {"cli", "chat"}),
]

# Rooms of one floor that must not import each other at all (the protocols reach the use cases
# through images/, turns/ and sessions/, never through one another; adapters serve the core).
APART: set[tuple[str, str]] = {
    ("api", "gateway"),
    ("gateway", "api"),
    ("adapters", "gateway"),
    ("adapters", "api"),
    ("adapters", "client"),
    ("client", "gateway"),
    ("client", "api"),
    ("client", "adapters"),
    ("cli", "adapters"),  # the CLI builds adapters through hosts/, as the servers do
    ("chat", "adapters"),
}

# The adapters of each host's storage stay apart: the cluster host's PostgreSQL stores
# (adapters/postgres) share nothing with the SQLite ones (adapters/local) or DynamoDB's
# (adapters/aws) but the ports and vocabulary they all implement.
STORAGE_ADAPTERS = {"adapters.aws", "adapters.local", "adapters.postgres"}

# (importer, imported) pairs allowed against the rules above, each with its reason. Empty on purpose:
# the cold-start deferrals that exist (hosts building adapters on first use, cli loading a command's
# module when it runs) all point down and need no entry.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    kind: str  # "top", "deferred" or "typing"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["agentvm", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agentvm"):
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith("agentvm")]
            else:
                continue
            kind = "typing" if id(node) in typing_only else "top" if id(node) in top else "deferred"
            for target in targets:
                imported = _resolve(target)
                if imported and imported != module:
                    found.append(Import(module, imported, node.lineno, kind))
    return found


IMPORTS = _imports()


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "agentvm"
    if parts[1] == "adapters" and len(parts) > 2:
        return f"adapters.{parts[2]}"
    return parts[1]


def floor(module: str) -> int:
    name = room(module).split(".")[0]
    if name == "agentvm":
        return 0
    for number, (_, rooms) in enumerate(FLOORS):
        if name in rooms:
            return number
    raise AssertionError(f"{module}: its room {name!r} has no floor in FLOORS (add it)")


def _shown(imp: Import) -> str:
    return f"{imp.importer}:{imp.line} ({imp.kind}) -> {imp.imported}"


def _allowed(imp: Import) -> bool:
    return (imp.importer, imp.imported) in ALLOWED


def test_every_module_has_a_floor() -> None:
    for module in MODULES:
        floor(module)


def test_floors_only_point_down() -> None:
    upward = [
        f"{_shown(i)}: {FLOORS[floor(i.importer)][0]} may not import {FLOORS[floor(i.imported)][0]}"
        for i in IMPORTS
        if floor(i.imported) > floor(i.importer) and not _allowed(i)
    ]
    assert not upward, "imports running up a floor:\n" + "\n".join(upward)


def test_rooms_kept_apart_do_not_import_each_other() -> None:
    sideways = [
        _shown(i)
        for i in IMPORTS
        if (room(i.importer).split(".")[0], room(i.imported).split(".")[0]) in APART and not _allowed(i)
    ]
    assert not sideways, "imports between rooms kept apart:\n" + "\n".join(sideways)


def test_each_hosts_storage_adapters_stand_alone() -> None:
    crossing = [
        _shown(i)
        for i in IMPORTS
        if room(i.importer) in STORAGE_ADAPTERS
        and room(i.imported) in STORAGE_ADAPTERS
        and room(i.importer) != room(i.imported)
        and not _allowed(i)
    ]
    assert not crossing, "storage adapters of one host importing another's:\n" + "\n".join(crossing)
    assert {room(m) for m in MODULES} >= STORAGE_ADAPTERS  # each folder exists and is read


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph(key: object) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for i in IMPORTS:
        if i.kind == "typing" or _allowed(i):
            continue
        a, b = key(i.importer), key(i.imported)  # type: ignore[operator]
        if a != b:
            edges[a].add(b)
    return edges


def test_no_two_rooms_import_each_other_deferred_imports_included() -> None:
    knots = _cycles(_graph(room))
    assert not knots, "rooms importing each other (directly or around a circle):\n" + "\n".join(
        " <-> ".join(k) for k in knots
    )


def test_no_file_circles_except_typing_only_ones() -> None:
    circles = _cycles(_graph(lambda module: module))
    assert not circles, "files importing each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_rules_see_every_kind_of_import() -> None:
    """A guard on the reader: the three kinds exist in the package, so none is silently skipped."""
    kinds = {i.kind for i in IMPORTS}
    assert kinds == {"top", "deferred", "typing"}
    assert len(MODULES) > 150


def test_a_deliberate_violation_is_caught() -> None:
    """The checks above, fed an upward deferred import and a circle they must refuse."""
    upward = Import("agentvm.records", "agentvm.turns.worker", 1, "deferred")
    assert floor(upward.imported) > floor(upward.importer)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert (room("agentvm.api.images"), room("agentvm.gateway.v1.commands")) in APART


def test_the_sdk_needs_only_the_vocabulary() -> None:
    """``pip install agentvm-runtime[client]`` users import ``agentvm.client``: it may lean on the
    wire vocabulary (messages, events, errors...) and nothing of the server."""
    beyond = [
        _shown(i)
        for i in IMPORTS
        if room(i.importer) == "client" and room(i.imported) != "client" and floor(i.imported) > 0
    ]
    assert not beyond, "the SDK imports server code:\n" + "\n".join(beyond)
