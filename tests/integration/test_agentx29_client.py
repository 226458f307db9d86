"""The official AgentX 2.9.0 client against a real ``avm serve``: ``agentxjs`` built from its public
source (``agentx2_client``), used as its README's remote mode uses it (``createAgentX().connect``
with the key in its headers, ``chat.list``, ``chat.create``, ``send`` with the ``text_delta``
stream, ``history``, ``chat.get``, ``delete``), with a client key of a tenant of its own. The same
flow runs against the AWS handlers on moto in ``tests/functions/test_agentx29_client_aws.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.agentx2_client import missing_tools, run_client
from tests.integration.avm_process import TOKEN_RE, avm_serve, base_env, free_port, run_avm

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")

MESSAGES = ["Hello from agentxjs 2.9", "A second message"]
FOLLOW_UP = "And one through chat.get"
CUSTOM_DATA = {"favorited": True, "sortOrder": 1, "tags": ["work"]}
UPDATED_CUSTOM_DATA = {"favorited": False}


def flow_scenario(url: str, token: str | None) -> dict[str, Any]:
    return {
        "name": "flow",
        "url": url,
        "token": token,
        "agentName": "Aristotle",
        "systemPrompt": "Answer briefly.",
        "customData": CUSTOM_DATA,
        "messages": MESSAGES,
        "followUp": FOLLOW_UP,
        "bareModel": "claude-sonnet-4-6",
        "updatedCustomData": UPDATED_CUSTOM_DATA,
    }


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")


def check_turn(turn: dict[str, Any], message: str, instance_id: str, image_id: str) -> None:
    """One ``agent.send``: answered when the turn ended, its text streamed in order."""
    answer = turn["answer"]
    assert (answer["status"], answer["instanceId"], answer["imageId"]) == ("completed", instance_id, image_id)
    assert turn["deltas"] == f"Echo: {message}"
    kinds = turn["types"]
    assert kinds.count("conversation_end") == 1 and turn["end"]["data"] == {"reason": "completed"}
    first_text, last_text = kinds.index("text_delta"), len(kinds) - 1 - kinds[::-1].index("text_delta")
    assert kinds.index("message_start") < first_text
    assert last_text < kinds.index("message_stop") < kinds.index("assistant_message")
    assert kinds.index("assistant_message") < kinds.index("conversation_end")


def check_flow(steps: list[dict[str, Any]], default_provider: str) -> None:
    """What the stock client's flow saw, step by step (``agentx2_client/driver.mjs``)."""
    by_step: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_step.setdefault(step["step"], []).append(step)
    assert "error" not in by_step, by_step["error"]
    assert [s["step"] for s in steps][-1] == "done"

    assert by_step["connect"] == [{"step": "connect", "connected": True}]
    assert by_step["list"][0]["records"] == []  # a tenant of its own: nothing yet
    [created] = by_step["create"]
    instance_id, image_id = created["instanceId"], created["imageId"]
    assert instance_id.startswith("agent_") and image_id.startswith("img_") and instance_id != image_id
    assert created["containerId"] == "default" and created["sessionId"].startswith("sess_")

    sends = by_step["send"]
    assert [s["message"] for s in sends] == MESSAGES
    for turn in sends:
        check_turn(turn, turn["message"], instance_id, image_id)

    [history] = by_step["history"]
    assert [(m["role"], _text(m)) for m in history["messages"]] == [
        pair for m in MESSAGES for pair in (("user", m), ("assistant", f"Echo: {m}"))
    ]
    [listed] = by_step["list_after"]
    assert listed["records"] == [{"imageId": image_id, "name": "Aristotle", "customData": CUSTOM_DATA}]

    [again] = by_step["get"]  # chat.get runs the image again: the same running agent
    assert again == {
        "step": "get",
        "instanceId": instance_id,
        "imageId": image_id,
        "sessionId": created["sessionId"],
    }
    [follow_up] = by_step["send_again"]
    check_turn(follow_up, FOLLOW_UP, instance_id, image_id)
    [history_again] = by_step["history_again"]
    assert [_text(m) for m in history_again["messages"][-2:]] == [FOLLOW_UP, f"Echo: {FOLLOW_UP}"]

    assert by_step["get_missing"] == [{"step": "get_missing", "handle": None}]  # 2.x: record null
    # a bare model is that model on the server's default provider (here the echo model, which
    # answers for any name); an update replaces the customData
    assert by_step["bare_model"] == [
        {
            "step": "bare_model",
            "model": f"{default_provider}/claude-sonnet-4-6",
            "customData": UPDATED_CUSTOM_DATA,
            "status": "completed",
            "deltas": "Echo: Hi Plato",
        }
    ]
    assert by_step["delete"] == [{"step": "delete", "records": []}]


@pytest.fixture
def server(tmp_path):
    with avm_serve(tmp_path / "data", free_port(), env=base_env()) as running:
        running.admin_token()  # the first start's key is printed: the server is set up
        yield running


def client_key(data_dir, tenant: str) -> str:
    made = run_avm("keys", "create", "--data-dir", str(data_dir), "--tenant", tenant, "--scope", "client")
    [key] = TOKEN_RE.findall(made.stdout + made.stderr)
    return key


def test_the_stock_2_9_client_creates_a_chat_streams_its_replies_and_reads_history(server, tmp_path):
    key = client_key(tmp_path / "data", "acme")
    check_flow(run_client(flow_scenario(server.url, key), tmp_path), default_provider="echo")


@pytest.fixture
def slow_server(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="25")  # the echo model streams a word every 25 ms
    with avm_serve(tmp_path / "data", free_port(), env=env) as running:
        running.admin_token()
        yield running


LONG_MESSAGE = " ".join(f"word{n}" for n in range(200))


def interrupt_scenario(url: str, token: str | None) -> dict[str, Any]:
    return {
        "name": "interrupt",
        "url": url,
        "token": token,
        "message": LONG_MESSAGE,
        "interruptAfterChars": 40,
    }


def check_interrupt(steps: list[dict[str, Any]]) -> None:
    """``agent.interrupt()`` mid-reply: the send answered ``interrupted``, no text after the end,
    and the history keeps exactly the partial text the client was streamed."""
    assert [s["step"] for s in steps] == ["connect", "interrupt", "done"], steps
    turn = steps[1]
    assert turn["answer"]["status"] == "interrupted"
    assert turn["interrupted"]["instanceId"] == turn["answer"]["instanceId"]
    assert turn["end"]["data"] == {"reason": "interrupted"}
    kinds = turn["types"]
    assert "text_delta" not in kinds[kinds.index("conversation_end") :]
    streamed = turn["deltas"]
    assert 40 <= len(streamed) < len(f"Echo: {LONG_MESSAGE}")
    user, assistant = turn["history"]
    assert (user["role"], _text(user)) == ("user", LONG_MESSAGE)
    assert (assistant["role"], _text(assistant)) == ("assistant", streamed)


def test_the_stock_2_9_client_interrupts_a_reply_and_history_keeps_what_was_streamed(slow_server, tmp_path):
    key = client_key(tmp_path / "data", "acme")
    check_interrupt(run_client(interrupt_scenario(slow_server.url, key), tmp_path))


WRITE = '/tool write {"path": "notes/a.txt", "content": "hello file"}'  # the echo model calls the tool


def _blocks_text(conversation: dict[str, Any]) -> str:
    return "".join(b["content"] for b in conversation["blocks"] if b["type"] == "text")


def test_the_stock_2_9_presentation_loads_history_renders_replies_and_lists_the_workspace(server, tmp_path):
    """``agent.present()``, the client's UI layer: the conversations it loads from the history and
    those it renders live from the stream; its file list is the image's sandbox workspace (an
    image without one has no files: the presentation still works, in Node too)."""
    key = client_key(tmp_path / "data", "acme")
    base = {"name": "present", "url": server.url, "token": key}
    (tmp_path / "plain").mkdir()
    (tmp_path / "boxed").mkdir()
    plain = run_client({**base, "messages": ["First one", "Second one"]}, tmp_path / "plain")
    boxed = run_client(
        {
            **base,
            "messages": [WRITE, "Second one"],
            "tools": [{"type": "sandbox"}],
            "readPath": "notes/a.txt",
        },
        tmp_path / "boxed",
    )

    for steps in (plain, boxed):
        assert [s["step"] for s in steps] == ["connect", "present", "done"], steps
    shown = plain[1]
    assert [(c["role"], _blocks_text(c)) for c in shown["conversations"]] == [
        ("user", "First one"),
        ("assistant", "Echo: First one"),
        ("user", "Second one"),
        ("assistant", "Echo: Second one"),
    ]
    assert shown["loaded"] == shown["conversations"][:2]  # what present() loaded from the history
    assert [_text(m) for m in shown["history"] if m["role"] == "assistant"] == [
        _blocks_text(c) for c in shown["conversations"] if c["role"] == "assistant"
    ]
    assert (shown["status"], shown["files"], shown["read"]) == ("idle", [], None)

    tool_turn = boxed[1]
    [tool, text] = tool_turn["loaded"][1]["blocks"]
    assert (tool["type"], tool["toolName"], tool["status"]) == ("tool", "write", "completed")
    assert tool["toolInput"] == {"path": "notes/a.txt", "content": "hello file"}
    assert text == {"type": "text", "content": f"Echo: write returned: {tool['toolResult']}"}
    assert _blocks_text(tool_turn["conversations"][-1]) == "Echo: Second one"
    assert tool_turn["files"] == [{"name": "notes", "path": "notes", "type": "directory"}]
    assert tool_turn["read"] == "hello file"
