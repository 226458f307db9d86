"""No secret ever leaves AgentVM: a whole conversation through a real ``avm serve`` (real Anthropic
SDK against the fake provider), with failed authentication attempts and a provider failure, while
every log line, frame, HTTP response and error message is captured and searched."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
import websockets

from agentvm.client import AgentVMClient
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.security.apikeys import new_token
from tests.integration.avm_process import avm_serve, base_env, free_port

PROVIDER_KEY = "sk-ant-PROVIDER-SECRET-do-not-leak-0123456789"
AUTH_SECRET = "server-hmac-SECRET-do-not-leak-abcdefghijklmnopqrstuvwxyz"
CONFIG_SECRET = "sk-openai-CONFIG-CENTRE-SECRET-do-not-leak-987654321"  # set through /v1/config
_, API_KEY = new_token()


@pytest.fixture
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=5, tokens_per_second=2000, reply_tokens=8)) as server:
        yield server


async def test_no_secret_appears_in_logs_frames_responses_or_errors(tmp_path, fake, caplog):
    caplog.set_level(logging.DEBUG)
    env = base_env(
        ANTHROPIC_API_KEY=PROVIDER_KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
        AVM_DEFAULT_MODEL="anthropic/claude-haiku-4-5",
        AVM_ADMIN_KEY=API_KEY,
        AVM_AUTH_SECRET=AUTH_SECRET,
        AVM_LOG_LEVEL="DEBUG",
        AVM_PROVIDER_RETRY_BASE_MS="5",
        AVM_PROVIDER_MAX_ATTEMPTS="2",
        AVM_PLATFORM_TENANT="default",  # the admin key's tenant: it may set server settings
    )
    seen: list[str] = []  # everything a client or an operator could read
    key_id = API_KEY.split("_")[1]
    wrong = f"avm_{key_id}_{new_token()[1].split('_', 2)[2]}"  # the real key id, a wrong secret

    def http(method: str, path: str, token: str | None = None, **kw) -> httpx.Response:
        headers = kw.pop("headers", {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        r = httpx.request(method, f"{server.http}{path}", headers=headers, **kw)
        seen.append(f"{r.status_code} {dict(r.headers)} {r.text}")
        return r

    with avm_serve(tmp_path, free_port(), env=env) as server:
        # failed attempts: wrong secret, wrong scheme carrying the real key, garbage
        assert http("GET", "/v1/auth/keys", wrong).status_code == 401
        assert http("GET", "/v1/auth/keys", headers={"Authorization": f"Token {API_KEY}"}).status_code == 401
        assert http("GET", "/v1/usage", "garbage").status_code == 401
        for kw in ({"additional_headers": {"Authorization": f"Bearer {wrong}"}}, {}):
            url = server.url if kw else f"{server.url}?token={wrong}"
            with pytest.raises(websockets.InvalidStatus) as refused:
                async with websockets.connect(url, **kw):
                    pass
            seen.append(refused.value.response.body.decode())

        # the conversation, authenticated with ?token= (the path uvicorn logs)
        async with AgentVMClient.connect(f"{server.url}?token={API_KEY}") as client:
            await client.send_frame({"type": "auth", "headers": {"Authorization": f"Basic {API_KEY}"}})
            img = (await client.request("image_create", containerId="u1", config={"name": "A"}))["record"]
            await client.request("message_send", imageId=img["imageId"], content="hello", check=True)
            turn = [e async for e in client.turn_events(timeout=20)]
            assert turn[-1]["type"] == "conversation_end"
            fake.add_faults([{"kind": "500"}] * 2)
            await client.request("message_send", imageId=img["imageId"], content="again", check=True)
            failed = [e async for e in client.turn_events(timeout=20)]
            assert failed[-1]["type"] == "error_occurred"
            history = await client.request("image_messages", imageId=img["imageId"])
            assert [m["subtype"] for m in history["messages"]] == ["user", "assistant", "user", "error"]
            while not client.events.empty():
                turn.append(client.events.get_nowait())
            seen += [json.dumps(f) for f in [*turn, *failed, history]]

        created = http("POST", "/v1/auth/keys", API_KEY, json={"scopes": ["client"]})
        client_token = created.json()["token"]
        http("GET", "/v1/auth/keys", API_KEY)
        http("GET", "/v1/usage", API_KEY)
        # a provider key set through the config centre: write-only from then on
        put = http(
            "PUT",
            "/v1/config",
            API_KEY,
            json={"scope": "server", "values": {"llm.openai.apiKey": CONFIG_SECRET}},
        )
        assert put.status_code == 200 and put.json()["settings"]["llm.openai.apiKey"]["value"] == "********"
        http("GET", "/v1/config", API_KEY)
        http("GET", "/v1/config/llm.openai.apiKey", API_KEY)
        assert http("GET", "/v1/config/audit?scope=server", API_KEY).json()["changes"][0]["new"] == "********"
        http("PUT", "/v1/config/llm.openai.apiKey", API_KEY, json={"scope": "server", "value": 42})  # refused
        http("PUT", "/v1/budgets/tenant", API_KEY, json={"daily_tokens": 5})
        async with AgentVMClient.connect(server.url, token=client_token) as client:
            refused = await client.request("message_send", imageId=img["imageId"], content="over budget")
            assert refused["code"] == "quota_exceeded"  # the tenant's daily budget of 5 is used up
            seen.append(json.dumps(refused))

    output = server.output()
    assert "token=***" in output  # the WebSocket path was logged, with the token masked
    assert '"level": "DEBUG"' in output  # and we really captured DEBUG logs
    assert fake.stats()["requests"] >= 3
    # In this process: the fake provider's logs (the test's own HTTP/WebSocket client libraries log
    # the credentials they send at DEBUG; they are the caller, not AgentVM).
    callers = ("websockets.client", "httpx", "httpcore")
    logged = "\n".join(caplog.handler.format(r) for r in caplog.records if not r.name.startswith(callers))
    assert any(r.name.startswith("agentvm.fakellm") or r.name.startswith("uvicorn") for r in caplog.records)
    everything = "\n".join([output, logged, *seen])
    for secret in (PROVIDER_KEY, AUTH_SECRET, CONFIG_SECRET, API_KEY, API_KEY.split("_", 2)[2]):
        assert secret not in everything
    assert not _pieces_of(API_KEY, everything)  # not even a cut-off end of it
    assert "< TEXT" not in output  # at DEBUG too, frames are not logged unless AVM_LOG_WS_FRAMES
    client_secret = client_token.split("_", 2)[2]
    assert client_secret not in "\n".join([output, logged])  # shown once, in its create response only


def _pieces_of(token: str, text: str, size: int = 8) -> list[str]:
    """The pieces of ``token``'s secret (``size`` characters or more) that appear in ``text``."""
    secret = token.split("_", 2)[2]
    return [secret[i : i + size] for i in range(len(secret) - size + 1) if secret[i : i + size] in text]


async def test_the_websocket_frame_log_when_opted_in_keeps_no_piece_of_a_token(tmp_path):
    """The websockets frame log (DEBUG) cuts a frame to its first 48 and last 24 characters: the end
    of a token in an `auth` frame survived, without the prefix the masks recognise (finding 9c)."""
    env = base_env(AVM_ADMIN_KEY=API_KEY, AVM_LOG_LEVEL="DEBUG", AVM_LOG_WS_FRAMES="true")
    with avm_serve(tmp_path, free_port(), env=env) as server:
        for frame in [
            {"type": "auth", "headers": {"Authorization": f"Bearer {API_KEY}"}},
            {"type": "auth", "data": {"headers": {"Authorization": f"Bearer {API_KEY}"}}},
            {"type": "auth", "headers": {"authorization": API_KEY}},
        ]:
            for separators in ((",", ":"), (", ", ": ")):  # JSON.stringify's, and Python's
                async with websockets.connect(server.url) as ws:
                    await ws.send(json.dumps(frame, separators=separators))
                    await ws.send('{"type":"container_list_request","data":{"requestId":"r1"}}')
                    await ws.recv()
    output = server.output()
    assert "< TEXT" in output  # the frames were logged
    assert not _pieces_of(API_KEY, output), _pieces_of(API_KEY, output)
