"""Running ``avm`` as a real subprocess for acceptance tests: ``avm serve`` and the CLI."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import httpx

TOKEN_RE = re.compile(r"avm_[0-9a-z]{12}_[A-Za-z0-9_-]{43}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra: str) -> dict[str, str]:
    """The test process's environment without provider keys, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("AVM_")}
    env["AVM_ECHO_DELAY_MS"] = "2"
    env.update(extra)
    return env


def run_avm(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentvm.cli.main", *args],
        env=env or base_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class AvmServer:
    proc: subprocess.Popen
    port: int
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def printed_tokens(self) -> list[str]:
        return TOKEN_RE.findall("".join(self.stdout))

    def admin_token(self, timeout: float = 5.0) -> str:
        """The admin key the first start printed (printed before the server listens)."""
        deadline = time.monotonic() + timeout
        while not self.printed_tokens() and time.monotonic() < deadline:
            time.sleep(0.02)
        [token] = self.printed_tokens()
        return token

    def output(self) -> str:
        return "".join(self.stdout) + "".join(self.stderr)


def _pump(stream, sink: list[str]) -> None:
    for line in iter(stream.readline, ""):
        sink.append(line)


@contextlib.contextmanager
def avm_serve(data_dir, port: int, *args: str, env: dict[str, str] | None = None):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentvm.cli.main",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            *args,
        ],
        env=env or base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = AvmServer(proc=proc, port=port)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, server.stdout), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, server.stderr), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    try:
        deadline = time.monotonic() + 60  # a busy machine starts Python slowly
        while True:
            try:
                if httpx.get(f"{server.http}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("avm serve did not start:\n" + server.output())
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for pump in pumps:
            pump.join(timeout=5)
