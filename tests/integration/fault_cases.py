"""Provider faults, one case per kind, played through the fake provider on both hosts.

Each case queues faults on the fake, runs one turn and says what must follow: how many model
requests the fake sees (bounded by the retry policy), how long the turn may take (Retry-After
honoured, timeouts short), and how the turn ends. A second turn, with no fault left, must then
complete: the session stays usable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, reply_tokens

PROVIDER_KEY = "sk-test-fault-key-0123456789"
MODELS = {"anthropic": "anthropic/claude-haiku-4-5", "openai": "openai/gpt-4o-mini"}
FAKE = {"ttft_ms": 5, "tokens_per_second": 2000, "reply_tokens": 12, "input_tokens": 42}
MAX_ATTEMPTS = 3
TIMEOUT_S = 1.0  # the SDK timeout: a provider that says nothing for this long has failed (not
# shorter: on a loaded 2-core CI machine a healthy local reply can take a few hundred ms to start)
RETRY_BUDGET_S = 5.0  # provider_retry_max_total_s: room for MAX_ATTEMPTS timeouts of TIMEOUT_S


def fake_config() -> FakeLLMConfig:
    return FakeLLMConfig(**FAKE)


def settings_for(fake: Any) -> Settings:
    return Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(PROVIDER_KEY),
        anthropic_base_url=fake.base_url,
        openai_api_key=SecretStr(PROVIDER_KEY),
        openai_base_url=fake.openai_base_url,
        provider_timeout_s=TIMEOUT_S,
        provider_max_attempts=MAX_ATTEMPTS,
        provider_retry_base_ms=10,
        provider_retry_max_total_s=RETRY_BUDGET_S,
    )


@dataclass(frozen=True)
class Case:
    faults: list[dict[str, Any]]
    requests: int  # model requests the fake must see for the turn
    code: str | None = None  # None: the turn completes; else the error_occurred code
    partial: bool = False  # text streamed before the failure, kept as an assistant message
    min_s: float = 0.0
    max_s: float = 2.0


_STALL = {"kind": "hang", "duration": 10}
CASES: dict[str, Case] = {
    # 429: the Retry-After header is waited out, then the retry succeeds
    "429-retry-after-honoured": Case([{"kind": "429", "retry_after": 0.4}], requests=2, min_s=0.4),
    # 429 on every try: bounded by provider_max_attempts, then the error reaches the client
    "429-until-the-last-try": Case(
        [{"kind": "429", "retry_after": 0.01}] * MAX_ATTEMPTS, MAX_ATTEMPTS, "rate_limited"
    ),
    # a Retry-After longer than the whole retry budget: fail at once rather than hang the turn
    "429-retry-after-beyond-the-budget": Case(
        [{"kind": "429", "retry_after": 30}], requests=1, code="rate_limited", max_s=1.0
    ),
    "500-until-the-last-try": Case([{"kind": "500"}] * MAX_ATTEMPTS, MAX_ATTEMPTS, "provider_unavailable"),
    "500-then-ok": Case([{"kind": "500"}], requests=2),
    "overloaded-until-the-last-try": Case(
        [{"kind": "overloaded"}] * MAX_ATTEMPTS, MAX_ATTEMPTS, "provider_unavailable"
    ),
    "overloaded-then-ok": Case([{"kind": "overloaded"}], requests=2),
    # no response headers within the SDK timeout, on every try
    "timeout-until-the-last-try": Case(
        [_STALL] * MAX_ATTEMPTS,
        MAX_ATTEMPTS,
        "provider_unavailable",
        min_s=MAX_ATTEMPTS * TIMEOUT_S,
        max_s=MAX_ATTEMPTS * TIMEOUT_S + 1.5,
    ),
    # (max_s: well under the 10 s hang, with room for a loaded 2-core CI machine: 2.25 s was seen)
    "timeout-then-ok": Case([_STALL], requests=2, min_s=TIMEOUT_S, max_s=TIMEOUT_S + 4.0),
    # once text has streamed, a retry would repeat it: the partial text is kept, the error follows
    "cut-mid-stream": Case([{"kind": "cut", "after_tokens": 3}], 1, "provider_unavailable", partial=True),
    "error-event-mid-stream": Case(
        [{"kind": "stream_error", "after_tokens": 3}], 1, "provider_unavailable", partial=True
    ),
    "stall-mid-stream": Case(
        [{**_STALL, "after_tokens": 3}], 1, "provider_unavailable", partial=True, min_s=TIMEOUT_S
    ),
}
CASE_PARAMS = [pytest.param(name, id=name) for name in CASES]
PROVIDER_PARAMS = [pytest.param(name, id=name) for name in MODELS]


# The reason code a retry of each fault kind is announced with (``model_retry``): Anthropic says
# overloaded with its own status (529), OpenAI with a plain 503.
RETRY_REASON = {
    "429": "rate_limited",
    "overloaded": "overloaded",
    "500": "unavailable",
    "hang": "unavailable",
}
OPENAI_RETRY_REASON = {**RETRY_REASON, "overloaded": "unavailable"}


def check_retries(case: Case, events: list[dict[str, Any]], provider: str = "anthropic") -> None:
    """Each retry was announced before it was made, with its attempt, wait and the fault's reason,
    and never with the provider's words; none once text has streamed (no retry then)."""
    types = [e["type"] for e in events]
    retries = [e["data"] for e in events if e["type"] == "model_retry"]
    if case.partial:
        assert retries == []
        return
    assert [r["attempt"] for r in retries] == list(range(2, case.requests + 1))
    reasons = OPENAI_RETRY_REASON if provider == "openai" else RETRY_REASON
    assert [r["reason"] for r in retries] == [reasons[f["kind"]] for f in case.faults[: len(retries)]]
    for retry, fault in zip(retries, case.faults, strict=False):
        assert set(retry) == {"attempt", "delayMs", "reason"}
        if fault["kind"] == "429":  # the provider's Retry-After is the least the server waits
            assert retry["delayMs"] >= round(fault["retry_after"] * 1000)
    if retries and "message_start" in types:  # announced while waiting, before the reply began
        assert max(i for i, t in enumerate(types) if t == "model_retry") < types.index("message_start")


def check_turn(
    case: Case, events: list[dict[str, Any]], elapsed_s: float, requests: int, provider: str = "anthropic"
) -> None:
    """The first turn's session events, its duration and the model requests the fake saw."""
    types = [e["type"] for e in events]
    assert requests == case.requests, (requests, types)
    check_retries(case, events, provider)
    assert case.min_s <= elapsed_s <= case.max_s, elapsed_s
    text = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    if case.code is None:
        assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
        assert text == "".join(reply_tokens(FAKE["reply_tokens"]))
        return
    expected = ["error_message", "error_occurred"]
    if case.partial:
        expected = ["assistant_message", *expected]
        assert text == "".join(reply_tokens(3))
        assert events[types.index("assistant_message")]["data"]["content"] == [{"type": "text", "text": text}]
    else:
        assert "message_start" not in types and text == ""
    assert types[-len(expected) :] == expected
    assert "conversation_end" not in types
    occurred = events[-1]["data"]
    assert occurred["code"] == case.code and occurred["recoverable"] is True
    assert events[-2]["data"]["errorCode"] == case.code


def expected_history(case: Case) -> list[str]:
    """Subtypes of the stored history after the faulty turn and a good one."""
    first = (
        ["user", "assistant"]
        if case.code is None
        else ["user", "assistant", "error"]
        if case.partial
        else ["user", "error"]
    )
    return [*first, "user", "assistant"]


__all__ = [
    "CASES",
    "CASE_PARAMS",
    "MODELS",
    "PROVIDER_KEY",
    "PROVIDER_PARAMS",
    "RETRY_REASON",
    "Case",
    "check_retries",
    "check_turn",
    "expected_history",
    "fake_config",
    "settings_for",
]
