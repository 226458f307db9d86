"""Smoke test of benchmarks/prompt_caching.py at two turns (the figures are BENCHMARKS.md's, not here).

AgentVM's rows always run (the fake provider on loopback). LangGraph's rows run in the peer's own
venv (``.bench/lgvenv``, made by ``./dev python -m benchmarks.prompt_caching`` or
``benchmarks.peer_langgraph``); without it that test skips: the suite never downloads it.
"""

from __future__ import annotations

import pytest

from benchmarks import prompt_caching
from benchmarks.peer_langgraph import peer_venv_ready


async def test_agentvm_rows_cache_what_caching_off_pays_in_full():
    results = await prompt_caching.run(turns=2, langgraph=False)

    assert set(results) == {f"{p} {s}" for p in prompt_caching.PROVIDERS for s in ("off", "on")}
    for provider in ("anthropic", "bedrock"):
        off, on = results[f"{provider} off"], results[f"{provider} on"]
        assert off["calls"] == on["calls"] == 4  # two turns of a tool call and an answer
        assert (off["read"], off["write"], off["ratio"]) == (0, 0, 1.0)
        assert on["read"] > 0 and on["write"] > 0 and on["ratio"] < 1.0
    assert "LangGraph" not in prompt_caching.render(results)


@pytest.mark.skipif(not peer_venv_ready(), reason="the LangGraph venv (.bench/lgvenv) is not installed")
async def test_langgraph_rows_run_the_same_conversation_with_and_without_its_middleware():
    results = await prompt_caching.run(turns=2)

    default = results[prompt_caching.LANGGRAPH_DEFAULT]
    cached = results[prompt_caching.LANGGRAPH_CACHING]
    assert default["calls"] == cached["calls"] == 4
    assert default["prompt"] == cached["prompt"]  # the same requests, only the breakpoints differ
    assert (default["read"], default["write"]) == (0, 0)
    assert cached["read"] > 0 and cached["dollars"] < default["dollars"]
    assert default["x_less_than_langgraph"] == 1.0
    assert results["anthropic on"]["x_less_than_langgraph"] > 1.0
    assert "x_less_than_langgraph" not in results["openai on"]
    assert prompt_caching.LANGGRAPH_CACHING in prompt_caching.render(results)
