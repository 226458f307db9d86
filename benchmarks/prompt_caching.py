"""What prompt caching saves on the standard agent conversation, per provider, through AgentVM and LangGraph.

The standard agent conversation: 10 turns on one session; a ~3,000-token system prompt; three
tools with schemas; each turn makes one tool call (odd turns) or two parallel calls (even turns),
then answers. Turns run through the runtime's turn worker (SQLite store, the real Anthropic and
OpenAI SDKs) against ``avm fake-llm``, which scripts the calls and prices its prompt cache as each
provider documents it (``fakellm/prompt_cache.py``; its tokens are words). Each provider is run
with caching on (the default) and off.

Reported from the usage records AgentVM stored: prompt (input) tokens, cache reads and writes, the
billed input-equivalent (uncached + 1.25 x writes + 0.1 x reads for Anthropic; uncached + 0.25 x
cached for gpt-4.1-mini, whose cached input is a quarter of the price), its ratio to the uncached
prompt, and list-price input dollars (Claude Sonnet 4.6: $3 / MTok input, $3.75 writes, $0.30
reads; gpt-4.1-mini: $0.40 input, $0.10 cached; published prices, 2026).

In the same run, the same conversation (same fake, same script, same prompt, tools and tool
results) through LangGraph, in its own pinned venv (``benchmarks/peer_langgraph.py``, made on first
use) as a subprocess (``benchmarks/peer/lg_agent_conversation.py``): LangChain's prebuilt agent,
``langchain.agents.create_agent`` (the successor of ``langgraph.prebuilt.create_react_agent``), with
``ChatAnthropic`` at its defaults, then with the caching set-up LangChain documents for it,
``AnthropicPromptCachingMiddleware`` from ``langchain_anthropic.middleware`` ("Anthropic middleware
integration", https://docs.langchain.com/oss/python/integrations/middleware/anthropic; reference:
https://reference.langchain.com/python/langchain-anthropic/middleware/prompt_caching). Its rows
are priced as Anthropic's, and every Anthropic-priced row says how many times less input it
spends than LangGraph's default.

Run: ``./dev python -m benchmarks.prompt_caching [--turns 10] [--no-langgraph]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.agent.tools.sources import ToolSources
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.llm import ToolSpec
from agentvm.ports import ToolOutput
from agentvm.runtime import TurnSettings
from benchmarks.local_turns import TENANT, create_session, run_turn, sqlite_runtime
from benchmarks.peer_langgraph import LG_PYTHON, PEER_DIR, ensure_peer_venv

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.records import ImageRecord

TURNS = 10
KEY = "sk-bench-not-a-real-key"
# (model, $ per million: input, cache write, cache read); write/read multipliers follow
PROVIDERS: dict[str, tuple[str, float, float, float]] = {
    "anthropic": ("anthropic/claude-sonnet-4-6", 3.00, 3.75, 0.30),
    "openai": ("openai/gpt-4.1-mini", 0.40, 0.40, 0.10),
    "bedrock": ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", 3.00, 3.75, 0.30),
}


def _resolver(provider: str, settings: Settings, fake: FakeLLMServer) -> Any:
    """The settings' resolver; for Bedrock, its adapter on a boto3 client pointed at the fake."""
    if provider != "bedrock":
        return SettingsModelResolver(settings)
    import boto3

    from agentvm.adapters.llm.bedrock import BedrockModelClient
    from agentvm.adapters.llm.scripted import SingleModelResolver

    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=fake.base_url,
        aws_access_key_id="bench",
        aws_secret_access_key="bench",  # noqa: S106 - the fake checks no signature
    )
    return SingleModelResolver(BedrockModelClient("us-east-1", client=client), PROVIDERS["bedrock"][0])


POLICY = (
    "You are a careful support agent for an outdoor equipment shop. Answer from the tools, cite "
    "the order or document you used, never invent stock levels, prices or delivery dates, and "
    "ask one short question when the request is ambiguous. Policy section"
)


def system_prompt(words: int = 3000) -> str:
    """A deterministic ~3,000-word system prompt (the fake counts a word as a token)."""
    vocabulary = POLICY.split()
    out = [f"{vocabulary[i % len(vocabulary)]}{'' if i % 53 else f' {i // 53}.'}" for i in range(words)]
    return " ".join(out)


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            name: {"type": kind, "description": f"the {name}"} for name, kind in properties.items()
        },
        "required": list(properties),
    }


TOOL_RESULT = "{name} found: item 42 is in stock, 3 left, ships in two days"


def short_output(name: str, arguments: dict[str, Any]) -> str:
    return TOOL_RESULT.format(name=name)


class _Tool:
    timeout_s = None
    idempotent = True

    def __init__(self, spec: ToolSpec, output: Callable[[str, dict[str, Any]], str]) -> None:
        self.spec = spec
        self.output = output

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(self.output(self.spec.name, arguments))


TOOLS = (
    ToolSpec("search_orders", "Find a customer's orders by email or order number", _schema(query="string")),
    ToolSpec("check_stock", "Stock level and location of a product", _schema(sku="string", store="string")),
    ToolSpec("search_docs", "Search the shop's policy documents", _schema(query="string", limit="integer")),
)


class ThreeTools(ToolSources):
    def __init__(self, output: Callable[[str, dict[str, Any]], str] = short_output) -> None:
        self.output = output

    async def toolbox(self, store: Any, image: ImageRecord, **_: Any) -> Toolbox:
        return Toolbox([_Tool(spec, self.output) for spec in TOOLS])


def _question(turn: int) -> str:
    return f"Where is my order {turn}?"


def _script(fake: FakeLLMServer, turn: int) -> None:
    calls = [{"name": "search_orders", "input": {"query": f"order {turn}"}}]
    if turn % 2 == 0:
        calls.append({"name": "check_stock", "input": {"sku": f"sku-{turn}", "store": "main"}})
    fake.state.add_script(
        [
            {"text": "Let me look that up.", "tool_calls": calls},
            {"text": f"Your order {turn} is confirmed and the item ships in two days from the main store."},
        ]
    )


async def conversation(
    provider: str,
    caching: bool,
    fake: FakeLLMServer,
    turns: int = TURNS,
    *,
    tools: ToolSources | None = None,
    image_fields: dict[str, Any] | None = None,
    turn_settings: dict[str, Any] | None = None,
) -> dict[str, float]:
    """The conversation through AgentVM's turn worker; its usage records' totals, priced, and how
    often each turn's prompt prefix broke, by cause. ``tools`` (default: three short-answer tools),
    ``image_fields`` and ``turn_settings`` vary it (``benchmarks/context_diet.py``)."""
    model = PROVIDERS[provider][0]
    fake.reset()
    settings = Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=fake.base_url,
        openai_api_key=SecretStr(KEY),
        openai_base_url=fake.openai_base_url,
    )
    knobs = TurnSettings(
        flush_s=0.01, subscriber_refresh_s=0.0, prompt_caching=caching, **(turn_settings or {})
    )
    with sqlite_runtime(_resolver(provider, settings, fake), knobs, tools or ThreeTools()) as rt:
        image = await create_session(
            rt,
            model=model,
            systemPrompt=system_prompt(),
            tools=[{"type": "builtin", "name": "calculator"}],  # any declaration: ThreeTools decides
            **(image_fields or {}),
        )
        for turn in range(1, turns + 1):
            _script(fake, turn)
            await run_turn(rt, image, str(turn), _question(turn))
        usage = await rt.store.list_usage(TENANT)
    calls = [(u.inputTokens, u.cacheReadTokens, u.cacheWriteTokens) for u in usage]
    breaks = {
        f"break_{why}": sum(u.prefixBreak == why for u in usage) for why in ("window", "compaction", "diet")
    }
    return {**priced(provider, calls), **breaks}


def langgraph_conversation(caching: bool, fake: FakeLLMServer, turns: int = TURNS) -> dict[str, float]:
    """The conversation through LangChain's prebuilt agent in the peer's venv (its default
    ``ChatAnthropic``, with or without ``AnthropicPromptCachingMiddleware``), against the same
    fake and script; the usage LangChain recorded per model call, priced as Anthropic's row."""
    fake.reset()
    for turn in range(1, turns + 1):
        _script(fake, turn)
    spec = {
        "base_url": fake.base_url,
        "model": PROVIDERS["anthropic"][0].removeprefix("anthropic/"),
        "caching": caching,
        "system": system_prompt(),
        "tools": [{"name": t.name, "description": t.description, "schema": t.input_schema} for t in TOOLS],
        "tool_result": TOOL_RESULT,
        "messages": [_question(turn) for turn in range(1, turns + 1)],
    }
    env = {"PATH": os.environ.get("PATH", ""), "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
    out = subprocess.run(
        [str(LG_PYTHON), str(PEER_DIR / "lg_agent_conversation.py")],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the LangGraph conversation failed: {out.stderr[-2000:]}")
    data = json.loads(out.stdout)
    calls = [(c["input"], c["read"], c["write"]) for c in data["calls"]]
    counted = (sum(c[1] for c in calls), sum(c[2] for c in calls))
    served = (fake.state.stats()["cache_read_tokens"], fake.state.stats()["cache_write_tokens"])
    if counted != served or len(calls) != 2 * turns:
        raise RuntimeError(f"LangGraph's usage {counted} in {len(calls)} calls, the fake served {served}")
    return priced("anthropic", calls)


def priced(provider: str, calls: list[tuple[int, int, int]]) -> dict[str, float]:
    """Totals of (prompt, cache read, cache write) tokens per model call, at the provider's prices."""
    _model, price_in, price_write, price_read = PROVIDERS[provider]
    prompt = sum(c[0] for c in calls)
    read = sum(c[1] for c in calls)
    write = sum(c[2] for c in calls)
    uncached = prompt - read - write
    dollars = (uncached * price_in + write * price_write + read * price_read) / 1e6
    billed = uncached + write * price_write / price_in + read * price_read / price_in
    return {
        "calls": len(calls),
        "prompt": prompt,
        "read": read,
        "write": write,
        "billed": billed,
        "ratio": billed / prompt,
        "dollars": dollars,
        "uncached_dollars": prompt * price_in / 1e6,
    }


LANGGRAPH_DEFAULT = "LangGraph default"
LANGGRAPH_CACHING = "LangGraph + AnthropicPromptCachingMiddleware"


async def run(turns: int = TURNS, langgraph: bool = True) -> dict[str, dict[str, float]]:
    """Each provider with caching off and on; with ``langgraph``, LangGraph's two rows after."""
    config = FakeLLMConfig(ttft_ms=0, tokens_per_second=100_000, reply_tokens=5)
    results: dict[str, dict[str, float]] = {}
    if langgraph:
        ensure_peer_venv()  # made on first use (a download), as benchmarks.peer_langgraph does
    with FakeLLMServer(config) as fake:
        for provider in PROVIDERS:
            for caching in (False, True):
                results[f"{provider} {'on' if caching else 'off'}"] = await conversation(
                    provider, caching, fake, turns
                )
        if langgraph:
            for caching, name in ((False, LANGGRAPH_DEFAULT), (True, LANGGRAPH_CACHING)):
                results[name] = await asyncio.to_thread(langgraph_conversation, caching, fake, turns)
    if LANGGRAPH_DEFAULT in results:
        baseline = results[LANGGRAPH_DEFAULT]["dollars"]
        for name, r in results.items():
            if not name.startswith("openai"):  # Anthropic's prices: comparable with LangGraph's
                r["x_less_than_langgraph"] = baseline / r["dollars"]
    return results


def render(results: dict[str, dict[str, float]]) -> str:
    peer = LANGGRAPH_DEFAULT in results
    lines = [
        "## Prompt caching on the standard agent conversation (issue 27)\n",
        "Command: `./dev python -m benchmarks.prompt_caching` (10 turns on one session, ~3,000-token "
        "system prompt, three tools, one or two tool calls per turn; through the turn worker and the real "
        "SDKs (boto3 for Bedrock) against `avm fake-llm`, which prices its prompt cache as each provider "
        "documents it; tokens are the fake's words; deterministic, one run).\n",
        "| provider, caching | model calls | prompt tokens | cache reads | cache writes "
        "| billed input-equivalent | ratio to uncached | input $ (list price) |"
        + (" x less input spend than LangGraph default |" if peer else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if peer else ""),
    ]
    for name, r in results.items():
        less = f" {r['x_less_than_langgraph']:.2f}x |" if "x_less_than_langgraph" in r else " - |"
        lines.append(
            f"| {name} | {int(r['calls'])} | {int(r['prompt']):,} | {int(r['read']):,} | {int(r['write']):,} "
            f"| {r['billed']:,.0f} | {r['ratio']:.3f} "
            f"| ${r['dollars']:.4f} (uncached ${r['uncached_dollars']:.4f}) |" + (less if peer else "")
        )
    note = (
        "\nBilled input-equivalent: uncached + 1.25 x writes + 0.1 x reads (Anthropic, Claude Sonnet 4.6 at "
        "$3 / $3.75 / $0.30 per MTok, Claude Sonnet 4.5 on Bedrock alike); uncached + 0.25 x cached "
        "(gpt-4.1-mini, $0.40 / $0.10). Goal: "
        "Anthropic <= 0.30 of uncached. 21 model calls: the turns' 20 and one compaction summary (the "
        "server default summarises past 8,000 estimated tokens; a one-off request, never cached). The "
        "summary follows the image's prompt after its breakpoint: the turn after it reads the prompt and "
        "writes the summary and the messages again (before that split, 0.223 instead of 0.169). OpenAI "
        "caches stable prefixes whatever the request says: off only drops `prompt_cache_key`."
    )
    peer_note = (
        " LangGraph: `langchain.agents.create_agent` (LangGraph's prebuilt ReAct loop, an `InMemorySaver` "
        "thread) with `ChatAnthropic` at its defaults (non-streamed requests, no breakpoints), then with "
        "`AnthropicPromptCachingMiddleware()` at its defaults (breakpoints on the system prompt and the last "
        "tool, and the API's top-level automatic `cache_control` on the request's last block), in its own "
        "venv against the same fake and script; usage as LangChain recorded it (checked against the "
        "fake's counters). It compacts nothing: 20 calls. x less input spend: LangGraph default's input $ "
        "over the row's (Anthropic-priced rows)."
    )
    lines.append(note + (peer_note if peer else "") + "\n")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=TURNS, help="turns of the conversation")
    parser.add_argument("--no-langgraph", action="store_true", help="AgentVM's rows only")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.turns, langgraph=not args.no_langgraph))))


if __name__ == "__main__":
    main()
