"""What the stock AgentX UI shows is what was stored: the official agentxjs 1.9.0 client and the UI's
conversation reducer (built from the public source, ``agentx_ui_client``), connected over
WebSocket to a real ``avm serve``, render every reply exactly as the server stored it, with two
subscribers on the session and the machine busy, and after an interrupt too.

The stock UI drops a ``text_delta`` that arrives before it has an assistant conversation, which it
opens when ``message_send_response`` arrives, and ends the reply at ``conversation_end``: a server
that lets any of a turn's frames overtake the response, or text overtake the end, shows the user
something else than what it stored and billed (issue 27).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest

from tests.integration.agentx_ui_client import missing_tools, run_ui
from tests.integration.avm_process import avm_serve, base_env, free_port

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")


@contextlib.contextmanager
def busy_machine(processes: int = 2):
    """Busy-loop processes, one per core: the server and the client compete for the CPU."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def check_protocol_order(events: list[dict]) -> None:
    """Each turn's frames as the protocol orders them: a message's text, ``conversation_responding``
    and ``message_stop`` between its ``message_start`` and ``message_stop``, its
    ``assistant_message`` after its start, and no text after ``interrupted``. For the sender, the
    ``message_send_response`` before anything of the turn it started."""
    kinds = [e["type"] for e in events]
    in_message = in_turn = False
    for index, kind in enumerate(kinds):
        if kind == "message_send_response":
            assert not in_turn, f"message_send_response at {index} after its turn began: {kinds}"
        elif kind == "message_start":
            in_message = in_turn = True
        elif kind in ("text_delta", "conversation_responding", "message_stop"):
            assert in_message, f"{kind} at {index} outside a message: {kinds}"
            in_message = kind != "message_stop"
        elif kind == "assistant_message":
            assert in_turn, f"assistant_message at {index} before its message_start: {kinds}"
        elif kind == "conversation_end":
            in_message = in_turn = False
        elif kind == "interrupted":
            assert "text_delta" not in kinds[index:], f"text after interrupted: {kinds}"


@pytest.fixture
def server(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="3")
    with avm_serve(tmp_path / "data", free_port(), env=env) as running:
        yield running


def test_every_reply_renders_as_stored_with_two_subscribers_on_a_busy_machine(server, tmp_path):
    messages = [f"Hello UI {n}, how are you today?" for n in range(8)]
    scenario = {
        "name": "order",
        "url": server.url,
        "token": server.admin_token(),
        "containerId": "ui",
        "clients": 2,
        "messages": messages,
    }
    with busy_machine():
        result = run_ui(scenario, tmp_path)

    assert result["stored"] == [f"Echo: {m}" for m in messages]
    for reply, stored in zip(result["replies"], result["stored"], strict=True):
        assert reply["rendered"] == stored, result["streams"][reply["sender"]]
    for events in result["streams"]:  # both subscribers: the sender and the one watching
        assert [e["type"] for e in events].count("conversation_end") == len(messages)
        check_protocol_order(events)


@pytest.fixture
def slow_server(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="25")  # the echo model streams a word every 25 ms
    with avm_serve(tmp_path / "data", free_port(), env=env) as running:
        yield running


def test_an_interrupted_reply_renders_what_was_stored_and_interrupted_follows_its_text(slow_server, tmp_path):
    message = " ".join(f"word{n}" for n in range(200))
    scenario = {
        "name": "interrupt",
        "url": slow_server.url,
        "token": slow_server.admin_token(),
        "containerId": "ui",
        "clients": 2,
        "messages": [message],
        "interruptAfterChars": 40,
    }
    with busy_machine():
        result = run_ui(scenario, tmp_path)

    [stored] = result["stored"]
    assert 40 <= len(stored) < len(f"Echo: {message}")  # interrupted mid-reply, the partial text kept
    [reply] = result["replies"]
    assert reply["rendered"] == stored
    assert len(result["streams"]) == 3  # the sender, a client watching, one that joined mid-reply
    for events in result["streams"]:
        kinds = [e["type"] for e in events]
        assert kinds.count("interrupted") == 1
        check_protocol_order(events)  # no text after `interrupted`
        streamed = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
        assert streamed == stored
        assert events[kinds.index("conversation_end")]["data"] == {"reason": "interrupted"}
