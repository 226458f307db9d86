"""What the mixed-model policy saves on a stated traffic mix, and what it does to prompt caching.

The traffic: ``--sessions`` help-desk sessions (default 200) of three turns each, through the turn
worker and the real Anthropic SDK against ``avm fake-llm`` (tokens are the fake's words; prompt
caching on, as by default). A session's first message is one of the reply-cache benchmark's 50 shop
questions, Zipf-distributed and typed with varied case and spacing (65%), or a long request of
~60 words (35%). In 40% of sessions the first reply calls a tool (``search_orders``); the second and
third messages are short follow-ups ("And the price?"). The image: Claude Sonnet 4.6, a ~1,500-word
system prompt, three tools.

Each traffic runs twice on the same script: without a ``fastModel``, and with ``fastModel``
Claude Haiku 5.5 (``agent/model_policy.py``, rule ``short-first-message``: a short message in a
session with no tool calls yet goes to the fast model). Reported from the usage records: the turns
routed, calls per model, input (and cache reads) and output tokens, and list-price dollars
(genai-prices, no markup), whole traffic.

The interaction with prompt caching: caches are per model, so a session routed to Haiku for its
first turns and then to Sonnet (after a long message or a tool call) writes its prefix into each
model's cache. The cache-read share of each run shows it.

Run: ``./dev python -m benchmarks.mixed_models [--sessions 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.agent.model_policy import SHORT_FIRST_MESSAGE
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.runtime import TurnSettings
from benchmarks.local_turns import TENANT, create_session, run_turn, sqlite_runtime
from benchmarks.prompt_caching import KEY, ThreeTools, system_prompt
from benchmarks.reply_cache import zipf_questions
from benchmarks.side_models import dollars

MODEL = "anthropic/claude-sonnet-4-6"
FAST_MODEL = "anthropic/claude-haiku-5-5"
SESSIONS = 200
LONG_SHARE = 0.35
TOOL_SHARE = 0.40
FOLLOW_UPS = ("And the price?", "Thanks, and when does it ship?", "Can I pick it up instead?")
LONG_REQUEST = (
    "I ordered a two-person tent and a sleeping bag last week for a trip that starts on Friday, "
    "the tracking page has not changed for three days, and I need to know whether it will arrive in "
    "time or whether I should cancel and buy locally; if I cancel, how is the refund handled and "
    "does the shop cover the return postage for an order that was late? Order {n}."
)


def traffic(sessions: int, seed: int = 27) -> list[tuple[str, bool]]:
    """Each session's first message and whether its first reply calls a tool (deterministic)."""
    rng = random.Random(seed)
    questions = iter(zipf_questions(sessions, rng))
    out = []
    for n in range(sessions):
        question = next(questions)
        first = LONG_REQUEST.format(n=n) if rng.random() < LONG_SHARE else question
        out.append((first, rng.random() < TOOL_SHARE))
    return out


def _script(fake: FakeLLMServer, n: int, tool_first: bool) -> None:
    replies: list[dict[str, Any]] = []
    if tool_first:
        replies.append(
            {
                "text": "Let me check.",
                "tool_calls": [{"name": "search_orders", "input": {"query": f"order {n}"}}],
            }
        )
    replies.append({"text": f"Your order {n} ships in two days from the main store."})
    replies += [{"text": "It is 89 euros, delivery included."}, {"text": "Yes, from the main store."}]
    fake.state.add_script(replies)


async def run_traffic(
    sessions: list[tuple[str, bool]], fast_model: str | None, fake: FakeLLMServer
) -> dict[str, Any]:
    fake.reset()
    settings = Settings(_env_file=None, anthropic_api_key=SecretStr(KEY), anthropic_base_url=fake.base_url)
    knobs = TurnSettings(flush_s=0.01, subscriber_refresh_s=0.0)
    with sqlite_runtime(SettingsModelResolver(settings), knobs, ThreeTools()) as rt:
        for n, (first, tool_first) in enumerate(sessions):
            image = await create_session(
                rt,
                image_id=f"img_{n}",
                session_id=f"sess_{n}",
                model=MODEL,
                fastModel=fast_model,
                systemPrompt=system_prompt(1500),
                tools=[{"type": "builtin", "name": "calculator"}],  # any declaration: ThreeTools decides
            )
            _script(fake, n, tool_first)
            for turn, text in enumerate((first, FOLLOW_UPS[n % 3], FOLLOW_UPS[(n + 1) % 3])):
                await run_turn(rt, image, f"{n}_{turn}", text)
        usage = [u for u in await rt.store.list_usage(TENANT) if u.kind in ("turn", "step")]
    turns = [u for u in usage if u.kind == "turn"]
    by_model: dict[str, int] = {}
    for u in usage:
        by_model[u.model] = by_model.get(u.model, 0) + 1
    prompt = sum(u.inputTokens for u in usage)
    return {
        "turns": len(turns),
        "routed": sum(u.routedBy == SHORT_FIRST_MESSAGE for u in turns),
        "calls": by_model,
        "input": prompt,
        "cache_read_share": sum(u.cacheReadTokens for u in usage) / prompt,
        "output": sum(u.outputTokens for u in usage),
        "dollars": sum((dollars(u) for u in usage), Decimal(0)),
    }


async def run(sessions: int = SESSIONS) -> dict[str, dict[str, Any]]:
    mix = traffic(sessions)
    config = FakeLLMConfig(ttft_ms=0, tokens_per_second=1_000_000, reply_tokens=5)
    with FakeLLMServer(config) as fake:
        return {
            "image's model only": await run_traffic(mix, None, fake),
            "fastModel Haiku 5.5": await run_traffic(mix, FAST_MODEL, fake),
        }


def render(results: dict[str, dict[str, Any]], sessions: int) -> str:
    base = results["image's model only"]["dollars"]
    lines = [
        "## Mixed-model routing on a traffic mix (issue 27)\n",
        f"Command: `./dev python -m benchmarks.mixed_models --sessions {sessions}` ({sessions} sessions x 3 "
        f"turns; first messages {100 - LONG_SHARE * 100:.0f}% Zipf-distributed short shop questions, "
        f"{LONG_SHARE * 100:.0f}% ~60-word requests; a tool call in {TOOL_SHARE * 100:.0f}% of first "
        "replies; "
        "short follow-ups; Sonnet 4.6 image, ~1,500-word system prompt, three tools; the real Anthropic SDK "
        "against `avm fake-llm`, prompt caching on; tokens are the fake's words; list prices from "
        "genai-prices, no markup; deterministic, one run).\n",
        "| run | turns routed to the fast model | model calls (Sonnet / Haiku) | input tokens "
        "| of which cache reads | output tokens | list-price $ | vs image's model only |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        calls = f"{r['calls'].get(MODEL, 0):,} / {r['calls'].get(FAST_MODEL, 0):,}"
        change = (r["dollars"] - base) / base * 100
        lines.append(
            f"| {name} | {r['routed']:,} of {r['turns']:,} ({r['routed'] / r['turns']:.0%}) | {calls} "
            f"| {r['input']:,} | {r['cache_read_share']:.0%} | {r['output']:,} | ${r['dollars']:.4f} "
            f"| {change:+.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    args = parser.parse_args()
    print(render(asyncio.run(run(args.sessions)), args.sessions))


if __name__ == "__main__":
    main()
