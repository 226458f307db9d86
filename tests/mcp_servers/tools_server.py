"""An MCP server for tests, on the official SDK: ``python tools_server.py stdio|http <port>``.

Tools: ``add``, ``echo``, ``fail`` (raises: an error result), ``slow`` (sleeps), ``env`` (reads an
environment variable of the server, to check what a stdio child is given), and ``counted``,
which appends a line to the file named by ``MCP_COUNTER_FILE`` and returns how many lines it holds
(a test counts how often a tool really ran); ``steps`` reports progress ``steps`` times, as fast as
it can; ``crash`` writes to stderr and exits the server process with the given code; ``ask`` asks
the user for a name and an age (``elicitation/create``) and says what it got.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

server = MCPServer("agentvm-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise RuntimeError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def counted(label: str) -> int:
    """Record one call in MCP_COUNTER_FILE; returns the calls recorded so far."""
    path = Path(os.environ["MCP_COUNTER_FILE"])
    with path.open("a") as f:
        f.write(label + "\n")
    return len(path.read_text().splitlines())


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of this server process ("" if unset)."""
    return os.environ.get(name, "")


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress ``count`` times without pause, then return."""
    for i in range(1, count + 1):
        await ctx.report_progress(i, count, f"step {i}")
    return f"{count} steps"


@server.tool()
def crash(code: int) -> str:
    """Say why on stderr, then exit the process with ``code`` (a server that crashes mid-call)."""
    sys.stderr.write(f"tools_server: crashing on purpose with code {code}\n")
    sys.stderr.flush()
    os._exit(code)


class Person(BaseModel):
    name: str = Field(description="your name")
    age: int = Field(ge=0, le=150, description="your age in years")


def _person(question: str) -> Elicit[Person]:
    return Elicit(question, Person)


@server.tool()
async def ask(question: str, person: Annotated[ElicitationResult[Person], Resolve(_person)]) -> str:
    """Ask the user for a name and an age; says what the user answered. (The SDK sends the question
    as the protocol revision says: mid-call before 2026-07-28, inside the call's result since.)"""
    if person.action == "accept":
        return f"accepted: {person.data.name}, {person.data.age}"
    return person.action


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
