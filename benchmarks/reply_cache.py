"""What an image's reply cache saves on common first questions (``turns/reply_cache.py``).

1,000 first turns (each its own session, as 1,000 end users each opening one), on images of one
config that opts in (``replyCache: {"enabled": true}``), with a ~2,000-token system prompt. The
questions are drawn from 50 (Zipf, s = 1.0, seeded) and asked with random case, spacing and
trailing punctuation, so only the normalisation makes them equal. Every turn runs through the turn
worker (``process_turn``) on SQLite, with the echo model standing for ``anthropic/claude-sonnet-4-6``
(its tokens are the echo's estimates: chars/4 in, words out).

Reported from the usage records AgentVM stored: the hit rate, the tokens billed and saved (a hit's
``savedInputTokens``/``savedOutputTokens``), the list-price dollars paid and saved (genai-prices, no
markup), and the median worker time of a miss and of a hit.

Run: ``./dev python -m benchmarks.reply_cache``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.adapters.llm.scripted import SingleModelResolver
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.replies import SqliteReplyCache
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.messages import UserMessage
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.pricing import list_price
from agentvm.observability.running import TurnProgress
from agentvm.records import ImageRecord, SessionRecord, TurnJob
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll
from agentvm.turns.worker import process_turn

MODEL = "anthropic/claude-sonnet-4-6"
TURNS = 1_000
QUESTIONS = [
    f"{opening} {topic}?"
    for opening in (
        "What are your",
        "How do I check my",
        "Can you explain the",
        "Where can I find the",
        "Why did",
    )
    for topic in (
        "opening hours",
        "refund policy",
        "delivery times",
        "order status",
        "warranty terms",
        "shipping costs",
        "return address",
        "payment options",
        "loyalty points",
        "size guide",
    )
]  # 50
SYSTEM_PROMPT = " ".join(f"Rule {n}: answer politely, briefly, and only about the shop." for n in range(250))


def variant(question: str, rng: random.Random) -> str:
    """The question as a user might type it: case, spacing and trailing punctuation vary."""
    words = question.rstrip("?").split()
    cased = [w.upper() if rng.random() < 0.1 else w.lower() if rng.random() < 0.5 else w for w in words]
    return (" " * rng.randint(0, 2)) + "  ".join(cased) + rng.choice(["?", "??", "", " ?", "!"])


def zipf_questions(n: int, rng: random.Random, s: float = 1.0) -> list[str]:
    weights = [1 / (rank**s) for rank in range(1, len(QUESTIONS) + 1)]
    return [variant(q, rng) for q in rng.choices(QUESTIONS, weights=weights, k=n)]


def dollars(input_tokens: int, output_tokens: int) -> Decimal:
    price = list_price(MODEL)
    if price is None:
        raise LookupError(f"no list price for {MODEL}")
    return (input_tokens * price.input + output_tokens * price.output) / Decimal(1_000_000)


async def run(turns: int = TURNS, seed: int = 27) -> dict[str, Any]:
    rng = random.Random(seed)
    asked = zipf_questions(turns, rng)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        queue = SqliteTurnQueue(Path(tmp) / "queue.db")
        replies = SqliteReplyCache(Path(tmp) / "bench.db")
        rt = Runtime(
            store=store,
            queue=queue,
            connections=InMemoryConnections(),
            push=LocalPush(),
            models=SingleModelResolver(EchoModelClient(delay_ms=0), ref=MODEL),
            turns=TurnSettings(flush_s=0.01, subscriber_refresh_s=0.0),
            cancel_poll=CancelPoll(),
            progress=TurnProgress(),
            metrics=NoMetrics(),
            replies=replies,
        )
        times: dict[str, list[float]] = {"turn": [], "reply_cache": []}
        for n, question in enumerate(asked):
            now = rt.clock.now_ms()
            ids = {"tenantId": "t", "containerId": f"user-{n}", "createdAt": now, "updatedAt": now}
            image = ImageRecord(
                **ids,
                imageId=f"img_{n}",
                sessionId=f"sess_{n}",
                name="Help desk",
                model=MODEL,
                systemPrompt=SYSTEM_PROMPT,
                replyCache={"enabled": True, "ttlS": 86_400},
            )
            await store.create_image(
                image, SessionRecord(**ids, sessionId=image.sessionId, imageId=image.imageId)
            )
            user = UserMessage(id=f"msg_{n}", timestamp=now, content=question)
            appended = await store.append_message(image.sessionId, user)
            job = TurnJob(
                turnId=f"turn_{n}",
                tenantId="t",
                containerId=image.containerId,
                imageId=image.imageId,
                sessionId=image.sessionId,
                agentId=f"agent_{n}",
                userMessageId=user.id,
                requestId=f"r{n}",
                enqueuedAt=0,
                userSeq=appended.seq,
            )
            started = time.perf_counter()
            outcome = await process_turn(rt, job)
            elapsed = time.perf_counter() - started
            assert outcome is not None and outcome.error is None, outcome
            times["reply_cache" if outcome.steps == 0 else "turn"].append(elapsed)  # a hit calls no model
        usage = await store.list_usage("t")
        replies.close()
        queue.close()
        store.close()
    hits = [u for u in usage if u.kind == "reply_cache"]
    misses = [u for u in usage if u.kind == "turn"]
    assert len(hits) + len(misses) == turns, [u.kind for u in usage]
    billed_in, billed_out = sum(u.inputTokens for u in usage), sum(u.outputTokens for u in usage)
    saved_in, saved_out = sum(u.savedInputTokens for u in hits), sum(u.savedOutputTokens for u in hits)
    return {
        "turns": turns,
        "distinct": len(set(asked)),
        "hits": len(hits),
        "billed_tokens": billed_in + billed_out,
        "saved_tokens": saved_in + saved_out,
        "paid": dollars(billed_in, billed_out),
        "saved": dollars(saved_in, saved_out),
        "miss_ms": statistics.median(times["turn"]) * 1000,
        "hit_ms": statistics.median(times["reply_cache"]) * 1000 if times["reply_cache"] else 0.0,
    }


def render(r: dict[str, Any]) -> str:
    without = r["paid"] + r["saved"]
    return (
        "\n".join(
            [
                "## Reply cache of common first questions (issue 27)\n",
                "Command: `./dev python -m benchmarks.reply_cache` (1,000 first turns, 50 questions "
                "drawn Zipf s=1.0 with random case, spacing and trailing punctuation; the turn worker on "
                f"SQLite; the echo model billed as `{MODEL}`, list prices from genai-prices, no markup; "
                "seeded).\n",
                "| turns | typed variants | hits | hit rate | tokens billed | tokens saved | $ paid "
                "| $ saved | $ without cache | median worker ms (miss / hit) |",
                "|---|---|---|---|---|---|---|---|---|---|",
                f"| {r['turns']:,} | {r['distinct']:,} | {r['hits']:,} | {r['hits'] / r['turns']:.1%} "
                f"| {r['billed_tokens']:,} | {r['saved_tokens']:,} | ${r['paid']:.4f} | ${r['saved']:.4f} "
                f"| ${without:.4f} | {r['miss_ms']:.2f} / {r['hit_ms']:.2f} |",
            ]
        )
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args()
    print(render(asyncio.run(run(args.turns))))


if __name__ == "__main__":
    main()
