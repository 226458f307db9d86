"""A batched subscriber's cadence: text once per window, opening frames with the first text,
anything else at once, and a wake-up when a wait ends."""

import asyncio

from agentvm.streaming.batch_cadence import BatchCadence


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def _cadence(clock: _Clock, woken: list[float], first_s: float = 2.0, max_s: float = 8.0) -> BatchCadence:
    return BatchCadence(first_s=first_s, max_s=max_s, clock=clock, wake=lambda: woken.append(clock.now))


async def test_text_goes_once_per_window_and_the_window_doubles_up_to_its_longest():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken)
    assert cadence.due("c1", "urgent", 100.0)  # the first text: at once, a 2 s window opens
    assert not cadence.due("c1", "text", 101.0)
    assert cadence.due("c1", "text", 102.0)  # window over: sent, the next one is 4 s
    assert not cadence.due("c1", "text", 105.9)
    assert cadence.due("c1", "text", 106.0)  # then 8 s, and never longer
    assert cadence.due("c1", "text", 114.0)
    assert not cadence.due("c1", "text", 121.9)
    assert cadence.due("c1", "text", 122.0)
    cadence.close()


async def test_a_messages_opening_frames_wait_for_its_first_text_the_longest_window_at_most():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken)
    assert not cadence.due("c1", "start", 100.0)
    assert not cadence.due("c1", "start", 107.9)
    assert cadence.due("c1", "start", 108.0)  # no text came: they go after max_s
    cadence.close()


async def test_anything_urgent_goes_at_once_with_what_waited():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken)
    assert not cadence.due("c1", "start", 100.0)
    assert cadence.due("c1", "urgent", 100.1)  # the first text (or a tool event, the end)
    assert cadence.due("c1", "urgent", 100.2)
    cadence.close()


async def test_connections_keep_their_own_windows():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken)
    assert cadence.due("c1", "urgent", 100.0)
    assert cadence.due("c2", "urgent", 101.0)
    assert cadence.due("c1", "text", 102.0)
    assert not cadence.due("c2", "text", 102.0)  # its window started a second later
    cadence.close()


async def test_a_wait_wakes_the_sink_once_when_the_earliest_wait_ends():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken, first_s=0.05, max_s=0.05)
    assert cadence.due("c1", "urgent", 100.0)
    assert cadence.due("c2", "urgent", 100.0)
    assert not cadence.due("c1", "text", 100.0)
    assert not cadence.due("c2", "text", 100.0)  # same end: one timer
    await asyncio.sleep(0.2)
    assert woken == [100.0]


async def test_a_closed_cadence_wakes_nobody():
    clock, woken = _Clock(), []
    cadence = _cadence(clock, woken, first_s=0.05, max_s=0.05)
    assert cadence.due("c1", "urgent", 100.0)
    assert not cadence.due("c1", "text", 100.0)
    cadence.close()
    await asyncio.sleep(0.2)
    assert woken == []


async def test_opening_frames_may_wait_longer_than_a_live_text_window():
    clock, woken = _Clock(), []
    cadence = BatchCadence(
        first_s=0.25, max_s=0.25, start_wait_s=2.0, clock=clock, wake=lambda: woken.append(clock.now)
    )
    assert not cadence.due("c1", "start", 100.0)
    assert not cadence.due("c1", "start", 101.9)  # no text yet: message_start waits for it
    assert cadence.due("c1", "urgent", 101.95)  # the first text: at once, with what waited
    assert not cadence.due("c1", "text", 102.1)
    assert cadence.due("c1", "text", 102.2)  # then text every 0.25 s
    assert cadence.due("c1", "text", 102.45)
    cadence.close()
