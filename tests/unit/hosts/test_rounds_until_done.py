"""The scheduled functions' rounds (wait sweeper, schedule sweeper, webhook sender): they stop on
an empty round, at ``max_rounds`` and when the invocation's time left is down to the reserve."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentvm.hosts.aws import rounds_until_done

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class FakeContext:
    """A Lambda context whose time left drops by ``per_call_ms`` each time it is read."""

    def __init__(self, left_ms: int, per_call_ms: int) -> None:
        self.left_ms = left_ms
        self.per_call_ms = per_call_ms

    def get_remaining_time_in_millis(self) -> int:
        left = self.left_ms
        self.left_ms -= self.per_call_ms
        return left


def rounds_of(results: list[int]) -> tuple[list[int], Callable[[], Awaitable[int]]]:
    ran: list[int] = []

    async def round_() -> int:
        made = results[len(ran)]
        ran.append(made)
        return made

    return ran, round_


def test_rounds_stop_at_the_first_round_that_did_nothing() -> None:
    ran, round_ = rounds_of([3, 2, 0, 5])
    assert asyncio.run(rounds_until_done(round_)) == 5
    assert ran == [3, 2, 0]


def test_rounds_stop_at_max_rounds() -> None:
    ran, round_ = rounds_of([1, 1, 1, 1])
    assert asyncio.run(rounds_until_done(round_, max_rounds=2)) == 2
    assert ran == [1, 1]


def test_no_round_starts_with_the_reserve_or_less_left() -> None:
    ran, round_ = rounds_of([4, 4, 4, 4])
    context = FakeContext(left_ms=60_000, per_call_ms=15_000)  # 60 s, 45 s, 30 s, then 15 s left
    done = asyncio.run(rounds_until_done(round_, context=context, reserve_ms=20_000))
    assert (done, ran) == (12, [4, 4, 4])


def test_an_invocation_already_at_its_reserve_runs_no_round() -> None:
    ran, round_ = rounds_of([4])
    context = FakeContext(left_ms=10_000, per_call_ms=0)
    assert asyncio.run(rounds_until_done(round_, context=context, reserve_ms=20_000)) == 0
    assert ran == []
