"""The official AgentX 2.9.0 client against the AWS host: the real ``ws_default`` and ``turn_worker``
handlers on moto behind a loopback WebSocket (``ws_bridge``, which stands for API Gateway and its
``$connect`` authorizer), with the echo model. The same client, scenario and checks as against
``avm serve`` (``tests/integration/test_agentx29_client.py``): only the URL differs."""

from __future__ import annotations

import pytest
from moto import mock_aws

from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.adapters.llm.scripted import SingleModelResolver
from tests.functions.aws_host import aws_host
from tests.functions.ws_bridge import ws_bridge
from tests.integration.agentx2_client import missing_tools, run_client
from tests.integration.test_agentx29_client import (
    check_flow,
    check_interrupt,
    flow_scenario,
    interrupt_scenario,
)

pytestmark = [pytest.mark.aws, pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")]


@pytest.fixture
def bridge(request, monkeypatch):
    delay_ms = getattr(request, "param", 2)  # the echo model's pause between words
    with mock_aws():
        host = next(aws_host(SingleModelResolver(EchoModelClient(delay_ms=delay_ms), ref="echo/echo-1")))
        with ws_bridge(host, monkeypatch) as bridge:
            yield bridge


def test_the_stock_2_9_client_creates_a_chat_streams_its_replies_and_reads_history_on_aws(bridge, tmp_path):
    # the bridge's connections are authenticated at $connect, as API Gateway's are: no key to send
    check_flow(run_client(flow_scenario(bridge.url, None), tmp_path), default_provider="echo")


@pytest.mark.parametrize("bridge", [25], indirect=True)
def test_the_stock_2_9_client_interrupts_a_reply_on_aws_and_history_keeps_what_was_streamed(bridge, tmp_path):
    check_interrupt(run_client(interrupt_scenario(bridge.url, None), tmp_path))


def test_the_stock_2_9_presentation_loads_history_and_renders_replies_on_aws(bridge, tmp_path):
    steps = run_client(
        {"name": "present", "url": bridge.url, "messages": ["First one", "Second one"]}, tmp_path
    )
    assert [s["step"] for s in steps] == ["connect", "present", "done"], steps
    shown = steps[1]
    rendered = [
        (c["role"], "".join(b["content"] for b in c["blocks"] if b["type"] == "text"))
        for c in shown["conversations"]
    ]
    assert rendered == [
        ("user", "First one"),
        ("assistant", "Echo: First one"),
        ("user", "Second one"),
        ("assistant", "Echo: Second one"),
    ]
    assert shown["loaded"] == shown["conversations"][:2]
    assert (shown["status"], shown["files"]) == ("idle", [])  # an image without a sandbox has no files
