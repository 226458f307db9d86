"""``avm chat --frames``: which frames the terminal client asks for."""

from __future__ import annotations

import argparse

import pytest

from agentvm.chat import add_chat_command, asks_for_batches


@pytest.mark.parametrize(
    "url",
    ["ws://127.0.0.1:8080/ws", "ws://localhost:8080/ws", "ws://[::1]:8080/ws", "ws://127.0.0.2:9/ws"],
)
def test_auto_takes_one_frame_per_message_from_a_server_on_this_machine(url: str) -> None:
    assert asks_for_batches("auto", url) is False


@pytest.mark.parametrize(
    "url",
    [
        "wss://a1b2c3.execute-api.us-east-1.amazonaws.com/prod",
        "ws://10.0.0.5:8080/ws",
        "ws://agents.example/ws",
    ],
)
def test_auto_asks_a_remote_server_for_batched_frames(url: str) -> None:
    assert asks_for_batches("auto", url) is True


def test_an_explicit_choice_wins_over_the_address() -> None:
    assert asks_for_batches("batch", "ws://127.0.0.1:8080/ws") is True
    assert asks_for_batches("single", "wss://a1b2c3.execute-api.us-east-1.amazonaws.com/prod") is False


def test_the_command_defaults_to_auto_and_refuses_other_modes(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="avm")
    add_chat_command(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["chat"]).frames == "auto"
    assert parser.parse_args(["chat", "--frames", "single"]).frames == "single"
    with pytest.raises(SystemExit):
        parser.parse_args(["chat", "--frames", "fast"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err
