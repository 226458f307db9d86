"""Batched frames: an opt-in mode where one WebSocket message carries several frames.

Every WebSocket message is billed on AWS ($1 per million, per 32 KB), and a turn's stream is mostly
small frames: its start (``message_persisted``, ``message_start``, ``conversation_start``), the
merged text, its end (``message_stop``, ``assistant_message``, ``conversation_end``). A client that
declares the mode at the upgrade, with the query parameter ``frames=batch`` (``?frames=batch`` on
the WebSocket URL, next to ``?token=`` if any), is sent a **JSON array of frames** whenever more
than one frame is due at once; a single frame is still sent as itself. Each frame in an array is
exactly the frame a plain client gets (same ``type``, ``data``, ``context`` and ``seq``), in order.
A client that does not declare it (every AgentX client) keeps one frame per message: nothing
changes for it. docs/protocol.md, "Batched frames", is the contract; docs/cost.md the figures.

Besides merging what is due at once, a turn delivers to a batched subscriber on its own cadence
(``streaming.batch_cadence``): text-only frames wait for the subscriber's window, a message's
opening frames wait for its first text, while any other event (a message's first text, tool
events, the end) goes at once with what waited. Two cadences: **live** (the default: text every
250 ms, ``AVM_BATCH_FLUSH_MS``, as a plain client gets it) and **economy** (text in 2-second windows,
``AVM_ECONOMY_FLUSH_MS``: fewer billed messages, choppier text). A connection asks with
``?cadence=live|economy`` next to ``?frames=batch``; otherwise its turn's image (``cadence``) or
tenant (config key ``streaming.cadence``) decides. The first token is never delayed.

An array is cut at ``MAX_BATCH_BYTES`` (32 KB: API Gateway's billing unit and frame size), so a
batch never costs more units than its frames would one by one. AgentX v2 connections get arrays of
their JSON-RPC notifications (a JSON-RPC batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import BadRequest
from agentvm.events import BATCH, CADENCE_PARAM, CADENCES, FRAMES_PARAM, MAX_BATCH_BYTES, SINGLE

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def wants_batches(query: Mapping[str, str]) -> bool:
    """Whether an upgrade request declares the batched mode (``?frames=batch``). Any value other
    than ``batch`` or ``single`` is refused (``bad_request``), never silently ignored."""
    value = query.get(FRAMES_PARAM)
    if value is None or value == SINGLE:
        return False
    if value == BATCH:
        return True
    raise BadRequest(f"unknown frames mode {value[:40]!r}: use frames=batch (or frames=single, the default)")


def asked_cadence(query: Mapping[str, str]) -> str | None:
    """The text cadence an upgrade request asks for (``?cadence=live|economy``), None if none. Only
    batched connections have one (a plain client gets every flush window's frame at once): with
    ``frames`` other than ``batch``, or an unknown value, it is refused (``bad_request``)."""
    value = query.get(CADENCE_PARAM)
    if value is None:
        return None
    if value not in CADENCES:
        raise BadRequest(f"unknown cadence {value[:40]!r}: use cadence=live (the default) or cadence=economy")
    if not wants_batches(query):
        raise BadRequest("a cadence is for batched connections: add frames=batch")
    return value


def pack(payloads: Sequence[str], max_bytes: int = MAX_BATCH_BYTES) -> list[str]:
    """The serialised frames as few messages as fit: JSON arrays of at most ``max_bytes`` (a frame
    larger than that alone goes by itself); a group of one is the frame itself."""
    out: list[str] = []
    group: list[str] = []
    size = 0
    for payload in payloads:
        length = len(payload.encode()) + 1  # the comma (or a bracket)
        if group and size + length + 1 > max_bytes:
            out.append(_join(group))
            group, size = [], 0
        group.append(payload)
        size += length
    if group:
        out.append(_join(group))
    return out


def unpack(message: str | bytes) -> list[str]:
    """The frames of one received message, serialised (a client's side of ``pack``, for tests and
    tools that read raw messages): an array's elements, or the message itself."""
    import json

    text = message.decode() if isinstance(message, bytes) else message
    if text.lstrip().startswith("["):
        return [json.dumps(frame) for frame in json.loads(text)]
    return [text]


def _join(group: list[str]) -> str:
    return group[0] if len(group) == 1 else "[" + ",".join(group) + "]"


__all__ = ["asked_cadence", "pack", "unpack", "wants_batches"]
