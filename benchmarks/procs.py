"""Starting AgentVM and the fake provider as real processes, and reading their CPU and memory.

``cpus``: pin a process to these CPUs with ``taskset -c`` (every thread it starts inherits it), so
the server does not share its cores with the load it is measured under (see ``benchmarks/local_load.py``
for how this 2-core machine is split).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import Iterator

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pinned(cmd: list[str], cpus: str | None) -> list[str]:
    """``cmd`` run on ``cpus`` (e.g. ``"0"`` or ``"1"``) with taskset, or as is without."""
    if cpus is None or shutil.which("taskset") is None:
        return cmd
    return ["taskset", "-c", cpus, *cmd]


def pin_self(cpus: str | None) -> None:
    """Pin this process (the load client) to ``cpus``."""
    if cpus is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    url: str

    def pids(self) -> list[int]:
        """The process and its descendants (``avm serve --workers N`` serves from its children)."""
        out, todo = [], [self.popen.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            with contextlib.suppress(OSError):
                todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        return out

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime
        return total

    def rss_bytes(self) -> int:
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        return total


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited: {proc.args}")
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, timeout=0.5)
            return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


@contextlib.contextmanager
def fake_llm(*args: str, cpus: str | None = None) -> Iterator[Proc]:
    port = free_port()
    cmd = [sys.executable, "-m", "agentvm.cli.main", "fake-llm", "--port", str(port), *args]
    proc = subprocess.Popen(pinned(cmd, cpus), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(f"http://127.0.0.1:{port}/_fake/stats", proc)
        yield Proc(proc, f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def avm_serve(
    data_dir: Path, env: dict[str, str], *, open_mode: bool = True, cpus: str | None = None
) -> Iterator[Proc]:
    """``avm serve`` on a free port: key-less (one tenant) unless ``open_mode`` is False, in which
    case clients need keys made with ``create_key`` on the same data dir."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full_env.update(
        {
            "AVM_OPEN": "true" if open_mode else "false",
            "AVM_LOG_LEVEL": "WARNING",
            # Every benchmark client connects from 127.0.0.1: the per-address caps (a defence
            # against one hostile address, SECURITY.md) would refuse the 257th. Raised here.
            "AVM_MAX_CONNECTIONS_PER_ADDRESS": "65536",
            "AVM_MAX_HTTP_CONNECTIONS_PER_ADDRESS": "65536",
            **env,
        }
    )
    cmd = [
        sys.executable,
        "-m",
        "agentvm.cli.main",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
    ]
    if open_mode and "--open" in _serve_help():
        cmd.append("--open")
    proc = subprocess.Popen(
        pinned(cmd, cpus), env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", proc)
        yield Proc(proc, f"ws://127.0.0.1:{port}/ws")
    finally:
        proc.terminate()
        proc.wait(10)


def create_key(data_dir: Path, tenant: str, *, rate_limit: int | None = None) -> str:
    """A client+admin key of ``tenant`` made with ``avm keys create``; returns its token."""
    cmd = [sys.executable, "-m", "agentvm.cli.main", "keys", "create", "--data-dir", str(data_dir)]
    cmd += ["--tenant", tenant, "--scope", "client", "--scope", "admin"]
    if rate_limit is not None:
        cmd += ["--rate-limit", str(rate_limit)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def _serve_help() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "agentvm.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout
