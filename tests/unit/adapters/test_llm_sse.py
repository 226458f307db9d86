"""The lean SSE reader and the providers' stream parsers, fed bytes split at every position.

The adapters run these against the fake provider too (tests/integration/test_providers_against_fake.py
and the other ``*_against_fake`` suites); here: the SSE format's corners, and reads that cut events
anywhere (a network read ends where it ends).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentvm.adapters.llm.anthropic import MessageStreamParser
from agentvm.adapters.llm.openai import ChunkStreamParser
from agentvm.adapters.llm.sse import SSEReader
from agentvm.errors import ProviderRateLimited, ProviderUnavailable
from agentvm.llm import ModelStart, ModelStop, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart


def _events(body: bytes, *cuts: int) -> list[tuple[bytes, bytes]]:
    reader = SSEReader()
    out = []
    start = 0
    for cut in (*cuts, len(body)):
        out += reader.feed(body[start:cut])
        start = cut
    return out


def test_events_are_the_same_wherever_the_reads_cut_them():
    body = b'event: a\ndata: {"x": 1}\n\nevent: b\ndata: {"y": "\xc3\xa9"}\n\n'
    whole = _events(body)
    assert whole == [(b"a", b'{"x": 1}'), (b"b", b'{"y": "\xc3\xa9"}')]
    for cut in range(len(body) + 1):
        assert _events(body, cut) == whole, cut
    assert _events(body, *range(1, len(body))) == whole  # one byte per read


def test_crlf_and_cr_line_ends_multi_line_data_comments_and_ids():
    body = b": keep-alive\r\nid: 7\r\nevent: e\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rdata: y\r\r"
    expected = [(b"e", b"one\ntwo"), (b"", b"x\ny")]
    assert _events(body) == expected
    for cut in range(len(body) + 1):
        assert _events(body, cut) == expected, cut


def test_events_without_data_and_an_unfinished_tail_are_not_events():
    reader = SSEReader()
    assert reader.feed(b"event: ping\n\n\n\nevent: half\ndata: {") == []
    assert reader.feed(b'"a": 1}\n\n') == [(b"half", b'{"a": 1}')]


def _anthropic_body() -> bytes:
    def sse(name, data):
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    usage = {"input_tokens": 100, "output_tokens": 1, "cache_read_input_tokens": 600}
    return b"".join(
        [
            sse(
                "message_start",
                {"type": "message_start", "message": {"id": "m1", "model": "c", "usage": usage}},
            ),
            sse("ping", {"type": "ping"}),
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hé"}},
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "content_block": {"type": "tool_use", "id": "t1", "name": "f"},
                },
            ),
            sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "delta": {"type": "input_json_delta", "partial_json": '{"a": '},
                },
            ),
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "1}"}},
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 9},
                },
            ),
            sse("message_stop", {"type": "message_stop"}),
            sse("ping", {"type": "ping"}),
        ]
    )


def test_anthropic_stream_becomes_our_events_wherever_the_reads_cut_it():
    body = _anthropic_body()
    expected = [
        ModelStart("m1", "c", input_tokens=700, cache_read_tokens=600),
        TextDelta("Hé"),
        ToolCallStart("t1", "f"),
        ToolCallDelta("t1", '{"a": '),
        ToolCallDelta("t1", "1}"),
        ToolCallEnd("t1", "f", {"a": 1}),
        ModelStop("tool_use", input_tokens=700, output_tokens=9, cache_read_tokens=600),
    ]
    for cut in range(0, len(body) + 1, 7):
        parser = MessageStreamParser()
        events = parser.feed(body[:cut]) + parser.feed(body[cut:])
        assert events == expected, cut
        assert parser.stopped


@pytest.mark.parametrize(
    ("error", "raised", "message"),
    [
        ({"type": "error", "error": {"type": "overloaded_error"}}, ProviderUnavailable, "overloaded_error"),
        (
            {"type": "error", "error": {"type": "rate_limit_error"}},
            ProviderRateLimited,
            "rate limited in stream",
        ),
        ("not json", ProviderUnavailable, "error event"),
    ],
)
def test_anthropic_error_event_inside_the_stream(error, raised, message):
    data = error if isinstance(error, str) else json.dumps(error)
    with pytest.raises(raised, match=message):
        MessageStreamParser().feed(f"event: error\ndata: {data}\n\n".encode())


def test_anthropic_event_that_is_not_json_is_an_invalid_response():
    with pytest.raises(ProviderUnavailable, match="invalid response"):
        MessageStreamParser().feed(b"event: content_block_delta\ndata: {oops\n\n")


def _openai_body() -> bytes:
    def chunk(**fields):
        return f"data: {json.dumps({'id': 'c1', 'model': 'gpt', **fields})}\n\n".encode()

    def choice(delta, finish=None):
        return {"index": 0, "delta": delta, "finish_reason": finish}

    call = {"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}}
    return b"".join(
        [
            chunk(choices=[choice({"role": "assistant", "content": ""})]),
            chunk(choices=[choice({"content": "Hé"})]),
            chunk(choices=[choice({"tool_calls": [call]})]),
            chunk(choices=[choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]})]),
            chunk(choices=[choice({}, "tool_calls")]),
            chunk(
                choices=[],
                usage={
                    "prompt_tokens": 50,
                    "completion_tokens": 7,
                    "prompt_tokens_details": {"cached_tokens": 20},
                },
            ),
            b"data: [DONE]\n\n",
        ]
    )


def test_openai_stream_becomes_our_events_wherever_the_reads_cut_it():
    body = _openai_body()
    expected = [
        ModelStart("c1", "gpt"),
        TextDelta("Hé"),
        ToolCallStart("t1", "f"),
        ToolCallDelta("t1", '{"a": 1}'),
        ToolCallEnd("t1", "f", {"a": 1}),
        ModelStop("tool_use", input_tokens=50, output_tokens=7, cache_read_tokens=20),
    ]
    for cut in range(0, len(body) + 1, 7):
        parser = ChunkStreamParser("openai")
        events = parser.feed(body[:cut]) + parser.feed(body[cut:]) + parser.finish()
        assert events == expected, cut


def test_openai_error_chunk_and_a_stream_without_finish_reason_are_unavailable():
    with pytest.raises(ProviderUnavailable, match=r"error in stream \(server_error\)"):
        ChunkStreamParser("openai").feed(b'data: {"error": {"type": "server_error", "message": "x"}}\n\n')
    parser = ChunkStreamParser("compat")
    parser.feed(b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n')
    with pytest.raises(ProviderUnavailable, match="compat: stream ended without a finish_reason"):
        parser.finish()


def test_text_before_an_error_in_the_same_read_is_handed_out_then_the_error_raised():
    delta = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "a"}}
    text = f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode()
    error = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error"}}\n\n'
    parser = MessageStreamParser()
    assert parser.feed(text + error) == [TextDelta("a")]
    with pytest.raises(ProviderUnavailable, match="overloaded_error"):
        parser.end()

    chunks = ChunkStreamParser("openai")
    body = b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
    assert chunks.feed(body + b'data: {"error": {"type": "server_error"}}\n\n') == [
        ModelStart("c", ""),
        TextDelta("a"),
    ]
    with pytest.raises(ProviderUnavailable, match="server_error"):
        chunks.finish()


@given(st.text(), st.booleans())
def test_a_text_delta_read_without_parsing_the_whole_event_is_what_json_reads(text, compact):
    from agentvm.adapters.llm.anthropic import _text_delta

    event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    data = json.dumps(event, separators=(",", ":") if compact else None, ensure_ascii=compact).encode()
    assert _text_delta(data) == json.loads(data)["delta"]["text"]


def test_other_deltas_and_other_key_orders_are_parsed_whole():
    from agentvm.adapters.llm.anthropic import _text_delta

    assert (
        _text_delta(b'{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{"}}')
        is None
    )
    assert _text_delta(b'{"delta":{"text":"a","type":"text_delta"}}') is None  # text before its type


def test_blocks_of_another_shape_than_one_event_and_one_data_line_take_the_full_reader():
    body = (
        b"event: e\ndata: a\ndata: b\n\n"  # two data lines: joined
        b"event: f\nid: 3\ndata: c\n\n"  # an id line between them
        b"event:g\ndata:d\n\n"  # no space after the colons
        b"event: h\n\n"  # no data: not an event
        b"event: i\ndata: e\n\n"  # the common shape
    )
    expected = [(b"e", b"a\nb"), (b"f", b"c"), (b"g", b"d"), (b"i", b"e")]
    for cut in range(len(body) + 1):
        assert _events(body, cut) == expected, cut


def test_the_text_deltas_of_one_read_come_out_as_one_counting_each_in_order_with_other_events():
    def delta(text: str) -> bytes:
        event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        return f"event: content_block_delta\ndata: {json.dumps(event)}\n\n".encode()

    start = {"type": "content_block_start", "content_block": {"type": "tool_use", "id": "t1", "name": "f"}}
    tool = f"event: content_block_start\ndata: {json.dumps(start)}\n\n".encode()
    parser = MessageStreamParser()
    assert parser.feed(delta("a") + delta("b") + delta("c")) == [TextDelta("abc", deltas=3)]
    assert parser.feed(delta("d") + tool + delta("e") + delta("f")) == [
        TextDelta("d"),
        ToolCallStart("t1", "f"),
        TextDelta("ef", deltas=2),
    ]
