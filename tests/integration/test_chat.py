"""``avm chat`` driven through a pseudo-terminal, as a person uses it, against a real ``avm serve``
(the echo model, slowed so that a turn can be interrupted mid-stream) and with ``--local``.

What a person sees is checked: the streamed reply, a tool call and its result, an approval
answered at the prompt, an MCP server's question answered a field per line, Ctrl-C interrupting
the turn but not the chat, ``/interrupt``,
``/history``, ``/usage``, ``/image`` (list, new, switch), and Ctrl-C twice at the prompt to quit.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.avm_process import avm_serve, base_env, free_port
from tests.mcp_servers.fixtures import stdio_config

LONG = " ".join(f"word{i}" for i in range(80))
CONFIG = json.dumps(
    {
        "tools": [{"type": "builtin", "name": "calculator"}, {"type": "builtin", "name": "current_time"}],
        "approval": {"tools": ["current_time"]},
    }
)


class Terminal:
    """A program on the child side of a pty: ``send`` types, ``expect`` reads what it printed."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal (Ctrl-C -> SIGINT)
            try:
                os.execve(sys.executable, [sys.executable, "-m", "agentvm.cli.main", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = ""
        self.pos = 0  # what was matched already: an expectation reads after it
        self.status: int | None = None

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child closed the pty (it exited)
            return False
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return bool(data)

    def expect(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.output, self.pos)
            if match:
                self.pos = match.end()
                return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{pattern!r} not shown; the screen after it:\n{self.output[self.pos :]}"
                )
            self._read(0.1)

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def line(self, text: str) -> None:
        self.send(text + "\n")

    def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        raise AssertionError("avm chat did not exit:\n" + self.output[-2000:])

    def close(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def server(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="25", AVM_FLUSH_MS="10")
    with avm_serve(tmp_path / "server", free_port(), env=env) as server:
        yield server


@contextlib.contextmanager
def chat(*args: str):
    term = Terminal(["chat", *args], base_env(NO_COLOR="1"))
    try:
        yield term
    finally:
        term.close()


def test_a_chat_streams_replies_renders_tools_interrupts_and_shows_history(server):
    with chat(
        "--url", server.url, "--key", server.admin_token(), "--container", "c1", "--config", CONFIG
    ) as t:
        t.expect(r"\[chat\] container c1, image (img_\S+) \(Chat\)")
        t.expect("you> ")

        t.line("Hello there")  # a waiting line until the first token, erased by the reply
        t.expect(r"\n\[waiting for the model…\]\r\x1b\[KEcho: Hello there\n")
        t.expect("you> ")

        t.line('/tool calculator {"expression": "6*7"}')
        t.expect(r'\[tool\] calculator \{"expression": "6\*7"\}\n')
        t.expect(r"\[tool\] calculator -> 42\n")
        t.expect(r"Echo: calculator returned: 42\n")
        t.expect("you> ")

        t.line("/tool current_time {}")  # needs approval: asked at the prompt
        t.expect(r"\[approval\] current_time \{\}: approve\? \[y/N\] ")
        t.line("n")
        t.expect(r"\[tool\] current_time failed: Execution denied: denied in avm chat")
        t.expect("you> ")

        t.line(LONG)  # Ctrl-C mid-stream interrupts the turn, not the chat
        t.expect(r"Echo: word0 word1 word2 ")
        t.send("\x03")
        t.expect(r"\^C\n\[chat\] interrupting the turn")  # ^C: the terminal's echo, shown once
        t.expect(r"\[interrupted\]\n")
        t.expect("you> ")
        t.line("still here?")
        t.expect(r"Echo: still here\?\n")
        t.expect("you> ")

        t.line(LONG)  # /interrupt typed while it streams does the same
        t.expect(r"Echo: word0 word1 ")
        t.line("/interrupt")
        t.expect(r"\[interrupted\]\n")
        t.expect("you> ")

        t.line("/history")
        t.expect(r"user: Hello there\nassistant: Echo: Hello there\n")
        t.expect(r'\[tool\] calculator \{"expression": "6\*7"\}\n\[tool\] calculator -> 42\n')
        t.expect(r"\[tool\] current_time execution-denied: Execution denied: denied in avm chat\n")
        partial = t.expect(r"assistant: (Echo: word0 word1[^\n]*)\n").group(1)
        assert len(partial) < len("Echo: " + LONG)  # the interrupted reply, as far as it went
        t.expect("you> ")

        t.line("/usage")
        t.expect(r"this chat: 6 turns, \d+ input \+ \d+ output tokens")
        t.expect(r"container c1: \d+ turns, \d+ input \+ \d+ output = \d+ tokens \(GET /v1/usage\)")

        t.line("/image new Second")
        second = t.expect(r"\[chat\] image (img_\S+) \(Second\)").group(1)
        t.line("/image")
        t.expect(rf"\* 1  {second}  Second\n  2  img_\S+  Chat\n")
        t.line("/image 2")
        t.expect(r"\[chat\] image img_\S+ \(Chat\)")
        t.expect("you> ")

        t.send("\x03")  # at the prompt: asks for a second one
        t.expect(r"press Ctrl-C again to quit")
        t.send("\x03")
        assert t.wait() == 0
        assert t.output.count("^C") == 3  # three Ctrl-C, each echoed once (by the terminal)


def test_a_chat_with_its_own_local_server(tmp_path):
    with chat("--local", "--data-dir", str(tmp_path / "data")) as t:
        t.expect(r"\[chat\] container chat, image img_\S+ \(Chat\)", timeout=40)
        t.expect("you> ")
        t.line("hi from local")
        t.expect(r"Echo: hi from local\n")
        t.expect("you> ")
        t.line("/usage")
        t.expect(r"container chat: 1 turns")
        t.line("/quit")
        assert t.wait() == 0
    assert (tmp_path / "data" / "serve.log").exists()


def test_a_bad_key_is_reported_and_the_chat_exits(server):
    with chat("--url", server.url, "--key", "avm_nope") as t:
        t.expect(r"AuthenticationFailed: the server refused the key \(HTTP 401\)")
        assert t.wait() == 1


def test_no_key_says_how_to_get_one(server):
    with chat("--url", server.url) as t:
        t.expect(r"the server wants an API key: give --key")
        t.expect(r"avm keys create --tenant default")
        assert t.wait() == 1
        assert "Traceback" not in t.output
        assert "connection is not authenticated" not in t.output


def test_piped_input_sends_each_line_and_prints_the_replies(server):
    lines = 'first line\nsecond line\n/tool calculator {"expression": "2+3"}\n'
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentvm.cli.main",
            "chat",
            "--url",
            server.url,
            "--key",
            server.admin_token(),
            "--config",
            CONFIG,
        ],
        input=lines,
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Echo: first line\n" in out
    assert "Echo: second line\n" in out
    assert "[tool] calculator -> 5\n" in out
    assert out.index("Echo: first line") < out.index("Echo: second line")  # in order, none dropped
    assert "you> " not in out and "waiting" not in out  # no prompt, no indicator into a pipe
    assert "Traceback" not in done.stderr


def test_config_applies_to_a_container_that_already_has_an_image(server):
    key = server.admin_token()
    with chat("--url", server.url, "--key", key, "--container", "c2") as t:  # no tools
        first = t.expect(r"image (img_\S+) \(Chat\)").group(1)
        t.expect("you> ")
        t.line("/quit")
        assert t.wait() == 0
    with chat("--url", server.url, "--key", key, "--container", "c2", "--config", CONFIG) as t:
        second = t.expect(r"image (img_\S+) \(Chat\)").group(1)
        assert second != first  # a new image, made with the asked config
        t.expect("you> ")
        t.line('/tool calculator {"expression": "6*7"}')
        t.expect(r"\[tool\] calculator -> 42\n")
        t.expect("you> ")
        t.line("/quit")
        assert t.wait() == 0
    with chat("--url", server.url, "--key", key, "--image", first, "--config", CONFIG) as t:
        t.expect(r"--image chats with an existing image, whose config is fixed")
        assert t.wait() == 2


def test_an_mcp_servers_question_is_answered_a_field_per_line(tmp_path):
    config = json.dumps({"mcpServers": {"people": stdio_config()}})  # its ``ask`` tool elicits
    env = base_env(AVM_MCP_LIST_DEADLINE_S="30")  # a busy machine starts the server slowly
    with (
        avm_serve(tmp_path / "server", free_port(), env=env) as server,
        chat(
            "--url", server.url, "--key", server.admin_token(), "--container", "c1", "--config", config
        ) as t,
    ):
        t.expect("you> ")
        t.line('/tool ask {"question": "Who are you?"}')
        t.expect(r"\[question\] ask asks: Who are you\?\n")
        t.expect(r"  Name \(string\) \*: ")
        t.line("Ada")
        t.expect(r"  Age \(integer\) \*: ")
        t.line("old")  # not a number: asked again
        t.expect(r"a whole number, please\n")
        t.expect(r"  Age \(integer\) \*: ")
        t.line("200")  # the server's schema says at most 150: the form is asked again
        t.expect(r"\[question\] .*150.*; again \(/decline or /cancel to refuse\)\n")
        t.expect(r"  Name \(string\) \*: ")
        t.line("Ada")
        t.expect(r"  Age \(integer\) \*: ")
        t.line("36")
        t.expect(r"Echo: ask returned: accepted: Ada, 36\n")
        t.expect("you> ")
        t.line('/tool ask {"question": "Again?"}')
        t.expect(r"  Name \(string\) \*: ")
        t.line("/decline")
        t.expect(r"Echo: ask returned: decline\n")
        t.expect("you> ")
        t.line("/quit")
        assert t.wait() == 0
