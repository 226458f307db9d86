"""``avm serve --workers N``: several server processes on one port and one data dir.

One Python process serves its sockets, turns and provider streams on one core. With ``--workers N``
the command starts N worker processes (``avm serve`` again, with ``AVM_WORKER_ID`` w0..wN-1 and
``AVM_REUSE_PORT``): each binds the same port with ``SO_REUSEPORT`` and the kernel spreads new
connections over them; they share the SQLite store and turn queue (WAL), the connection registry
(``adapters/local/sqlite/connections.py``) and reach each other's sockets through the relay
(``adapters/local/relay.py``). docs/scaling.md says what is shared, what is per worker, and what
was measured.

This process only supervises: it forwards SIGINT/SIGTERM to the workers, restarts one that exits
unexpectedly (after a second; its running turns are picked up again from the queue), and stops
when asked, waiting for the workers to finish their shutdown.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.config import Settings

log = logging.getLogger("agentvm.hosts.workers")

RESTART_DELAY_S = 1.0


def worker_command(argv: list[str]) -> list[str]:
    """The workers' command line: this one without ``--workers``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--workers":
            skip = True
            continue
        if arg.startswith("--workers="):
            continue
        out.append(arg)
    return [sys.executable, "-m", "agentvm.cli.main", *out]


def run_workers(settings: Settings, argv: list[str]) -> int:
    command = worker_command(argv)
    stopping = False

    def start(index: int) -> subprocess.Popen[bytes]:
        env = {**os.environ, "AVM_WORKER_ID": f"w{index}", "AVM_REUSE_PORT": "true", "AVM_WORKERS": "1"}
        return subprocess.Popen(command, env=env)

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signum)

    workers = [start(i) for i in range(settings.workers)]
    log.info(
        "AgentVM workers started",
        extra={"workers": settings.workers, "pids": [p.pid for p in workers], "port": settings.port},
    )
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        time.sleep(0.2)
        for index, proc in enumerate(workers):
            code = proc.poll()
            if code is not None and not stopping:
                log.warning("a worker stopped; restarting it", extra={"worker": f"w{index}", "code": code})
                time.sleep(RESTART_DELAY_S)
                workers[index] = start(index)
    for proc in workers:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


__all__ = ["run_workers", "worker_command"]
