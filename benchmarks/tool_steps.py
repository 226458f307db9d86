"""Runtime overhead per tool step on the local host (the tool's own time excluded).

A turn with ``k`` tool steps (the model asks for one tool, gets the result, asks again, ...) is
timed against a turn with none, on the local wiring (SQLite store in a temporary directory, the
in-process sink with a subscriber, the scripted model with no delay, and a tool that returns at
once). What a step adds is the runtime's own work: a second model request rebuilt with the
exchange, the tool call and result validated, run, stored (two idempotent appends) and sent (eight
frames), and the step's usage record. ``(t(k) - t(0)) / k``, medians of interleaved runs.

Run: ``./dev python -m benchmarks.tool_steps [--steps 5] [--runs 31]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.scripted import Calls, ScriptedModelClient, SingleModelResolver
from agentvm.adapters.local.push import LocalPush
from agentvm.agent.tools.sources import ToolSources
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.llm import ToolSpec
from agentvm.ports import ConnectionInfo, ToolOutput
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.worker import process_turn
from benchmarks.local_turns import create_session, sqlite_runtime, submit_turn

if TYPE_CHECKING:
    from agentvm.records import ImageRecord

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class InstantTool:
    """Returns at once: what is measured is the runtime around it."""

    spec = ToolSpec("get_weather", "Weather of a city", SCHEMA)
    timeout_s = None
    idempotent = True

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(f"sunny in {arguments['city']}")


class OneTool(ToolSources):
    async def toolbox(self, store: Any, image: ImageRecord, **_: Any) -> Toolbox:
        return Toolbox([InstantTool()])


async def _turn(rt: Runtime, model: ScriptedModelClient, image: ImageRecord, steps: int, n: int) -> float:
    for i in range(steps):
        model.add(Calls(("get_weather", {"city": f"city {i}"}), text="Let me look that up."))
    model.add("It is sunny everywhere you asked about, all day long.")
    job = await submit_turn(rt, image, f"b{n}", "What is the weather?", agent_id="agent_b")
    started = time.perf_counter()
    await process_turn(rt, job)
    return time.perf_counter() - started


async def run(steps: int = 5, runs: int = 31) -> dict[str, float]:
    model = ScriptedModelClient()
    # A short history window: the turn reads its own steps, not a growing session.
    turns = TurnSettings(flush_s=0.01, subscriber_refresh_s=0.0, history_window=50)
    with sqlite_runtime(SingleModelResolver(model), turns, OneTool()) as rt:
        push = rt.push
        assert isinstance(push, LocalPush)
        frames = 0

        async def client(payload: str) -> None:
            nonlocal frames
            frames += 1

        push.attach("conn_bench", client)
        await rt.connections.register(ConnectionInfo("conn_bench", "t", 0))
        image = await create_session(rt, tools=[{"type": "builtin", "name": "calculator"}], maxSteps=100)
        await rt.connections.subscribe("conn_bench", image.sessionId)
        plain: list[float] = []
        tooled: list[float] = []
        n = 0
        for _ in range(3):  # warm-up
            n += 1
            await _turn(rt, model, image, steps, n)
        for _ in range(runs):  # interleaved, so drift hits both alike
            n += 1
            plain.append(await _turn(rt, model, image, 0, n))
            n += 1
            tooled.append(await _turn(rt, model, image, steps, n))
    t0, tk = statistics.median(plain), statistics.median(tooled)
    return {
        "steps": steps,
        "runs": runs,
        "turn_no_tools_ms": t0 * 1000,
        "turn_with_tools_ms": tk * 1000,
        "per_tool_step_ms": (tk - t0) / steps * 1000,
    }


def render(r: dict[str, float]) -> str:
    return "\n".join(
        [
            "## Runtime overhead per tool step (local host)\n",
            "Command: `./dev python -m benchmarks.tool_steps` (medians of "
            f"{int(r['runs'])} interleaved runs; scripted model with no delay, a tool that returns at once, "
            "SQLite on disk, one subscriber).\n",
            "| turn | median wall time |",
            "|---|---|",
            f"| no tools (one model call) | {r['turn_no_tools_ms']:.2f} ms |",
            f"| {int(r['steps'])} tool steps ({int(r['steps']) + 1} model calls) "
            f"| {r['turn_with_tools_ms']:.2f} ms |",
            f"| **added per tool step** | **{r['per_tool_step_ms']:.2f} ms** |",
            "",
            "A step's overhead is the runtime's own work: rebuild the request with the exchange, validate "
            "the input against the schema, store the call and the result (idempotent appends) and the "
            "step's usage record, send eight frames. It does not include the model's or the tool's time.\n",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=5, help="tool steps in the measured turn")
    parser.add_argument("--runs", type=int, default=31, help="interleaved runs per kind of turn")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.steps, args.runs))))


if __name__ == "__main__":
    main()
