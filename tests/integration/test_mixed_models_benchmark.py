"""Smoke test of benchmarks/mixed_models.py on a few sessions (the figures are BENCHMARKS.md's)."""

from __future__ import annotations

from benchmarks import mixed_models


async def test_routing_sends_short_tool_free_turns_to_the_fast_model_and_costs_less():
    results = await mixed_models.run(sessions=6)

    plain, routed = results["image's model only"], results["fastModel Haiku 5.5"]
    assert plain["turns"] == routed["turns"] == 18
    assert plain["routed"] == 0 and set(plain["calls"]) == {mixed_models.MODEL}
    assert 0 < routed["routed"] < routed["turns"]  # long first messages and tool sessions stay
    assert routed["calls"][mixed_models.FAST_MODEL] > 0
    assert sum(routed["calls"].values()) == sum(plain["calls"].values())  # the same script
    assert routed["dollars"] < plain["dollars"]
    assert "-" in mixed_models.render(results, 6)
