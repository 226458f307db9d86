"""What side calls (compaction summaries, the session title) cost on the image's model vs its cheap sibling.

The standard agent conversation of ``benchmarks/prompt_caching.py`` (10 turns on one session, a
~3,000-token system prompt, three tools, one or two tool calls per turn), with titles switched on
(``sessions.autoTitle``) and the default compaction threshold, through the turn worker and the real
Anthropic and OpenAI SDKs against ``avm fake-llm`` (tokens are the fake's words). Each provider runs
twice: the image opting out of a cheap side model (``sideModel: ""``: side calls on its own model,
the behaviour before issue 27) and the default (its cheap sibling, ``agent/side_model.py``).

Reported from the usage records AgentVM stored, side calls only (``kind`` compaction and title):
their model, input and output tokens, and list-price dollars (genai-prices, the bill's library:
``observability/pricing.py``, no markup), and the whole conversation's list-price dollars.

Run: ``./dev python -m benchmarks.side_models``
"""

from __future__ import annotations

import argparse
import asyncio
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.observability.pricing import list_price
from agentvm.records import DEFAULT_IMAGE_NAME, UsageRecord
from agentvm.runtime import TurnSettings
from benchmarks.local_turns import TENANT, create_session, run_turn, sqlite_runtime
from benchmarks.prompt_caching import KEY, TURNS, ThreeTools, _script, system_prompt

MODELS = {"anthropic": "anthropic/claude-sonnet-4-6", "openai": "openai/gpt-4.1"}
SIDE_KINDS = ("compaction", "title")


def dollars(record: UsageRecord) -> Decimal:
    """The record's list price (no markup): uncached and cached input, cache writes, output."""
    price = list_price(record.model)
    if price is None:
        raise LookupError(f"no list price for {record.model}")
    uncached = record.inputTokens - record.cacheReadTokens - record.cacheWriteTokens
    return (
        uncached * price.input
        + record.cacheReadTokens * price.cache_read
        + record.cacheWriteTokens * price.cache_write
        + record.outputTokens * price.output
    ) / Decimal(1_000_000)


async def conversation(model: str, side_model: str | None, fake: FakeLLMServer) -> dict[str, Any]:
    fake.reset()
    settings = Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=fake.base_url,
        openai_api_key=SecretStr(KEY),
        openai_base_url=fake.openai_base_url,
    )
    turns = TurnSettings(flush_s=0.01, subscriber_refresh_s=0.0, auto_title=True)
    with sqlite_runtime(SettingsModelResolver(settings), turns, ThreeTools()) as rt:
        image = await create_session(
            rt,
            name=DEFAULT_IMAGE_NAME,  # untitled: the first turn names it
            model=model,
            sideModel=side_model,
            systemPrompt=system_prompt(),
            tools=[{"type": "builtin", "name": "calculator"}],  # any declaration: ThreeTools decides
        )
        for turn in range(1, TURNS + 1):
            _script(fake, turn)
            if turn == 1:
                fake.state.add_script([{"text": "Order lookup and delivery"}])  # the title call
            await run_turn(rt, image, str(turn), f"Where is my order {turn}?")
        usage = await rt.store.list_usage(TENANT)
        titled = await rt.store.get_image(TENANT, image.imageId)
    side = [u for u in usage if u.kind in SIDE_KINDS]
    assert {u.kind for u in side} == set(SIDE_KINDS), [u.kind for u in usage]
    assert titled is not None and titled.name != DEFAULT_IMAGE_NAME
    return {
        "side_models": sorted({u.model for u in side}),
        "side_calls": len(side),
        "side_input": sum(u.inputTokens for u in side),
        "side_output": sum(u.outputTokens for u in side),
        "side_dollars": sum((dollars(u) for u in side), Decimal(0)),
        "all_dollars": sum((dollars(u) for u in usage), Decimal(0)),
    }


async def run() -> dict[str, dict[str, Any]]:
    config = FakeLLMConfig(ttft_ms=0, tokens_per_second=100_000, reply_tokens=5)
    results: dict[str, dict[str, Any]] = {}
    with FakeLLMServer(config) as fake:
        for provider, model in MODELS.items():
            results[f"{provider}, image's model"] = await conversation(model, "", fake)
            results[f"{provider}, cheap sibling"] = await conversation(model, None, fake)
    return results


def render(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "## Side calls on the cheap sibling (issue 27)\n",
        "Command: `./dev python -m benchmarks.side_models` (the standard agent conversation of "
        "`benchmarks.prompt_caching`, titles on, the default compaction threshold; through the turn worker "
        "and the real SDKs against `avm fake-llm`; tokens are the fake's words; list prices from "
        "genai-prices, no markup; deterministic, one run).\n",
        "| provider, side model | side calls' model | side calls | input tokens | output tokens "
        "| side calls $ | conversation $ |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {', '.join(r['side_models'])} | {r['side_calls']} | {r['side_input']:,} "
            f"| {r['side_output']:,} | ${r['side_dollars']:.5f} | ${r['all_dollars']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    print(render(asyncio.run(run())))


if __name__ == "__main__":
    main()
