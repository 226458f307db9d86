"""``RandomIds``: opaque ids that sort by creation and reveal nothing of anyone else's activity."""

from __future__ import annotations

import re

from agentvm.runtime import RandomIds


class Clock:
    def __init__(self) -> None:
        self.ms = 1_764_000_000_000

    def __call__(self) -> int:
        return self.ms


def test_ids_have_the_agentx_shape():
    assert re.fullmatch(r"img_[0-9a-z]+_[0-9a-z]{10}", RandomIds().new("img"))


def test_ids_made_in_the_same_millisecond_sort_in_creation_order():
    ids = RandomIds(now_ms=Clock())
    made = [ids.new("msg") for _ in range(1000)]
    assert sorted(made) == made and len(set(made)) == 1000


def test_ids_sort_by_time_across_milliseconds():
    clock = Clock()
    ids = RandomIds(now_ms=clock)
    made = []
    for _ in range(50):
        made.append(ids.new("msg"))
        clock.ms += 1
    assert sorted(made) == made


def test_an_id_does_not_reveal_how_many_ids_were_made_before_it():
    # The same random source, and 0 or 5,000 ids (another tenant's activity) made in an earlier
    # millisecond: the next id is the same, one fresh draw, so nothing counts along.
    assert _next_id_after(0) == _next_id_after(5000)


def _next_id_after(others: int) -> str:
    draws: list[int] = []

    def randbelow(n: int) -> int:
        draws.append(n)
        return n // 3

    clock = Clock()
    ids = RandomIds(now_ms=clock, randbelow=randbelow)
    for _ in range(others):
        ids.new("sess")
    clock.ms += 1
    draws.clear()
    made = ids.new("sess")
    assert draws == [36**10 // 2]  # one draw from the whole space
    return made
