"""Starting the test MCP server: its stdio config, or a Streamable HTTP subprocess on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("tools_server.py")


def stdio_config(counter_file: Path | None = None) -> dict[str, Any]:
    env = {"MCP_COUNTER_FILE": str(counter_file)} if counter_file else {}
    return {"command": sys.executable, "args": [str(SERVER)], "env": env}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(counter_file: Path | None = None):
    """The test server over Streamable HTTP; yields its config (``{"type": "http", "url": ...}``)."""
    env = {"MCP_COUNTER_FILE": str(counter_file)} if counter_file else {}
    port = free_port()
    with served_over_http(
        [sys.executable, str(SERVER), "http", str(port)], port, env, "the test MCP server"
    ) as c:
        yield c


@contextlib.contextmanager
def served_over_http(argv: list[str], port: int, env: dict[str, str], what: str, start_s: float = 30):
    """Runs an MCP server process listening on ``port``; yields its Streamable HTTP config once it
    accepts connections, and stops it after."""
    import os

    proc = subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + start_s
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start over Streamable HTTP")
            time.sleep(0.05)
        yield {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
