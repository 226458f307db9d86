"""What ``avm fake-llm``'s embeddings cost, so retrieval benchmarks know what they measure.

    ./dev python -m benchmarks.fake_embeddings [--runs 5] [--texts 2048]

In process: ``embed_text`` on ~1 KB chunks (a knowledge index's unit) at 256 and 1,536
dimensions, texts per second (median of ``--runs``). Over loopback, through the official SDKs
and the adapters: ``--texts`` chunks embedded by ``OpenAIEmbedder`` (text-embedding-3-small, one
request of 2,048, base64) and by ``BedrockEmbedder`` (Titan v2, one request a text, 4 at a time),
wall time and texts per second (median of ``--runs``). The fake runs in this process's thread,
so the figures are the fake's CPU plus the SDK's, not a provider's latency.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from agentvm.fakellm.vectors import embed_text

_WORDS = (
    "refund",
    "order",
    "ship",
    "delivery",
    "invoice",
    "account",
    "password",
    "reset",
    "billing",
    "plan",
    "upgrade",
    "cancel",
    "support",
    "ticket",
    "agent",
    "tool",
    "session",
    "container",
    "image",
    "model",
    "token",
    "price",
    "usage",
    "limit",
    "budget",
    "document",
    "chunk",
    "search",
    "index",
    "vector",
    "query",
    "answer",
    "question",
    "policy",
    "return",
    "warranty",
    "days",
)


def chunks(count: int, size: int = 1000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(_WORDS) if rng.random() < 0.7 else f"w{rng.randrange(5000)}")
        out.append(" ".join(words))
    return out


def row(what: str, texts: int, took: float) -> None:
    print(f"| {what} | {texts} | {took:.3f} | {texts / took:,.0f} |")


def timed(runs: int, work) -> float:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--texts", type=int, default=2048)
    args = parser.parse_args()
    texts = chunks(args.texts)
    print("| what | texts | median s | texts / s |")
    print("|---|---|---|---|")
    sample = texts[:256]
    for dims in (256, 1536):
        took = timed(args.runs, lambda d=dims: [embed_text(t, d) for t in sample])
        row(f"embed_text in process, {dims} dimensions", len(sample), took)

    import boto3
    from botocore.config import Config

    from agentvm.adapters.embeddings.bedrock import BedrockEmbedder
    from agentvm.adapters.embeddings.openai import OpenAIEmbedder
    from agentvm.fakellm import FakeLLMServer

    with FakeLLMServer() as fake:
        openai_embedder = OpenAIEmbedder(
            "text-embedding-3-small", api_key="sk-bench", base_url=fake.openai_base_url
        )
        took = timed(args.runs, lambda: openai_embedder.embed(texts, purpose="document"))
        row("OpenAI SDK -> fake, 1,536 dimensions, base64", len(texts), took)
        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=fake.base_url,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            config=Config(max_pool_connections=8),
        )
        titan = BedrockEmbedder("amazon.titan-embed-text-v2:0", region="us-east-1", client=client)
        few = texts[:256]
        took = timed(args.runs, lambda: titan.embed(few, purpose="document"))
        row("boto3 -> fake, Titan v2 1,024 dimensions, 4 at a time", len(few), took)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
