"""Built-in tools: small, pure, safe to run anywhere, so an image can act with no setup at all.

* ``current_time``: the current UTC time (or in an IANA time zone), ISO 8601.
* ``calculator``: evaluates an arithmetic expression (numbers, + - * / // % **, parentheses) by
  walking its syntax tree: no ``eval``, and bounded so a huge power cannot eat the worker.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentvm.llm import ToolSpec
from agentvm.ports import ToolOutput

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class BuiltinTool:
    spec: ToolSpec
    run: Callable[[dict[str, Any]], str]
    timeout_s: float | None = None
    idempotent: bool = True

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(self.run(arguments))


def _current_time(arguments: dict[str, Any]) -> str:
    zone = arguments.get("timezone") or "UTC"
    if zone == "UTC":
        return datetime.now(UTC).isoformat(timespec="seconds")
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return datetime.now(ZoneInfo(zone)).isoformat(timespec="seconds")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r}") from None


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_EXPRESSION = 500
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 10**100


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):  # not a bool
        assert isinstance(node.value, int | float)
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent too large (at most {_MAX_EXPONENT})")
        result = _BINARY[type(node.op)](left, right)
        if abs(result) > _MAX_MAGNITUDE:
            raise ValueError("result too large")
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers, + - * / // % ** and parentheses are allowed")


def _calculator(arguments: dict[str, Any]) -> str:
    expression = str(arguments["expression"])
    if len(expression) > _MAX_EXPRESSION:
        raise ValueError(f"expression too long (at most {_MAX_EXPRESSION} characters)")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError("not an arithmetic expression") from None
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    return str(value)


BUILTIN_TOOLS: dict[str, BuiltinTool] = {
    "current_time": BuiltinTool(
        ToolSpec(
            "current_time",
            "The current date and time (ISO 8601), in UTC or in the given IANA time zone.",
            {
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "e.g. Europe/Paris"}},
            },
        ),
        _current_time,
        idempotent=True,
    ),
    "calculator": BuiltinTool(
        ToolSpec(
            "calculator",
            "Evaluates an arithmetic expression: numbers, + - * / // % ** and parentheses.",
            {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4"}},
                "required": ["expression"],
            },
        ),
        _calculator,
        idempotent=True,
    ),
}

__all__ = ["BUILTIN_TOOLS", "BuiltinTool"]
