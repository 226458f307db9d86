"""The docs and the code name the same things: every environment variable, CLI command, HTTP route
and WebSocket request type the docs mention exists, and every user-facing one is documented.

"The docs" are README.md, SECURITY.md and docs/*.md. A name that is deliberately internal is
listed here with the reason, so leaving one out is a decision someone wrote down.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pydantic import AliasChoices

from agentvm.api.app import create_app
from agentvm.cli.main import _parser
from agentvm.config import Settings
from agentvm.gateway.v1.frames import REQUEST_MODELS

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted([ROOT / "README.md", ROOT / "SECURITY.md", *(ROOT / "docs").glob("*.md")])
TEXT = "\n".join(path.read_text() for path in DOCS)
# Read by the code but set by the host itself, never by an operator.
INTERNAL_SETTINGS = {
    "AVM_WORKER_ID": "each worker process of `avm serve --workers N` gets its own",
    "AVM_REUSE_PORT": "set for each worker of `avm serve --workers N` (SO_REUSEPORT)",
}


def _setting_names() -> dict[str, set[str]]:
    """Each setting's field name -> the environment names it is read from."""
    names: dict[str, set[str]] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names[field] = {choice for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names[field] = {alias}
        else:
            names[field] = {f"AVM_{field.upper()}"}
    return names


def _code_text() -> str:
    parts = [p.read_text() for p in (ROOT / "shared" / "agentvm").rglob("*.py")]
    parts += [p.read_text() for p in (ROOT / "functions").rglob("*.py")]
    parts += [p.read_text() for p in (ROOT / "tests").rglob("*.py")]
    parts += [(ROOT / "template.yaml").read_text(), (ROOT / "dev").read_text()]
    return "\n".join(parts)


def test_every_documented_environment_variable_exists() -> None:
    known = {name for names in _setting_names().values() for name in names}
    known |= set(re.findall(r"\bAVM_[A-Z0-9_]+\b", _code_text()))
    documented = set(re.findall(r"\bAVM_[A-Z0-9_]+\b", TEXT))
    assert sorted(documented - known) == []


def test_every_setting_is_documented() -> None:
    undocumented = [
        sorted(names)[0]
        for names in _setting_names().values()
        if not any(re.search(rf"\b{name}\b", TEXT) for name in names) and not names & set(INTERNAL_SETTINGS)
    ]
    assert undocumented == []


def _commands(parser: argparse.ArgumentParser, prefix: str = "avm") -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add(f"{prefix} {name}")
                found |= _commands(sub, f"{prefix} {name}")
    return found


def _documented_commands() -> set[str]:
    """``avm a b`` as written, and each of ``avm a b|c|d`` (the README's command list)."""
    found: set[str] = set()
    for head, tail in re.findall(r"(?<![\w-])avm ([a-z][a-z-]*)(?: ([a-z][a-z|-]*))?", TEXT):
        found.add(f"avm {head}")
        found |= {f"avm {head} {word}" for word in (tail or "").split("|") if word}
    return found


def test_every_cli_command_is_documented_and_every_documented_one_exists() -> None:
    commands = _commands(_parser())
    assert sorted(commands - _documented_commands()) == []
    top = {c.split()[1] for c in commands}
    mentioned = set(re.findall(r"(?:`|^\s*\$?\s*)avm ([a-z][a-z-]+)", TEXT, re.MULTILINE))
    assert sorted(mentioned - top) == []


def _shape(path: str) -> str:
    """A route with its parameters blanked: /v1/images/{imageId} -> /v1/images/{}, and the docs'
    /v1/resources/{kind}s/{name}[@{version}] -> /v1/resources/{}/{}."""
    path = re.sub(r"\[.*?\]$|@.*$", "", path)
    return re.sub(r"\{[^}/]*\}[a-z]*", "{}", path.rstrip("/") or "/")


def test_every_http_route_is_documented_and_every_documented_one_exists(harness) -> None:
    app = create_app(harness.rt)
    # the MCP OAuth callback is a browser's landing page, with no key: not an API operation
    routes = {_shape(path) for path in app.openapi()["paths"]} | {"/mcp", "/ws", "/v1/mcp/oauth/callback"}
    documented = {
        _shape(match.split("?")[0])
        for match in re.findall(r"(?<![\w/.:-])(/v1/[A-Za-z0-9_{}/.-]*[A-Za-z0-9_}])", TEXT)
    }
    # a family named by its prefix (`/v1/sessions`), or an example (`/v1/tenants/acme`), is fine too
    patterns = [re.compile(re.escape(r).replace(re.escape("{}"), "[^/]+")) for r in routes]
    unknown = [
        d
        for d in documented
        if not any(p.fullmatch(d) for p in patterns) and not any(r.startswith(d + "/") for r in routes)
    ]
    assert sorted(unknown) == []
    v1 = {r for r in routes if r.startswith("/v1/")}
    assert sorted(v1 - documented) == []


# Names the docs use that end in _request but are not request types.
NOT_REQUEST_TYPES = {
    "bad_request": "an error code",
    "unknown_request": "an error code",
    "turn_request": "an event: the user's message of a turn (category turn)",
}


def test_every_websocket_request_type_is_documented_and_every_documented_one_exists() -> None:
    documented = set(re.findall(r"\b([a-z]+(?:_[a-z]+)*_request)\b", TEXT)) - set(NOT_REQUEST_TYPES)
    assert sorted(set(REQUEST_MODELS) - documented) == []
    assert sorted(documented - set(REQUEST_MODELS)) == []
