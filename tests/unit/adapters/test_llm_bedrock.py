from __future__ import annotations

import asyncio
import base64
import threading
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, EventStreamError, NoCredentialsError

from agentvm.adapters.llm.bedrock import BedrockModelClient
from agentvm.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from agentvm.llm import (
    Attachment,
    ChatTurn,
    ModelRequest,
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    ToolSpec,
)

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
REQUEST = ModelRequest(
    model=MODEL,
    messages=(ChatTurn("user", "hi"), ChatTurn("assistant", "hello"), ChatTurn("user", "again")),
    system="be brief",
    max_tokens=64,
)


def _reply(*texts: str, stop: str = "end_turn") -> list[dict]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {}, "contentBlockIndex": 0}},
        *({"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": 0}} for text in texts),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": stop}},
        {"metadata": {"usage": {"inputTokens": 12, "outputTokens": 2, "totalTokens": 14}}},
    ]


class FakeBedrockRuntime:
    """Quacks like a ``bedrock-runtime`` client: converse_stream returns an iterable ``stream``."""

    def __init__(self, events=(), error: Exception | None = None) -> None:
        self.events = events
        self.error = error
        self.calls: list[dict] = []

    def converse_stream(self, **params):
        self.calls.append(params)
        if self.error is not None:
            raise self.error
        return {"stream": iter(self.events), "ResponseMetadata": {"RequestId": "req-123"}}


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "account 123456789012 says no"}}, "ConverseStream")


async def _collect(client: BedrockModelClient) -> list:
    return [event async for event in client.stream(REQUEST)]


async def test_bedrock_client_streams_text_and_usage():
    fake = FakeBedrockRuntime(_reply("Hello", " there"))

    events = await _collect(BedrockModelClient("us-east-1", client=fake))

    assert events == [
        ModelStart("msg_bedrock_req-123", MODEL),
        TextDelta("Hello"),
        TextDelta(" there"),
        ModelStop("end_turn", input_tokens=12, output_tokens=2),
    ]


async def test_bedrock_cache_reads_and_writes_are_added_to_the_input_tokens():
    events = _reply("ok")
    events[-1] = {
        "metadata": {
            "usage": {
                "inputTokens": 12,
                "outputTokens": 2,
                "cacheReadInputTokens": 600,
                "cacheWriteInputTokens": 300,
                "totalTokens": 914,
            }
        }
    }

    out = await _collect(BedrockModelClient("us-east-1", client=FakeBedrockRuntime(events)))

    # Converse reports the cache tokens beside inputTokens: our input counts all of them
    assert out[-1] == ModelStop(
        "end_turn", input_tokens=912, output_tokens=2, cache_read_tokens=600, cache_write_tokens=300
    )


async def test_bedrock_client_sends_a_converse_request():
    fake = FakeBedrockRuntime(_reply("ok"))

    await _collect(BedrockModelClient("us-east-1", client=fake))

    assert fake.calls == [
        {
            "modelId": MODEL,
            "messages": [
                {"role": "user", "content": [{"text": "hi"}]},
                {"role": "assistant", "content": [{"text": "hello"}]},
                {"role": "user", "content": [{"text": "again"}]},
            ],
            "inferenceConfig": {"maxTokens": 64},
            "system": [{"text": "be brief"}],
        }
    ]


async def test_bedrock_stop_reasons_map_to_the_neutral_ones():
    events = await _collect(
        BedrockModelClient("us-east-1", client=FakeBedrockRuntime(_reply("a", stop="max_tokens")))
    )

    assert events[-1].stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("ThrottlingException", ProviderRateLimited),
        ("ServiceUnavailableException", ProviderUnavailable),
        ("InternalServerException", ProviderUnavailable),
        ("ModelStreamErrorException", ProviderUnavailable),
        ("ModelTimeoutException", ProviderUnavailable),
        ("ValidationException", ProviderRejected),
        ("AccessDeniedException", ProviderRejected),
    ],
)
async def test_bedrock_client_errors_map_by_code(code, error_type):
    client = BedrockModelClient("us-east-1", client=FakeBedrockRuntime(error=_client_error(code)))

    with pytest.raises(error_type) as raised:
        await _collect(client)

    assert type(raised.value) is error_type
    assert code in str(raised.value)
    assert "123456789012" not in str(raised.value)  # only the code, never the AWS message


async def test_bedrock_error_inside_the_stream_surfaces_after_the_text_so_far():
    def events():
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": "par"}, "contentBlockIndex": 0}}
        raise EventStreamError(
            {"Error": {"Code": "ModelStreamErrorException", "Message": "boom"}}, "ConverseStream"
        )

    client = BedrockModelClient("us-east-1", client=FakeBedrockRuntime(events()))
    received = []
    with pytest.raises(ProviderUnavailable):
        async for event in client.stream(REQUEST):
            received.append(event)

    assert received == [ModelStart("msg_bedrock_req-123", MODEL), TextDelta("par")]


async def test_bedrock_exception_events_are_errors():
    events = [{"messageStart": {"role": "assistant"}}, {"throttlingException": {"message": "slow down"}}]

    with pytest.raises(ProviderRateLimited):
        await _collect(BedrockModelClient("us-east-1", client=FakeBedrockRuntime(events)))


async def test_bedrock_stream_without_message_stop_is_unavailable():
    events = _reply("cut")[:3]

    with pytest.raises(ProviderUnavailable, match="messageStop"):
        await _collect(BedrockModelClient("us-east-1", client=FakeBedrockRuntime(events)))


@pytest.mark.parametrize(
    ("error", "error_type"),
    [
        (
            EndpointConnectionError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com"),
            ProviderUnavailable,
        ),
        (NoCredentialsError(), ProviderRejected),
    ],
)
async def test_bedrock_botocore_failures_are_provider_errors(error, error_type):
    with pytest.raises(error_type):
        await _collect(BedrockModelClient("us-east-1", client=FakeBedrockRuntime(error=error)))


async def test_closing_the_stream_early_stops_reading_bedrock_events():
    pulled = 0

    def endless():
        nonlocal pulled
        yield {"messageStart": {"role": "assistant"}}
        while True:
            pulled += 1
            time.sleep(0.002)
            yield {"contentBlockDelta": {"delta": {"text": " x"}, "contentBlockIndex": 0}}

    stream = BedrockModelClient("us-east-1", client=FakeBedrockRuntime(endless())).stream(REQUEST)
    assert isinstance(await anext(stream), ModelStart)
    assert await anext(stream) == TextDelta(" x")
    await stream.aclose()

    await asyncio.sleep(0.05)
    after_close = pulled
    await asyncio.sleep(0.05)

    assert pulled == after_close
    assert not any(t.name == "bedrock-converse-stream" and t.is_alive() for t in threading.enumerate())


def test_default_client_is_a_regional_bedrock_runtime_without_sdk_retries():
    client = BedrockModelClient("eu-central-1", timeout_s=12.0)._client

    assert client.meta.service_model.service_name == "bedrock-runtime"
    assert client.meta.region_name == "eu-central-1"
    assert client.meta.config.retries["total_max_attempts"] == 1
    assert client.meta.config.read_timeout == 12.0


# --- tools and attachments -----------------------------------------------------------------------

TOOLS = (
    ToolSpec(
        "get_weather",
        "The weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
)
PNG = b"\x89PNG\r\n\x1a\n-fake-image"
PDF = b"%PDF-1.7 fake"


def _tool_reply(*fragments: str, call_id: str = "tooluse_abc", index: int = 1) -> list[dict]:
    """A reply as Converse streams it: some text, then one toolUse block, then stopReason tool_use."""
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": "Let me check."}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {
            "contentBlockStart": {
                "start": {"toolUse": {"toolUseId": call_id, "name": "get_weather"}},
                "contentBlockIndex": index,
            }
        },
        *(
            {"contentBlockDelta": {"delta": {"toolUse": {"input": fragment}}, "contentBlockIndex": index}}
            for fragment in fragments
        ),
        {"contentBlockStop": {"contentBlockIndex": index}},
        {"messageStop": {"stopReason": "tool_use"}},
        {"metadata": {"usage": {"inputTokens": 40, "outputTokens": 9, "totalTokens": 49}}},
    ]


async def test_bedrock_streams_a_tool_call():
    fake = FakeBedrockRuntime(_tool_reply('{"ci', 'ty": "Par', 'is"}'))
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "weather in Paris?"),), tools=TOOLS)

    events = [event async for event in BedrockModelClient("us-east-1", client=fake).stream(request)]

    assert events == [
        ModelStart("msg_bedrock_req-123", MODEL),
        TextDelta("Let me check."),
        ToolCallStart("tooluse_abc", "get_weather"),
        ToolCallDelta("tooluse_abc", '{"ci'),
        ToolCallDelta("tooluse_abc", 'ty": "Par'),
        ToolCallDelta("tooluse_abc", 'is"}'),
        ToolCallEnd("tooluse_abc", "get_weather", {"city": "Paris"}),
        ModelStop("tool_use", input_tokens=40, output_tokens=9),
    ]


async def test_bedrock_tool_call_with_invalid_json_ends_with_an_input_error():
    fake = FakeBedrockRuntime(_tool_reply('{"city": '))
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "weather?"),), tools=TOOLS)

    events = [event async for event in BedrockModelClient("us-east-1", client=fake).stream(request)]

    (end,) = [event for event in events if isinstance(event, ToolCallEnd)]
    assert end.input == {}
    assert "not valid JSON" in end.input_error
    assert events[-1].stop_reason == "tool_use"


async def test_bedrock_tool_call_without_input_is_an_empty_object():
    fake = FakeBedrockRuntime(_tool_reply())
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "weather?"),), tools=TOOLS)

    events = [event async for event in BedrockModelClient("us-east-1", client=fake).stream(request)]

    assert ToolCallEnd("tooluse_abc", "get_weather", {}) in events
    assert not any(isinstance(event, ToolCallDelta) for event in events)


async def test_bedrock_streams_consecutive_tool_calls_in_order():
    first, second = _tool_reply('{"city": "Paris"}'), _tool_reply('{"city": "Oslo"}', call_id="tu_2", index=2)
    fake = FakeBedrockRuntime([*first[:-2], *second[3:]])  # one message: text, call 1, call 2
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "Paris and Oslo?"),), tools=TOOLS)

    events = [event async for event in BedrockModelClient("us-east-1", client=fake).stream(request)]

    calls = [e for e in events if isinstance(e, ToolCallStart | ToolCallDelta | ToolCallEnd)]
    assert calls == [
        ToolCallStart("tooluse_abc", "get_weather"),
        ToolCallDelta("tooluse_abc", '{"city": "Paris"}'),
        ToolCallEnd("tooluse_abc", "get_weather", {"city": "Paris"}),
        ToolCallStart("tu_2", "get_weather"),
        ToolCallDelta("tu_2", '{"city": "Oslo"}'),
        ToolCallEnd("tu_2", "get_weather", {"city": "Oslo"}),
    ]
    assert events[-1] == ModelStop("tool_use", input_tokens=40, output_tokens=9)


async def test_bedrock_request_carries_tools_and_tool_history():
    fake = FakeBedrockRuntime(_reply("It is sunny."))
    request = ModelRequest(
        model=MODEL,
        messages=(
            ChatTurn("user", "weather in Paris and Oslo?"),
            ChatTurn(
                "assistant",
                "Checking.",
                tool_calls=(
                    ToolCall("tu_1", "get_weather", {"city": "Paris"}),
                    ToolCall("tu_2", "get_weather", {"city": "Oslo"}),
                ),
            ),
            ChatTurn(
                "user",
                tool_results=(
                    ToolResult("tu_1", "get_weather", '{"sky": "sunny"}'),
                    ToolResult("tu_2", "get_weather", "HTTP 500: down", is_error=True),
                ),
            ),
        ),
        max_tokens=64,
        tools=TOOLS,
    )

    await _collect_request(fake, request)

    (params,) = fake.calls
    assert params["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "inputSchema": {"json": TOOLS[0].input_schema},
                }
            }
        ]
    }
    assert params["messages"] == [
        {"role": "user", "content": [{"text": "weather in Paris and Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Paris"}}},
                {"toolUse": {"toolUseId": "tu_2", "name": "get_weather", "input": {"city": "Oslo"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tu_1",
                        "content": [{"text": '{"sky": "sunny"}'}],
                        "status": "success",
                    }
                },
                {
                    "toolResult": {
                        "toolUseId": "tu_2",
                        "content": [{"text": "HTTP 500: down"}],
                        "status": "error",
                    }
                },
            ],
        },
    ]


async def test_bedrock_request_without_tools_has_no_tool_config():
    fake = FakeBedrockRuntime(_reply("ok"))

    await _collect(BedrockModelClient("us-east-1", client=fake))

    assert "toolConfig" not in fake.calls[0]


async def test_bedrock_tool_history_without_tools_is_sent_as_text():
    """Converse rejects toolUse/toolResult blocks without a toolConfig (an image that dropped its tools)."""
    fake = FakeBedrockRuntime(_reply("ok"))
    request = ModelRequest(
        model=MODEL,
        messages=(
            ChatTurn("user", "weather?"),
            ChatTurn("assistant", tool_calls=(ToolCall("tu_1", "get_weather", {"city": "Paris"}),)),
            ChatTurn("user", "thanks", tool_results=(ToolResult("tu_1", "get_weather", "sunny"),)),
        ),
    )

    await _collect_request(fake, request)

    messages = fake.calls[0]["messages"]
    assert messages[1]["content"] == [{"text": '[called tool get_weather with {"city": "Paris"}]'}]
    assert messages[2]["content"] == [{"text": "[tool get_weather result: sunny]\nthanks"}]


async def test_bedrock_sends_an_image_attachment_as_bytes():
    fake = FakeBedrockRuntime(_reply("A cat."))
    image = Attachment("image", "image/png", base64.b64encode(PNG).decode(), "cat.png")
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "what is this?", attachments=(image,)),))

    await _collect_request(fake, request)

    assert fake.calls[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"image": {"format": "png", "source": {"bytes": PNG}}},
                {"text": "what is this?"},
            ],
        }
    ]


async def test_bedrock_sends_pdfs_as_documents_with_safe_unique_names():
    fake = FakeBedrockRuntime(_reply("ok"))
    data = base64.b64encode(PDF).decode()
    files = (
        Attachment("file", "application/pdf", data, "Q3 report (final)..v2.pdf"),
        Attachment("file", "application/pdf", data, "Q3 report (final)..v2.pdf"),
        Attachment("file", "application/pdf", data),
    )
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "summarise", attachments=files),))

    await _collect_request(fake, request)

    content = fake.calls[0]["messages"][0]["content"]
    assert [block["document"]["name"] for block in content[:3]] == [
        "Q3 report (final) v2",
        "Q3 report (final) v2 (2)",
        "document",
    ]
    assert content[0]["document"]["format"] == "pdf"
    assert content[0]["document"]["source"] == {"bytes": PDF}
    assert content[3] == {"text": "summarise"}


async def test_bedrock_attachments_it_cannot_send_become_text_notes():
    fake = FakeBedrockRuntime(_reply("ok"))
    attachments = (
        Attachment("image", "image/jpeg", "https://example.com/cat.jpg?X-Amz-Signature=secret", "cat.jpg"),
        Attachment("file", "text/csv", base64.b64encode(b"a,b\n1,2").decode(), "data.csv"),
        Attachment("image", "image/png", "not base64!!", "broken.png"),
    )
    request = ModelRequest(model=MODEL, messages=(ChatTurn("user", "look", attachments=attachments),))

    await _collect_request(fake, request)

    (block,) = fake.calls[0]["messages"][0]["content"]
    lines = block["text"].split("\n")
    assert lines[0].startswith("[attachment 'cat.jpg' (image/jpeg) not sent:")
    assert "secret" not in block["text"]  # a URL may be signed: never repeated to the model
    assert lines[1] == (
        "[attachment 'data.csv' (text/csv) not sent: this model accepts images and PDFs only]"
    )
    assert lines[2].startswith("[attachment 'broken.png' (image/png) not sent:")
    assert lines[3] == "look"


async def _collect_request(fake: FakeBedrockRuntime, request: ModelRequest) -> list:
    return [event async for event in BedrockModelClient("us-east-1", client=fake).stream(request)]
