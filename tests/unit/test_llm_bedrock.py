from __future__ import annotations

import asyncio
import threading
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, EventStreamError, NoCredentialsError

from agentvm.adapters.llm.bedrock import BedrockModelClient
from agentvm.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from agentvm.llm import ChatTurn, ModelRequest, ModelStart, ModelStop, TextDelta

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
