"""The last few KB a stdio MCP server wrote to its stderr, for the log line of a start failure or
a crash (instead of ``/dev/null``).

The child writes into a pipe; a daemon thread drains it into a buffer that keeps only the tail, so
a chatty server costs a bounded amount of memory and never blocks on a full pipe. The environment
is never in it (only what the server itself printed).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TextIO

DEFAULT_LIMIT = 4096


class StderrTail:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = limit
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w")  # the child's stderr (``errlog``)
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 4096):
                with self._lock:
                    self._buffer += chunk
                    del self._buffer[: -self._limit]
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)

    def release(self) -> None:
        """Close this process's copy of the write end: the drain ends when the child's does."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self, *, settle_s: float = 0.3) -> str:
        """The tail so far, decoded; waits up to ``settle_s`` for a child that just exited to be drained."""
        self.release()
        self._thread.join(settle_s)
        with self._lock:
            data = bytes(self._buffer)
        text = data.decode("utf-8", errors="replace")
        if len(data) >= self._limit and "\n" in text:
            text = text[text.index("\n") + 1 :]  # start at a whole line
        return text.strip()


__all__ = ["DEFAULT_LIMIT", "StderrTail"]
