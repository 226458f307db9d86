"""Every kind of provider fault on the AWS host: ``ws_default`` and ``turn_worker`` on moto, the real
SDKs against the fake provider (the cases are those of the local host, ``fault_cases.py``).

A provider failure ends the turn as data (error events, a failed turn record): the SQS record is
acknowledged, never redelivered, so a provider that keeps failing is not retried forever by SQS.
"""

from __future__ import annotations

import time

import pytest
from moto import mock_aws

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.fakellm import FakeLLMServer
from agentvm.hosts.aws import run_sync
from tests.functions.aws_host import aws_host
from tests.integration.fault_cases import (
    CASES,
    MODELS,
    PROVIDER_KEY,
    check_turn,
    expected_history,
    fake_config,
    settings_for,
)

pytestmark = pytest.mark.aws


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(fake_config()) as server:
        yield server


@pytest.fixture(scope="module")
def resolver(fake):
    # One resolver for the module, as one Lambda execution environment keeps its SDK clients.
    return SettingsModelResolver(settings_for(fake))


@pytest.fixture(scope="module")
def host(resolver):
    # One moto account for the module (tables and queues take a while to make): each test has its
    # own tenant and connection, and drains the queue of what it enqueued.
    with mock_aws():
        yield from aws_host(resolver)


# The worker's path does not depend on the provider: each SDK's own errors are covered on the local
# host with both providers; here Anthropic's, plus OpenAI's for the failures after the last try.
AWS_PARAMS = [pytest.param(name, "anthropic", id=f"{name}-anthropic") for name in CASES] + [
    pytest.param(name, "openai", id=f"{name}-openai") for name in CASES if name.endswith("last-try")
]


@pytest.mark.parametrize(("name", "provider"), AWS_PARAMS)
def test_provider_fault_on_the_aws_host(host, fake, provider, name, caplog):
    case = CASES[name]
    fake.reset()
    tenant = conn = f"{name}-{provider}"
    host.connect(conn, tenant)
    img = host.image(conn, MODELS[provider])
    fake.add_faults(case.faults)

    host.request(conn, "message_send", imageId=img["imageId"], content="Hi")
    messages = host.receive()
    started = time.monotonic()
    response = host.deliver(messages)
    elapsed = time.monotonic() - started

    assert response == {"batchItemFailures": []}  # a provider error is an outcome, not a retry
    check_turn(case, host.session_events(conn), elapsed, fake.stats()["requests"], provider)
    host.request(conn, "message_send", imageId=img["imageId"], content="again")
    host.run_turns()
    assert host.session_events(conn)[-1]["type"] == "conversation_end"
    history = host.request(conn, "image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == expected_history(case)
    store = host.runtime().store
    [first, _] = run_sync(store.list_usage(tenant))
    assert first.status == ("completed" if case.code is None else "failed")
    assert PROVIDER_KEY not in repr(host.posts) + caplog.text
