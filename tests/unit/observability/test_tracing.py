"""OpenTelemetry GenAI spans of a turn (the SDK's in-memory exporter): one ``invoke_agent`` span per
attempt, a ``chat`` child per model call with the provider's token counts, an ``execute_tool`` child
per tool result; with no exporter configured, nothing of OpenTelemetry is imported on any Lambda
handler's import path, nor when the AWS runtime is built."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentvm.adapters.llm.scripted import Calls, Fail
from agentvm.config import Settings
from agentvm.errors import ProviderRejected
from agentvm.observability import tracing
from tests.tools import FakeTool, FixedToolSources

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)


async def test_a_tool_turn_is_an_agent_span_with_model_call_and_tool_children(harness, spans):
    harness.rt.tools = FixedToolSources(FakeTool("get_weather"))
    c = await harness.client()
    config = {"name": "Forecaster", "tools": [{"type": "builtin", "name": "calculator"}]}
    img = (await c.request("image_create", containerId="u1", config=config))["record"]
    harness.model.add(Calls(("get_weather", {"city": "Paris"}), ("nope", {"city": "x"})), "Sunny.")
    await c.request("message_send", imageId=img["imageId"], content="weather?")
    await harness.run_turns()

    finished = spans.get_finished_spans()
    (agent,) = [s for s in finished if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    chats = sorted((s for s in finished if s.name.startswith("chat ")), key=lambda s: s.start_time)
    tools = [s for s in finished if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert agent.name == "invoke_agent Forecaster" and agent.kind == SpanKind.INTERNAL
    assert agent.attributes["gen_ai.conversation.id"] == img["sessionId"]
    assert agent.attributes["gen_ai.agent.name"] == "Forecaster"
    assert agent.attributes["gen_ai.request.model"] == "scripted/test-1"
    assert agent.attributes["gen_ai.provider.name"] == "scripted"
    assert (agent.attributes["agentvm.tenant.id"], agent.attributes["agentvm.turn.status"]) == (
        "tenant-a",
        "completed",
    )
    assert len(chats) == 2 and all(s.kind == SpanKind.CLIENT for s in chats)
    assert all(s.parent.span_id == agent.context.span_id for s in [*chats, *tools])
    usage = await harness.store.list_usage("tenant-a", None)
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in chats] == [u.inputTokens for u in usage]
    assert [s.attributes["gen_ai.usage.output_tokens"] for s in chats] == [u.outputTokens for u in usage]
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert agent.attributes["gen_ai.usage.output_tokens"] == sum(u.outputTokens for u in usage)
    by_tool = {s.attributes["gen_ai.tool.name"]: s for s in tools}
    assert set(by_tool) == {"get_weather", "nope"}
    assert by_tool["get_weather"].status.status_code == StatusCode.UNSET
    assert by_tool["nope"].attributes["error.type"] == "unknown_tool"
    assert by_tool["nope"].status.status_code == StatusCode.ERROR
    assert all(s.attributes["gen_ai.tool.call.id"].startswith("call_") for s in tools)
    text = json.dumps([dict(s.attributes) for s in finished])
    assert "weather?" not in text and "Sunny." not in text  # no message content in traces


async def test_a_failed_turn_marks_its_spans_with_the_error_type(harness, spans):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u1", config={"name": "A"}))["record"]
    harness.model.add(Fail(ProviderRejected("bad request"), after_words="Oh"))
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()
    finished = {s.attributes["gen_ai.operation.name"]: s for s in spans.get_finished_spans()}
    for span in (finished["invoke_agent"], finished["chat"]):
        assert span.attributes["error.type"] == "provider_rejected"
        assert span.status.status_code == StatusCode.ERROR


def test_the_exporter_is_chosen_by_the_settings():
    assert tracing.exporter_of(Settings()) is None
    assert tracing.exporter_of(Settings(otel_exporter="console")) == "console"
    assert tracing.exporter_of(Settings(otel_exporter_otlp_endpoint="http://127.0.0.1:4318")) == "otlp"
    assert tracing.exporter_of(Settings(otel_exporter="none", otel_exporter_otlp_endpoint="x")) is None
    try:
        assert tracing.configure_tracing(Settings(otel_exporter="console")) is True
        assert tracing.tracing_on()
    finally:
        tracing.use_tracer_provider(None)
    assert tracing.configure_tracing(Settings()) is False and not tracing.tracing_on()


HANDLERS = ("ws_connect", "ws_disconnect", "ws_default", "ws_authorizer", "http_api", "turn_worker")


def _imported(module: str, *, lambda_init: bool) -> dict[str, list[str]]:
    """What importing a handler module (and, in a Lambda environment, building its runtime) imports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "AVM_OTEL_EXPORTER"}
    env.update(
        AWS_DEFAULT_REGION="us-east-1",
        AVM_TABLE_NAME="t",
        AVM_QUEUE_URL="https://sqs.us-east-1.amazonaws.com/1/q.fifo",
        AVM_WS_ENDPOINT="https://x.execute-api.us-east-1.amazonaws.com/prod",
        AVM_AUTH_SECRET_PARAMETER="/p",
        AVM_LOG_GROUP="/aws/lambda/agentvm",
    )
    if lambda_init:
        env["AWS_LAMBDA_FUNCTION_NAME"] = "agentvm-test"
    code = (
        "import json, sys, importlib\n"
        f"importlib.import_module('functions.{module}.app')\n"
        "mods = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print(json.dumps({'otel': mods}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", HANDLERS)
def test_with_no_exporter_no_handler_imports_opentelemetry(module):
    for lambda_init in (False, True):
        modules = _imported(module, lambda_init=lambda_init)["otel"]
        assert not [m for m in modules if m.startswith("opentelemetry.sdk")], (module, lambda_init)
        if module != "http_api":
            assert modules == [], (module, lambda_init)
        else:
            # FastAPI (>= 0.16x) imports the OpenTelemetry *API* itself when it is installed (its
            # fastapi.telemetry module); AgentVM adds nothing to it.
            assert set(modules) <= set(_fastapi_alone()), modules


@functools.cache
def _fastapi_alone() -> list[str]:
    code = (
        "import json, sys, fastapi.routing\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
