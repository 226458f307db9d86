"""``avm serve`` killed with SIGKILL mid-turn: after a restart the turn completes, and the user's
message is never lost nor stored twice. A real process, the real Anthropic SDK, the fake provider
streaming slowly (so the kill lands mid-stream).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agentvm.client import AgentVMClient
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer, reply_tokens
from tests.integration.avm_process import avm_serve, base_env, free_port

REPLY_TOKENS = 60
SLOW = FakeLLMConfig(ttft_ms=5, tokens_per_second=40, reply_tokens=REPLY_TOKENS, input_tokens=42)


@pytest.fixture
def fake():
    with FakeLLMServer(SLOW) as server:
        yield server


async def _history_when_answered(url: str, token: str, image_id: str, timeout: float = 20.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    async with AgentVMClient.connect(url, token=token) as client:
        while True:
            history = (await client.request("image_messages", imageId=image_id, check=True))["messages"]
            if any(m["subtype"] in ("assistant", "error") for m in history) or time.monotonic() > deadline:
                return history
            await asyncio.sleep(0.1)


async def test_a_turn_cut_by_sigkill_completes_after_a_restart(tmp_path, fake):
    env = base_env(
        ANTHROPIC_API_KEY="sk-test-crash",
        ANTHROPIC_BASE_URL=fake.base_url,
        AVM_DEFAULT_MODEL="anthropic/claude-haiku-4-5",
        AVM_BATCH_FLUSH_MS="10",  # the SDK client sees the text while it streams, not every 2 s
    )
    with avm_serve(tmp_path, free_port(), env=env) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as client:
            img = (
                await client.request(
                    "image_create", containerId="user-alice", config={"name": "A"}, check=True
                )
            )["record"]
            await client.request(
                "message_send", imageId=img["imageId"], content="tell me a story", check=True
            )
            deltas = 0
            while deltas < 3:  # the turn is streaming
                frame = await asyncio.wait_for(client.events.get(), 10)
                deltas += frame["type"] == "text_delta"
            server.proc.kill()  # SIGKILL: no shutdown, no cleanup
            server.proc.wait(timeout=10)
    killed_at = fake.stats()
    assert killed_at["requests"] == 1 and killed_at["completed"] == 0

    with avm_serve(tmp_path, free_port(), env=env) as server:
        history = await _history_when_answered(server.url, token, img["imageId"])

    # the job was still in the durable queue: the restarted consumer ran the turn again, to the end
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    assert history[0]["content"] == "tell me a story"
    assert history[1]["content"] == [{"type": "text", "text": "".join(reply_tokens(REPLY_TOKENS))}]
    stats = fake.stats()
    assert stats["requests"] == 2 and stats["completed"] == 1
