"""What the stepped history window and the context diet save on a long tool-heavy conversation.

A 30-turn conversation on one session (the standard conversation's system prompt, three tools, one
or two tool calls a turn; ``benchmarks/prompt_caching.py`` drives it) whose tool outputs are about
2,000 tokens each, through the turn worker and the real Anthropic SDK against ``avm fake-llm``
(which prices its prompt cache as Anthropic documents it; tokens are its words). Prompt caching on
in every row. Rows:

- compaction off (so the 50-message history window is what bounds the context): the old window
  sliding by every message (``historyWindowStep`` 0), the stepped window (20, the default), and the
  stepped window with the context diet (``contextDiet``: results elided after 4 steps, results over
  8,000 characters shown as their first 2,000);
- compaction on (the server default, 8,000 estimated tokens): diet off and on.

Reported from the usage records: model calls, prompt tokens, cache reads and writes, billed
input-equivalent (uncached + 1.25 x writes + 0.1 x reads), its ratio to the prompt tokens, input
dollars at Claude Sonnet 4.6 list prices, and the turns whose prefix broke, by reason.

Run: ``./dev python -m benchmarks.context_diet``
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from benchmarks.prompt_caching import ThreeTools, conversation

TURNS = 30
OUTPUT_WORDS = 2000
DIET = {"enabled": True, "keepSteps": 4, "maxResultChars": 8000, "headChars": 2000}
ROWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # name: (turn settings, image fields)
    "no compaction, sliding window": ({"compaction_threshold_tokens": 0, "history_window_step": 0}, {}),
    "no compaction, stepped window": ({"compaction_threshold_tokens": 0}, {}),
    "no compaction, stepped window + diet": ({"compaction_threshold_tokens": 0}, {"contextDiet": DIET}),
    "compaction, stepped window": ({}, {}),
    "compaction, stepped window + diet": ({}, {"contextDiet": DIET}),
}


def long_output(name: str, arguments: dict[str, Any]) -> str:
    """About 2,000 words (the fake's tokens), different for every call."""
    key = " ".join(str(v) for v in arguments.values())
    words = [f"{name}:{key}"] + [
        f"row{i} item{(i * 7) % 97} qty{i % 13} ok" for i in range(OUTPUT_WORDS // 4)
    ]
    return " ".join(words)


async def run() -> dict[str, dict[str, float]]:
    config = FakeLLMConfig(ttft_ms=0, tokens_per_second=1_000_000, reply_tokens=5)
    results: dict[str, dict[str, float]] = {}
    with FakeLLMServer(config) as fake:
        for name, (settings, image) in ROWS.items():
            results[name] = await conversation(
                "anthropic",
                True,
                fake,
                turns=TURNS,
                tools=ThreeTools(long_output),
                image_fields=image,
                turn_settings=settings,
            )
    return results


def render(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "## The stepped history window and the context diet on a long conversation (issue 27)\n",
        "Command: `./dev python -m benchmarks.context_diet` (30 turns on one session, ~3,000-token system "
        "prompt, three tools, one or two calls a turn, each tool output ~2,000 tokens; Anthropic SDK against "
        "`avm fake-llm` pricing its cache as Anthropic documents it; prompt caching on; tokens are the "
        "fake's words; deterministic, one run).\n",
        "| configuration | model calls | prompt tokens | cache reads | cache writes "
        "| billed input-equivalent "
        "| ratio to prompt | input $ (Sonnet 4.6) | prefix breaks (window / compaction / diet) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {int(r['calls'])} | {int(r['prompt']):,} | {int(r['read']):,} | {int(r['write']):,} "
            f"| {r['billed']:,.0f} | {r['ratio']:.3f} | ${r['dollars']:.4f} "
            f"| {int(r['break_window'])} / {int(r['break_compaction'])} / {int(r['break_diet'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    print(render(asyncio.run(run())))


if __name__ == "__main__":
    main()
