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


def test_the_chat_asks_for_no_cadence_by_default_and_for_economy_with_economy() -> None:
    from agentvm.chat import connection_mode

    remote = "wss://a1b2c3.execute-api.us-east-1.amazonaws.com/prod"
    assert connection_mode("auto", remote) == (True, None)  # batched, the server's live default
    assert connection_mode("auto", "ws://127.0.0.1:8080/ws") == (False, None)
    assert connection_mode("auto", "ws://127.0.0.1:8080/ws", economy=True) == (True, "economy")
    parser = argparse.ArgumentParser(prog="avm")
    add_chat_command(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["chat"]).economy is False
    assert parser.parse_args(["chat", "--economy"]).economy is True


def test_economy_with_single_frames_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from agentvm.chat import run_chat

    parser = argparse.ArgumentParser(prog="avm")
    add_chat_command(parser.add_subparsers(dest="command"))
    assert run_chat(parser.parse_args(["chat", "--frames", "single", "--economy"])) == 2
    assert "--economy needs batched frames" in capsys.readouterr().err


def test_the_sdk_adds_the_cadence_to_the_upgrade_url_only_when_asked() -> None:
    from agentvm.client.aio import with_frames_mode

    assert with_frames_mode("ws://h/ws") == "ws://h/ws?frames=batch"
    assert (
        with_frames_mode("ws://h/ws?token=t", cadence="economy")
        == "ws://h/ws?token=t&frames=batch&cadence=economy"
    )
    assert (
        with_frames_mode("ws://h/ws?cadence=live", cadence="economy") == "ws://h/ws?cadence=live&frames=batch"
    )
