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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(counter_file: Path | None = None):
    """The test server over Streamable HTTP; yields its config (``{"type": "http", "url": ...}``)."""
    port = _free_port()
    env = {"MCP_COUNTER_FILE": str(counter_file)} if counter_file else {}
    import os

    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the test MCP server did not start")
            time.sleep(0.05)
        yield {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
