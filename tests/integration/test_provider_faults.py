"""Every kind of provider fault, through the real SDKs and the fake provider, on the local host.

The same cases run on the AWS host in ``tests/functions/test_provider_faults_aws.py``.
"""

from __future__ import annotations

import time

import pytest

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.fakellm import FakeLLMServer
from tests.integration.fault_cases import (
    CASE_PARAMS,
    CASES,
    MODELS,
    PROVIDER_KEY,
    PROVIDER_PARAMS,
    check_turn,
    expected_history,
    fake_config,
    settings_for,
)


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(fake_config()) as server:
        yield server


@pytest.mark.parametrize("provider", PROVIDER_PARAMS)
@pytest.mark.parametrize("name", CASE_PARAMS)
async def test_provider_fault_on_the_local_host(harness, fake, provider, name, caplog):
    case = CASES[name]
    fake.reset()
    harness.rt.models = SettingsModelResolver(settings_for(fake))
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A", "model": MODELS[provider]}))[
        "record"
    ]
    await c.subscribe(img["sessionId"])
    fake.add_faults(case.faults)

    await c.request("message_send", imageId=img["imageId"], content="Hi")
    started = time.monotonic()
    await harness.run_turns()
    elapsed = time.monotonic() - started

    check_turn(case, c.session_events(), elapsed, fake.stats()["requests"], provider)
    # the session stays usable: the next turn completes
    await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert c.session_events()[-1]["type"] == "conversation_end"
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == expected_history(case)
    [first, _] = await harness.store.list_usage("tenant-a")
    assert first.status == ("completed" if case.code is None else "failed")
    assert PROVIDER_KEY not in repr(c.frames) + caplog.text
