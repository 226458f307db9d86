"""The write side shared by the SQL log stores (SQLite locally, PostgreSQL on the cluster host):
log records handed to a writer thread through a bounded queue, so logging never waits on storage.

``ThreadedLogSink`` owns the queue and its ``QueueListener``; a store subclasses it with its own
``LogWriter`` (the handler that runs in the listener's thread and inserts the lines). When the
writer cannot keep up, a record is dropped and counted (``dropped``) rather than blocking the
caller; the standard library's ``QueueHandler``/``QueueListener`` do the rest.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue

QUEUE_SIZE = 100_000


class LogWriter(logging.Handler):
    """A store's writer: ``emit`` runs in the listener's thread; ``dropped`` counts lost lines."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0


class ThreadedLogSink:
    """A bounded queue of log records and the thread that hands them to ``writer``."""

    def __init__(self, writer: LogWriter) -> None:
        self._writer = writer
        self._queue: queue.Queue[logging.LogRecord] = queue.Queue(maxsize=QUEUE_SIZE)
        self._listener: logging.handlers.QueueListener | None = None

    @property
    def dropped(self) -> int:
        return self._writer.dropped

    def handler(self) -> logging.Handler:
        """The handler to put on the root logger (``logs.add_log_handler``); starts the writer."""
        if self._listener is None:
            self._listener = logging.handlers.QueueListener(self._queue, self._writer)
            self._listener.start()
        return _Enqueue(self._queue, self._writer)

    def flush(self) -> None:
        """Wait until every line handed over so far is written (tests, shutdown)."""
        self._queue.join()

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self._writer.close()


class _Enqueue(logging.handlers.QueueHandler):
    """Formats (with the root handlers' JSON formatter and filters) and hands the line over."""

    def __init__(self, q: queue.Queue[logging.LogRecord], writer: LogWriter) -> None:
        super().__init__(q)
        self._writer = writer

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:  # the writer cannot keep up: drop rather than block the caller
            self._writer.dropped += 1


__all__ = ["QUEUE_SIZE", "LogWriter", "ThreadedLogSink"]
