"""How the workers of one data dir reach each other's sockets: the local host's ``@connections``.

With ``avm serve --workers N`` (docs/scaling.md) a turn runs on the worker that received its
``message_send``, while its subscribers may be connected to any worker. Each worker listens on a
Unix socket, ``<data_dir>/workers/<worker>.sock``; ``RelayPush`` (the ``Push`` port) sends a frame
for one of its own connections straight to the socket's writer, and one for another worker's
connection over that worker's Unix socket (the owner is looked up once in ``SqliteConnections``
and remembered), which writes it to its client. Frames for one connection keep their order: one
stream per pair of workers, read in order.

The same channel carries two more messages to every other worker: an interrupt (the gateway that
received ``agent_interrupt_request`` fires the turn's in-process signal everywhere, so the worker
running it stops at once, as in one process) and a queue wake-up (a job was enqueued or finished:
the others look at the shared queue now rather than at their next poll).

A frame for another worker's connection is fire-and-forget, like a post to API Gateway that
returned 200: if that socket has closed meanwhile, its worker drops the frame (the client resumes
from its last seq). A worker that cannot be reached at all (it stopped) makes the send raise
``ConnectionGone``, and the turn prunes the connection, as a 410 does on AWS.

Wire format: ``kind`` (1 byte), length (4 bytes, big-endian), body; a frame's body is the
connection id, a NUL, and the payload (UTF-8).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import TYPE_CHECKING

from agentvm.errors import ConnectionGone
from agentvm.runtime import CancelSignals

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from agentvm.adapters.local.sqlite.connections import SqliteConnections

log = logging.getLogger("agentvm.relay")

_HEAD = struct.Struct("!BI")
FRAME, CANCEL, WAKE = 1, 2, 3
_DRAIN_ABOVE = 1 << 20  # bytes waiting for a worker before a send waits for it to read


class RelayPush:
    """``agentvm.ports.Push`` across the workers of one data dir (see the module docstring)."""

    def __init__(self, directory: Path, connections: SqliteConnections) -> None:
        self.directory = directory
        self.worker = connections.worker
        self._connections = connections
        self._senders: dict[str, Callable[[str], Awaitable[None]]] = {}  # this worker's sockets
        self._owners: dict[str, str] = {}  # other workers' connections -> their worker
        self._peers: dict[str, asyncio.StreamWriter] = {}
        self._peer_locks: dict[str, asyncio.Lock] = {}
        self._server: asyncio.AbstractServer | None = None
        self.on_cancel: Callable[[str], None] | None = None
        self.on_wake: Callable[[], None] | None = None

    @property
    def path(self) -> Path:
        return self.directory / f"{self.worker}.sock"

    # -- this worker's sockets (what LocalPush does in one process) ----------------------------
    def attach(self, connection_id: str, send: Callable[[str], Awaitable[None]]) -> None:
        self._senders[connection_id] = send

    def detach(self, connection_id: str) -> None:
        self._senders.pop(connection_id, None)

    async def send(self, connection_id: str, payload: str) -> None:
        local = self._senders.get(connection_id)
        if local is not None:
            try:
                await local(payload)
            except Exception as exc:  # the socket closed under us: same as API Gateway's 410
                self._senders.pop(connection_id, None)
                raise ConnectionGone(f"connection {connection_id} is gone") from exc
            return
        owner = self._owners.get(connection_id)
        if owner is None:
            owner = self._connections.worker_of(connection_id)
            if owner is None or owner == self.worker:  # unknown, or ours and already closed
                raise ConnectionGone(f"connection {connection_id} is gone")
            self._owners[connection_id] = owner
        body = connection_id.encode() + b"\0" + payload.encode()
        try:
            await self._post(owner, FRAME, body)
        except OSError as exc:
            self._owners.pop(connection_id, None)
            raise ConnectionGone(f"connection {connection_id}: its worker {owner} is unreachable") from exc

    # -- messages to every other worker ----------------------------------------------------------
    def broadcast_cancel(self, turn_id: str) -> None:
        self._broadcast(CANCEL, turn_id.encode())

    def broadcast_wake(self) -> None:
        self._broadcast(WAKE, b"")

    def _broadcast(self, kind: int, body: bytes) -> None:
        for path in self.directory.glob("*.sock"):
            worker = path.stem
            if worker != self.worker:
                task = asyncio.ensure_future(self._post_quietly(worker, kind, body))
                task.add_done_callback(_forget)

    async def _post_quietly(self, worker: str, kind: int, body: bytes) -> None:
        with contextlib.suppress(OSError):  # a stopped worker's socket file: nothing to tell it
            await self._post(worker, kind, body)

    async def _post(self, worker: str, kind: int, body: bytes) -> None:
        writer = self._peers.get(worker)
        if writer is None or writer.is_closing():
            lock = self._peer_locks.setdefault(worker, asyncio.Lock())
            async with lock:  # one connection per peer, even when many sends start at once
                writer = self._peers.get(worker)
                if writer is None or writer.is_closing():
                    _, writer = await asyncio.open_unix_connection(str(self.directory / f"{worker}.sock"))
                    self._peers[worker] = writer
        writer.write(_HEAD.pack(kind, len(body)) + body)
        transport = writer.transport
        if transport.get_write_buffer_size() > _DRAIN_ABOVE:
            await writer.drain()

    # -- this worker's listener ------------------------------------------------------------------
    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by this worker's previous run
        self._server = await asyncio.start_unix_server(self._serve, str(self.path))
        self.path.chmod(0o600)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                kind, size = _HEAD.unpack(await reader.readexactly(_HEAD.size))
                body = await reader.readexactly(size)
                if kind == FRAME:
                    connection_id, _, payload = body.partition(b"\0")
                    local = self._senders.get(connection_id.decode())
                    if local is not None:
                        with contextlib.suppress(Exception):  # closed since: the client resumes
                            await local(payload.decode())
                elif kind == CANCEL and self.on_cancel is not None:
                    self.on_cancel(body.decode())
                elif kind == WAKE and self.on_wake is not None:
                    self.on_wake()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        for writer in self._peers.values():
            writer.close()
        self._peers.clear()


class RelaySignals(CancelSignals):
    """Interrupt signals that reach the turn's worker whichever worker the interrupt arrived on."""

    relay: RelayPush | None = None

    def fire(self, turn_id: str) -> None:
        super().fire(turn_id)
        if self.relay is not None:
            self.relay.broadcast_cancel(turn_id)

    def fire_here(self, turn_id: str) -> None:
        """An interrupt another worker relayed: this worker's turn, if it runs here."""
        super().fire(turn_id)


def _forget(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = ["CANCEL", "FRAME", "WAKE", "RelayPush", "RelaySignals"]
