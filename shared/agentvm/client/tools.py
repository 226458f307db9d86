"""Client-side tools: Python functions the client runs when a turn calls them.

An image declares a ``{"type": "client", ...}`` tool (``ClientTool.declaration()`` writes it);
when the model calls it, the turn suspends and the server sends ``client_tool_requested``. A
client with a tool of that name registered (``client.add_tool(fn)``) runs it at once with the
call's input as keyword arguments and sends its return value with ``tool_result_request``: a
string as it is, anything else as JSON. An exception is sent as an error result
(``"<Type>: <message>"``), which the model reads; the turn goes on either way.

Each call is answered once per client (a resume may deliver the request twice). Sync functions
run in a worker thread, so a slow one never stalls the connection.

A tool's input schema is its function's signature: each parameter's type hint and default, as
pydantic writes JSON Schema for them (``def add(a: int, b: int = 2)`` declares two integers, ``a``
required). Parameters without a hint accept any JSON value; ``input_schema=`` replaces it all.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class ClientTool:
    name: str
    function: Callable[..., Any]
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    timeout_s: float | None = None  # how long the server waits for the result (its default: 600 s)

    def declaration(self) -> dict[str, Any]:
        """The image's tool declaration (``create_image(tools=[...])``)."""
        out: dict[str, Any] = {
            "type": "client",
            "name": self.name,
            "description": self.description or self.name,
            "inputSchema": self.input_schema,
        }
        if self.timeout_s is not None:
            out["timeoutS"] = self.timeout_s
        return out

    async def run(self, arguments: dict[str, Any]) -> tuple[str | Any, bool]:
        """``(output, is_error)``: the function's result, or the exception it raised."""
        try:
            if inspect.iscoroutinefunction(self.function):
                result = await self.function(**arguments)
            else:
                result = await asyncio.to_thread(self.function, **arguments)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:  # the model reads the error; the turn goes on
            return f"{type(exc).__name__}: {exc}", True
        if isinstance(result, str):
            return result, False
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            return str(result), False
        return result, False


def tool_from_function(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    timeout_s: float | None = None,
) -> ClientTool:
    """A ``ClientTool`` named after the function, described by its docstring's first paragraph."""
    doc = inspect.getdoc(function) or ""
    return ClientTool(
        name=name or function.__name__,
        function=function,
        description=description if description is not None else doc.split("\n\n")[0].strip(),
        input_schema=input_schema or input_schema_of(function),
        timeout_s=timeout_s,
    )


def input_schema_of(function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of ``function``'s keyword arguments, from its type hints and defaults."""
    import typing

    import pydantic

    hints = typing.get_type_hints(function)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    schema = pydantic.create_model(f"{function.__name__}_input", **fields).model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)  # the parameter's name, already the key
    schema.setdefault("properties", {})
    return schema


__all__ = ["ClientTool", "input_schema_of", "tool_from_function"]
