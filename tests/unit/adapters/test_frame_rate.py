"""``FrameRate``: the token bucket that bounds the frames one local WebSocket may send."""

from __future__ import annotations

from agentvm.adapters.local.frame_rate import FrameRate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_passes_then_frames_are_refused_until_tokens_refill():
    clock = Clock()
    rate = FrameRate(8, burst=5, clock=clock)
    assert [rate.take() for _ in range(7)] == [True] * 5 + [False] * 2
    clock.t += 0.125  # one token at 8 per second
    assert [rate.take(), rate.take()] == [True, False]


def test_an_idle_connection_saves_no_more_than_one_burst():
    clock = Clock()
    rate = FrameRate(10, burst=5, clock=clock)
    clock.t += 3600
    assert sum(rate.take() for _ in range(50)) == 5
