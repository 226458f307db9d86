"""``avm chat --local``: an ``avm serve`` of its own, for one chat.

The server runs as a subprocess (``avm serve --open`` on a free loopback port: key-less, tenant
``local``) so that its logs never mix with the conversation: they go to ``serve.log`` in its data
dir. The data dir is a temporary one, removed at the end, unless ``--data-dir`` names one to keep
(then the next ``avm chat --local --data-dir`` finds the same images). Provider keys in the
environment reach it as they would reach ``avm serve``; with none, images use the echo model.

Needs the server's packages (``pip install 'agentvm-runtime[local]'``); the light ``agentvm-runtime[client]``
install can chat with a running server (``--url``) only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import Iterator


class LocalServerError(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(data_dir: Path | None = None, *, start_timeout: float = 30.0) -> Iterator[str]:
    """Start ``avm serve --open``; yields its WebSocket URL; stops it (and removes a temporary data
    dir) on exit."""
    missing = [m for m in ("fastapi", "uvicorn", "pydantic_settings") if importlib.util.find_spec(m) is None]
    if missing:
        raise LocalServerError(
            "--local runs a server, which needs the server's packages "
            f"(missing: {', '.join(missing)}): pip install 'agentvm-runtime[local]', or chat with a running "
            "server: avm chat --url ws://HOST:PORT/ws --key KEY"
        )
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="avm-chat-")))
        data_dir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        log = stack.enter_context(open(data_dir / "serve.log", "ab"))  # noqa: SIM115 (closed by the stack)
        env = {k: v for k, v in os.environ.items() if k not in ("AVM_HOST", "AVM_PORT", "AVM_DATA_DIR")}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentvm.cli.main",
                "serve",
                "--open",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,  # Ctrl-C in the chat interrupts a turn, not the server
        )
        stack.callback(_stop, proc)
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LocalServerError(f"the local server did not start; see {data_dir / 'serve.log'}")
            time.sleep(0.1)
        yield f"ws://127.0.0.1:{port}/ws"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


__all__ = ["LocalServerError", "local_server"]
