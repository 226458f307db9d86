"""Per-key rate limits taken in leases (``security/ratelimit.py``): several limiters (processes: Lambda
execution environments, ``avm serve`` workers) share one real counter store (SQLite, and DynamoDB on
moto), on a clock the test moves."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.errors import RateLimited
from agentvm.security.auth import Principal
from agentvm.security.ratelimit import RateLimiter
from tests.contract.moto_table import backends
from tests.security_harness import ManualClock

MINUTE = 60_000


class CountedWrites:
    """The real counters, with the number of ``lease`` calls (one conditional write each)."""

    def __init__(self, counters: Any) -> None:
        self.counters = counters
        self.writes = 0

    async def lease(self, *args: Any, **kw: Any) -> Any:
        self.writes += 1
        return await self.counters.lease(*args, **kw)

    async def incr(self, *args: Any, **kw: Any) -> Any:
        self.writes += 1
        return await self.counters.incr(*args, **kw)

    async def get(self, key: str) -> dict[str, int]:
        return await self.counters.get(key)


@pytest.fixture(params=backends(SqliteCounters, DynamoDbCounters))
async def store(request, tmp_path):
    async with request.param(tmp_path) as instance:
        yield CountedWrites(instance)


@pytest.fixture
def clock() -> ManualClock:
    # The start of the minute after next: the counters expire items by the real time, so the
    # windows the tests use end a minute or more from now.
    return ManualClock(now_ms=(int(time.time() * 1000) // MINUTE + 2) * MINUTE)


def key(limit: int | None = None, key_id: str = "key_1") -> Principal:
    return Principal("acme", key_id, frozenset({"client"}), rate_limit_per_minute=limit)


def limiter(store: CountedWrites, clock: ManualClock, **kw: Any) -> RateLimiter:
    kw.setdefault("per_minute", 600)
    return RateLimiter(store, clock, **kw)


async def admitted(rl: RateLimiter, principal: Principal, n: int) -> int:
    ok = 0
    for _ in range(n):
        try:
            await rl.hit(principal)
            ok += 1
        except RateLimited:
            pass
    return ok


async def test_a_process_admits_a_lease_of_requests_with_one_write(store, clock):
    rl = limiter(store, clock, lease_max=10)
    assert await admitted(rl, key(), 7) == 7  # a session's frames: one lease of 10 (600 // 20 = 30, capped)
    assert store.writes == 1
    assert await admitted(rl, key(), 13) == 13
    assert store.writes == 2
    minute = clock.ms // MINUTE
    assert await store.get(f"rate#key_1#{minute}") == {"n": 20}  # leased, not only used


async def test_lease_max_1_writes_once_per_request_and_refuses_exactly_past_the_limit(store, clock):
    a, b = limiter(store, clock, lease_max=1), limiter(store, clock, lease_max=1)
    assert await admitted(a, key(5), 3) == 3
    assert await admitted(b, key(5), 2) == 2
    assert store.writes == 5
    with pytest.raises(RateLimited):
        await a.hit(key(5))
    with pytest.raises(RateLimited):
        await b.hit(key(5))
    assert await store.get(f"rate#key_1#{clock.ms // MINUTE}") == {"n": 5}


async def test_many_processes_never_admit_more_than_the_keys_limit_in_a_window(store, clock):
    processes = [limiter(store, clock, lease_max=10) for _ in range(6)]
    rng = random.Random(7)
    ok = 0
    for _ in range(700):
        try:
            await rng.choice(processes).hit(key(300))
            ok += 1
        except RateLimited:
            pass
    # Never over. Here every process keeps getting requests after the window is full, so each uses
    # up its leased requests before it refuses: none is left unused.
    assert ok == 300
    assert store.writes < 60  # leases of at most 10 (then smaller near the end), and 6 refusals


async def test_concurrent_requests_of_many_processes_never_go_over_the_limit(store, clock):
    processes = [limiter(store, clock, lease_max=8) for _ in range(5)]

    async def one(i: int) -> bool:
        try:
            await processes[i % 5].hit(key(160))
            return True
        except RateLimited:
            return False

    results = await asyncio.gather(*(one(i) for i in range(400)))
    assert sum(results) <= 160
    assert (await store.get(f"rate#key_1#{clock.ms // MINUTE}"))["n"] <= 160


async def test_the_refusal_has_the_limit_and_the_end_of_the_window(store, clock):
    clock.advance(12.5)
    rl = limiter(store, clock)
    assert await admitted(rl, key(3), 3) == 3
    with pytest.raises(RateLimited) as refused:
        await rl.hit(key(3))
    reset = (clock.ms // MINUTE + 1) * MINUTE
    assert refused.value.limit == 3 and refused.value.reset_at_ms == reset
    assert "rate limit of 3 requests per minute reached for this API key" in refused.value.message


async def test_a_process_that_saw_the_window_full_refuses_without_writing_until_it_ends(store, clock):
    rl = limiter(store, clock)
    assert await admitted(rl, key(2), 2) == 2
    assert await admitted(rl, key(2), 50) == 0
    assert store.writes == 2  # the second lease's new total showed the window full: no more writes
    clock.advance(60)
    assert await admitted(rl, key(2), 2) == 2


async def test_requests_can_be_refused_while_another_process_holds_unused_leased_requests(store, clock):
    # The price of leases: under-admission until the window ends, never over-admission.
    a, b = limiter(store, clock, lease_max=10), limiter(store, clock, lease_max=10)
    await a.hit(key(40))  # leases 2 (40 // 20)
    assert await admitted(b, key(40), 60) == 38  # b takes what is left, refused while a holds one
    assert await admitted(a, key(40), 5) == 1  # a's last leased request
    assert await admitted(b, key(40), 1) == 0


async def test_leases_shrink_as_the_window_fills(store, clock):
    rl = limiter(store, clock, lease_max=25)
    window = f"rate#key_1#{clock.ms // MINUTE}"
    totals = []
    for _ in range(100):
        await rl.hit(key(100))  # leases of 5 (100 // 20) until a quarter of what is left is smaller
        totals.append((await store.get(window))["n"])
    leases = [b - a for a, b in zip([0, *totals], totals, strict=False) if b != a]
    assert leases[:5] == [5] * 5
    assert leases[-4:] == [1, 1, 1, 1]  # the window's last requests one at a time
    assert sum(leases) == 100


async def test_a_new_window_starts_new_leases_and_drops_the_old_ones(store, clock):
    rl = limiter(store, clock, lease_max=10)
    for i in range(50):
        await rl.hit(key(key_id=f"key_{i}"))
    assert len(rl._leases) == 50
    clock.advance(60)
    await rl.hit(key(key_id="key_new"))
    assert list(rl._leases) == ["rate#key_new"]  # memory: the keys of the current window only
    assert await admitted(rl, key(key_id="key_0"), 10) == 10


async def test_a_lowered_key_limit_voids_the_leased_requests(store, clock):
    rl = limiter(store, clock, lease_max=10)
    await rl.hit(key(400))  # leases 10
    assert await admitted(rl, key(3), 5) == 0  # the window already counts 10 > 3


async def test_unauthenticated_frames_are_counted_exactly_one_write_each(store, clock):
    rl = limiter(store, clock, lease_max=10, unauthenticated_per_minute=30)
    for _ in range(30):
        await rl.hit_unauthenticated("conn_1")
    assert store.writes == 30
    with pytest.raises(RateLimited) as refused:
        await rl.hit_unauthenticated("conn_1")
    assert refused.value.limit == 30
    assert "for a connection that has not authenticated" in refused.value.message


async def test_an_unlimited_key_writes_nothing(store, clock):
    rl = limiter(store, clock)
    assert await admitted(rl, key(0), 100) == 100
    assert store.writes == 0


async def test_the_entries_a_process_keeps_are_bounded_and_a_dropped_one_never_admits_more(
    store, clock, monkeypatch
):
    monkeypatch.setattr("agentvm.security.ratelimit._MAX_LEASES", 3)
    rl = limiter(store, clock, lease_max=10)
    for i in range(8):
        await rl.hit(key(40, key_id=f"key_{i}"))  # leases of 2
    assert len(rl._leases) == 3
    # key_0's entry (and its unused leased request) was dropped: under-admission, never over
    assert await admitted(rl, key(40, key_id="key_0"), 60) == 38
