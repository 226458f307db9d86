from __future__ import annotations

import asyncio
import logging

import pytest

from agentvm.agent.retry import (
    OVERLOADED,
    RATE_LIMITED,
    UNAVAILABLE,
    RetryingModelClient,
    report_retries_to,
    retry_reason,
)
from agentvm.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from agentvm.llm import ChatTurn, ModelRequest, ModelStart, ModelStop, TextDelta

REQUEST = ModelRequest(model="m", messages=(ChatTurn("user", "hi"),))
REPLY = [ModelStart("msg_1", "m"), TextDelta("hello"), ModelStop("end_turn", 3, 1)]


class FakeTime:
    """A clock that only moves when the retry loop sleeps (or an attempt says it took time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ScriptedClient:
    """Each call plays the next script: events to yield, then optionally an error to raise."""

    def __init__(self, *scripts: tuple[list, Exception | None], attempt_s: float = 0.0, time=None) -> None:
        self.scripts = list(scripts)
        self.calls = 0
        self.closed = 0
        self._attempt_s = attempt_s
        self._time = time

    async def stream(self, request):
        events, error = self.scripts[min(self.calls, len(self.scripts) - 1)]
        self.calls += 1
        try:
            if self._time is not None:
                self._time.now += self._attempt_s
            for event in events:
                yield event
            if error is not None:
                raise error
        finally:
            self.closed += 1


def _retrying(inner, fake_time: FakeTime, rand: float = 0.0, **options) -> RetryingModelClient:
    return RetryingModelClient(
        inner, sleep=fake_time.sleep, rand=lambda: rand, clock=fake_time.clock, **options
    )


async def _collect(client: RetryingModelClient) -> list:
    return [event async for event in client.stream(REQUEST)]


async def test_rate_limit_is_retried_after_retry_after_then_succeeds():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderRateLimited("slow down", retry_after=3.0)), (REPLY, None))

    events = await _collect(_retrying(inner, fake_time, rand=0.5))

    assert events == REPLY
    assert inner.calls == 2
    assert fake_time.sleeps == [3.0]  # retry_after beats the 0.25 s jittered backoff


async def test_backoff_is_exponential_full_jitter_and_capped():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderUnavailable("down")))
    client = _retrying(inner, fake_time, rand=1.0, max_attempts=5, base_delay_s=0.5, max_delay_s=2.0)

    with pytest.raises(ProviderUnavailable):
        await _collect(client)

    assert fake_time.sleeps == [0.5, 1.0, 2.0, 2.0]


async def test_jitter_scales_the_backoff():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderUnavailable("down")))

    with pytest.raises(ProviderUnavailable):
        await _collect(_retrying(inner, fake_time, rand=0.5, max_attempts=3, base_delay_s=1.0))

    assert fake_time.sleeps == [0.5, 1.0]


async def test_attempts_are_bounded_and_the_last_error_is_raised():
    fake_time = FakeTime()
    last = ProviderUnavailable("third failure")
    inner = ScriptedClient(
        ([], ProviderUnavailable("first")), ([], ProviderRateLimited("second", retry_after=0.1)), ([], last)
    )

    with pytest.raises(ProviderUnavailable) as raised:
        await _collect(_retrying(inner, fake_time, max_attempts=3))

    assert raised.value is last
    assert inner.calls == 3
    assert len(fake_time.sleeps) == 2


async def test_total_time_is_bounded_by_max_total():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderRateLimited("wait", retry_after=10.0)))

    with pytest.raises(ProviderRateLimited):
        await _collect(_retrying(inner, fake_time, max_attempts=10, max_total_s=25.0))

    assert fake_time.sleeps == [10.0, 10.0]  # a third sleep would end at 30 s > 25 s
    assert inner.calls == 3


async def test_time_spent_in_attempts_counts_towards_max_total():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderUnavailable("slow failure")), attempt_s=20.0, time=fake_time)

    with pytest.raises(ProviderUnavailable):
        await _collect(_retrying(inner, fake_time, rand=1.0, max_total_s=30.0))

    assert inner.calls == 2
    assert fake_time.sleeps == [0.5]


async def test_no_retry_once_output_has_started():
    fake_time = FakeTime()
    inner = ScriptedClient(([ModelStart("msg_1", "m"), TextDelta("par")], ProviderUnavailable("cut")))
    client = _retrying(inner, fake_time)
    received = []

    with pytest.raises(ProviderUnavailable):
        async for event in client.stream(REQUEST):
            received.append(event)

    assert received == [ModelStart("msg_1", "m"), TextDelta("par")]
    assert inner.calls == 1
    assert fake_time.sleeps == []


async def test_non_retryable_errors_propagate_at_once():
    fake_time = FakeTime()
    inner = ScriptedClient(([], ProviderRejected("bad key")))

    with pytest.raises(ProviderRejected):
        await _collect(_retrying(inner, fake_time))

    assert inner.calls == 1
    assert fake_time.sleeps == []


async def test_closing_early_closes_the_inner_stream():
    fake_time = FakeTime()
    inner = ScriptedClient((REPLY, None))
    stream = _retrying(inner, fake_time).stream(REQUEST)

    assert await anext(stream) == REPLY[0]
    await stream.aclose()

    assert inner.closed == 1


async def test_each_retry_is_logged_with_the_error_code(caplog):
    fake_time = FakeTime()
    inner = ScriptedClient(
        ([], ProviderRateLimited("anthropic: rate limited (429)", retry_after=1.0)), (REPLY, None)
    )

    with caplog.at_level(logging.WARNING, logger="agentvm.retry"):
        await _collect(_retrying(inner, fake_time))

    [record] = [r for r in caplog.records if r.name == "agentvm.retry"]
    assert "rate_limited" in record.getMessage()
    assert "retry 1 of 3" in record.getMessage()


async def test_the_consumers_listener_hears_each_retry_before_its_wait():
    fake_time = FakeTime()
    heard: list[tuple[int, int, str, int]] = []
    inner = ScriptedClient(
        ([], ProviderRateLimited("anthropic: rate limited (429 rate_limit_error)", retry_after=1.5)),
        ([], ProviderUnavailable("anthropic: unavailable (529 overloaded_error)")),
        (REPLY, None),
    )

    async def consume() -> list:
        report_retries_to(lambda attempt, ms, why: heard.append((attempt, ms, why, len(fake_time.sleeps))))
        return await _collect(_retrying(inner, fake_time, rand=0.5))

    assert await asyncio.create_task(consume()) == REPLY
    # attempt about to be made, the wait in ms (Retry-After wins over the jitter), the reason, and
    # how many waits had happened when it was heard (none of this retry's own)
    assert heard == [(2, 1500, "rate_limited", 0), (3, 500, "overloaded", 1)]


async def test_a_stream_consumed_in_another_task_reports_to_no_one():
    heard: list[int] = []

    async def listening() -> None:
        report_retries_to(lambda attempt, ms, why: heard.append(attempt))

    await asyncio.create_task(listening())  # its context var dies with its task
    inner = ScriptedClient(([], ProviderUnavailable("openai: unavailable (503)")), (REPLY, None))
    assert await _collect(_retrying(inner, FakeTime())) == REPLY
    assert heard == []


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ProviderRateLimited("openai: rate limited (429)"), RATE_LIMITED),
        (ProviderUnavailable("anthropic: unavailable (529 overloaded_error)"), OVERLOADED),
        (ProviderUnavailable("anthropic: unavailable (529)"), OVERLOADED),
        (ProviderUnavailable("openai: unavailable (503 server_error)"), UNAVAILABLE),
        (ProviderUnavailable("model stream failed: ReadTimeout"), UNAVAILABLE),
    ],
)
def test_the_reason_is_a_code_from_the_errors_kind(error, reason):
    assert retry_reason(error) == reason
