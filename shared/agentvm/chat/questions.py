"""An MCP server's question in ``avm chat`` (``tool_elicitation``): one prompt line per field of
its form, each typed value read as the field's JSON Schema type says, or a y/N for a URL to open.

Per field: its title (or name), its type or choices, ``[default]``, ``*`` when required. An empty
line keeps the default, or leaves an optional field out (a required one is asked again); ``/decline``
or ``/cancel`` at any field answers that instead. A boolean reads y/yes/true/1 and n/no/false/0, a
multi-select (an array) comma-separated values. A value the type cannot read is asked again; content
the server's schema still refuses is said, and the whole form is asked again (at most 3 times, then
``cancel``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.client import ToolElicitationData

Action = Literal["accept", "decline", "cancel"]

_YES = ("y", "yes", "true", "1")
_NO = ("n", "no", "false", "0")


class Unreadable(ValueError):
    """The line is not a value of the field's type."""


async def ask_form(
    data: ToolElicitationData, read: Callable[[str], Awaitable[str | None]], note: Callable[[str], None]
) -> tuple[Action, dict[str, Any] | None] | None:
    """The user's answer: (action, content); None when input ended."""
    if data.mode == "url":
        line = await read(f"[question] open {data.url} ? [y/N] ")
        if line is None:
            return None
        return ("accept", None) if line.strip().lower() in _YES else ("decline", None)
    schema = data.requestedSchema or {}
    fields: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, field in fields.items():
        while True:
            line = await read(f"  {field_prompt(name, field, name in required)}: ")
            if line is None:
                return None
            text = line.strip()
            if text == "/decline":
                return "decline", None
            if text == "/cancel":
                return "cancel", None
            if not text:
                if "default" in field:
                    content[name] = field["default"]
                elif name in required:
                    note("[question] this field is required (/decline or /cancel to refuse)")
                    continue
                break
            try:
                content[name] = value_of(text, field)
            except Unreadable as exc:
                note(f"[question] {exc}")
                continue
            break
    return "accept", content


def field_prompt(name: str, field: dict[str, Any], required: bool) -> str:
    label = str(field.get("title") or name)
    kind = str(field.get("type") or "string")
    choices = _choices(field) or _choices(field.get("items") or {})
    hint = "|".join(choices) if choices else kind
    if field.get("format"):
        hint += f", {field['format']}"
    out = f"{label} ({hint})"
    if "default" in field:
        out += (
            f" [{field['default'] if not isinstance(field['default'], list) else ','.join(field['default'])}]"
        )
    return out + (" *" if required else "")


def value_of(text: str, field: dict[str, Any]) -> Any:
    """``text`` as a value of ``field``'s type (the server's schema checks the rest)."""
    kind = field.get("type")
    if kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise Unreadable("answer y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise Unreadable("a whole number, please") from None
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            raise Unreadable("a number, please") from None
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    if kind == "object":
        try:
            return json.loads(text)
        except ValueError:
            raise Unreadable("a JSON object, please") from None
    return text


def _choices(field: dict[str, Any]) -> list[str]:
    if isinstance(field.get("enum"), list):
        return [str(v) for v in field["enum"]]
    for key in ("oneOf", "anyOf"):
        if isinstance(field.get(key), list):
            return [str(c.get("const")) for c in field[key] if isinstance(c, dict) and "const" in c]
    return []


__all__ = ["Unreadable", "ask_form", "field_prompt", "value_of"]
