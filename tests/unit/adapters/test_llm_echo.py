from __future__ import annotations

import time

from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.llm import ChatTurn, ModelRequest, ModelStart, ModelStop, TextDelta


def _request(*turns: tuple[str, str], system: str | None = None) -> ModelRequest:
    return ModelRequest(
        model="echo-1", messages=tuple(ChatTurn(role, text) for role, text in turns), system=system
    )


async def _collect(client: EchoModelClient, request: ModelRequest) -> list:
    return [event async for event in client.stream(request)]


async def test_echo_streams_start_words_and_stop_with_usage():
    request = _request(("user", "hello  big world"), system="be brief")

    events = await _collect(EchoModelClient(delay_ms=0), request)

    start, *deltas, stop = events
    assert isinstance(start, ModelStart)
    assert start.model == "echo-1"
    assert start.message_id.startswith("msg_echo_")
    assert all(isinstance(delta, TextDelta) for delta in deltas)
    assert [delta.text for delta in deltas] == ["Echo: ", "hello  ", "big ", "world"]
    assert "".join(delta.text for delta in deltas) == "Echo: hello  big world"
    assert stop == ModelStop("end_turn", input_tokens=5, output_tokens=4)


async def test_echo_replies_to_the_last_user_message():
    request = _request(("user", "first"), ("assistant", "Echo: first"), ("user", "second one"))

    events = await _collect(EchoModelClient(delay_ms=0), request)

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: second one"
    assert events[-1].input_tokens == 5  # every message counts, not only the last


async def test_echo_without_a_user_message_echoes_nothing():
    events = await _collect(EchoModelClient(delay_ms=0), _request(("assistant", "hi")))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: (nothing)"


async def test_echo_is_deterministic_apart_from_the_message_id():
    client = EchoModelClient(delay_ms=0)
    request = _request(("user", "same input"))

    first, second = await _collect(client, request), await _collect(client, request)

    assert first[1:] == second[1:]
    assert first[0].message_id != second[0].message_id


async def test_echo_pauses_between_words():
    request = _request(("user", "one two three"))  # 4 words, so 3 pauses

    began = time.monotonic()
    await _collect(EchoModelClient(delay_ms=25), request)

    assert time.monotonic() - began >= 0.07
