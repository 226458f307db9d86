"""The full AgentX v1 flow against a real ``avm serve`` process, and persistence across a restart."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from agentvm.client import AgentVMClient


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def avm_serve(data_dir, port):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["AVM_ECHO_DELAY_MS"] = "2"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentvm.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("avm serve did not start:\n" + proc.stdout.read().decode())
            time.sleep(0.1)
        yield f"ws://127.0.0.1:{port}/ws"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def port():
    return _free_port()


async def test_v1_flow_streams_reply_and_history_survives_restart(tmp_path, port):
    with avm_serve(tmp_path, port) as url:
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["status"] == "ok" and health["version"]
        async with AgentVMClient.connect(url) as client:
            created = await client.request("container_create", containerId="user-alice", check=True)
            assert created["containerId"] == "user-alice"
            img = (
                await client.request(
                    "image_create",
                    containerId="user-alice",
                    config={"name": "A", "systemPrompt": "Hi"},
                    check=True,
                )
            )["record"]
            ack = await client.request(
                "message_send", imageId=img["imageId"], content="hello from alice", check=True
            )
            assert ack["imageId"] == img["imageId"] and ack["agentId"]
            events = [e async for e in client.turn_events(timeout=20)]
        agent = [e for e in events if e["source"] == "agent"]
        types = [e["type"] for e in agent]
        assert types[:4] == ["message_start", "conversation_start", "text_delta", "conversation_responding"]
        assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
        for e in agent:
            assert e["context"]["imageId"] == img["imageId"] and e["context"]["sessionId"] == img["sessionId"]
            assert e["context"]["containerId"] == "user-alice" and e["context"]["agentId"] == ack["agentId"]
        reply = "".join(e["data"]["text"] for e in agent if e["type"] == "text_delta")
        assert reply == "Echo: hello from alice"

    with avm_serve(tmp_path, port) as url:
        async with AgentVMClient.connect(url) as client:
            listed = await client.request("image_list", containerId="user-alice", check=True)
            assert [r["imageId"] for r in listed["records"]] == [img["imageId"]]
            history = await client.request("image_messages", imageId=img["imageId"], check=True)
    assert [(m["role"], m["subtype"]) for m in history["messages"]] == [
        ("user", "user"),
        ("assistant", "assistant"),
    ]
    assert history["messages"][0]["content"] == "hello from alice"
    assert history["messages"][1]["content"] == [{"type": "text", "text": "Echo: hello from alice"}]


async def test_server_answers_malformed_frames_and_keeps_serving(tmp_path, port):
    with avm_serve(tmp_path, port) as url:
        async with AgentVMClient.connect(url) as client:
            await client._ws.send("{definitely not json")
            error = await client.events.get()
            assert error["type"] == "system_error" and error["data"]["details"]["code"] == "bad_request"
            await client._ws.send("x" * 300_000)
            error = await client.events.get()
            assert error["data"]["details"]["code"] == "frame_too_large"
            assert (await client.request("container_list"))["containerIds"] == []
