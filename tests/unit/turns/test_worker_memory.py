"""Smoke test of the turn worker's memory measurement (benchmarks/worker_memory.py), which
template.yaml's TurnWorkerMemoryMb rests on: it measures a real init, and a real batch on moto."""

from __future__ import annotations

import pytest

from benchmarks import worker_memory

pytestmark = pytest.mark.aws


def test_the_workers_init_and_a_batch_are_measured_and_added_up():
    m = worker_memory.measure(batch=2)
    assert 0 < m.bare_mb < m.init_mb <= m.sdks_mb  # the SDKs a turn loads come on top of the init
    assert m.batch_heap_mb > 0
    assert m.peak_mb == pytest.approx(m.sdks_mb + m.batch_heap_mb + worker_memory.LAMBDA_RUNTIME_MB)
    text = worker_memory.render(m, 192)
    assert "192 MB" in text and "Anthropic" in text
