"""The ``avm`` command line as a newcomer meets it: every subcommand's ``--help`` works, and the
common mistakes (a file that is not there, a pipe closed early, a busy port, a relative path through
``./dev``) end in one line on stderr and an exit code, never a traceback. (Missing extras are tested
on a real light install: test_client_install.py.)"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentvm.cli.main import _parser, main

REPO = Path(__file__).resolve().parents[2]
AVM = [sys.executable, "-m", "agentvm.cli.main"]


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the parser: ("serve",), ("keys", "create"), ..."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*prefix, name))
                found += _commands(sub, (*prefix, name))
    return found


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)])}


def test_every_subcommand_has_help_that_names_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(_parser())
    assert {("serve",), ("chat",), ("keys", "create"), ("sessions", "import")} <= set(commands)
    for command in commands:
        with pytest.raises(SystemExit) as exited:
            main([*command, "--help"])
        assert exited.value.code == 0, command
        out = capsys.readouterr().out
        assert out.startswith("usage: avm " + " ".join(command)), (command, out[:200])


def test_a_file_that_is_not_there_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *AVM,
            "sessions",
            "import",
            "ctr_1",
            "no-such-export.jsonl",
            "--url",
            "http://127.0.0.1:9",
            "--key",
            "k",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done
    assert "no-such-export.jsonl" in done.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    # `avm keys list ... | head -0`: the pipe's reader is gone before avm writes
    data = ["--data-dir", str(tmp_path / "data")]
    made = subprocess.run(
        [*AVM, "keys", "create", "--tenant", "t", *data],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [*AVM, "keys", "list", "--tenant", "t", *data],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            timeout=60,
        )
    finally:
        os.close(writer)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_a_busy_port_is_said_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*AVM, "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
    assert done.returncode == 2, done
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert "listening" not in (done.stdout + done.stderr).lower()


def test_dev_runs_commands_where_they_were_called_so_relative_paths_work(tmp_path: Path) -> None:
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("./dev has not set up .venv in this checkout")
    done = subprocess.run(
        [str(REPO / "dev"), "python", "-c", "import os; print(os.getcwd())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path)
