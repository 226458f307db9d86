"""Follow a submitted turn to its end through the store: what a caller holding no connection sees
of it (AgentVM's MCP server, ``api/mcp.py``, answers a ``tools/call`` with the turn's reply).

The turn runs as every turn does (a worker, on any host); this only reads what it stores: the turn
record's status and the messages that answer the user message (``messages.chains``). Each read is
one ``get_turn``, plus one bounded read of the messages after the user message while the turn runs
(a tool step becomes a ``step`` the caller may report as progress). Text deltas are not stored; a
turn running in this very process (``avm serve``) also reports every
``TEXT_CHUNKS_PER_STEP`` of them (``rt.progress``), elsewhere the reply arrives whole. Otherwise the
same on every host: the local host's worker and the AWS turn worker write the same records.

``follow_turn`` returns when the turn ended (completed, interrupted, failed), suspended on someone
(a person's approval, a client tool's result: its waits are named; a turn suspended on a sandbox
job, as on AWS, is followed on), or its ``deadline_s`` passed (the turn goes on; following it again
later finds its end).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    ToolCallMessage,
    ToolResultMessage,
    chains,
    text_of,
)
from agentvm.records import TERMINAL

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.messages import Message
    from agentvm.runtime import Runtime

MAX_TURN_MESSAGES = 200  # the messages after the user message read per look (a turn's steps)
TEXT_CHUNKS_PER_STEP = 20  # a progress step per this many text deltas streamed (same process only)


@dataclass(frozen=True, slots=True)
class WatchedTurn:
    """Which turn to follow: its session, id, and the user message it answers (with its seq)."""

    session_id: str
    turn_id: str
    user_message_id: str
    user_seq: int


@dataclass(frozen=True, slots=True)
class FollowedTurn:
    """What the store says of a followed turn when ``follow_turn`` returned.

    ``status``: the turn's (``queued`` or ``running`` when the deadline passed first); ``reply``:
    the text of its last assistant message (a partial one if it was interrupted); ``error`` and
    ``error_code``: a failed turn's; ``waiting``: a suspended turn's waits, one line each."""

    status: str
    reply: str = ""
    error: str | None = None
    error_code: str | None = None
    waiting: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


async def follow_turn(
    rt: Runtime,
    turn: WatchedTurn,
    *,
    deadline_s: float,
    poll_s: float,
    on_step: Callable[[str], Awaitable[None]] | None = None,
) -> FollowedTurn:
    """Read the turn's status (and, while it runs, its steps) every ``poll_s`` until it ends, suspends
    or ``deadline_s`` passes. ``on_step`` is told each change: the status, each tool call and result."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    status: str | None = None
    steps_seen = told_chunks = 0
    while True:
        record = await rt.store.get_turn(turn.turn_id)
        now = record.status if record is not None else "queued"
        changed, status = now != status, now
        over = status in TERMINAL
        if changed and not over:
            await _tell(on_step, f"turn {status}")
        chain: list[Message] = []
        if status != "queued":  # a queued turn has stored nothing yet
            chain = await _chain(rt, turn)
            for message in chain[steps_seen:]:
                await _tell(on_step, _step(message))
            steps_seen = max(steps_seen, len(chain))
        if status == "running":  # text as it streams, where this process runs the turn
            chunks = rt.progress.streaming(turn.turn_id) or 0
            if chunks < told_chunks:  # a new model call streams: it counts from 0
                told_chunks = 0
            if chunks >= told_chunks + TEXT_CHUNKS_PER_STEP:
                told_chunks = chunks - chunks % TEXT_CHUNKS_PER_STEP
                await _tell(on_step, f"writing ({told_chunks} text chunks)")
        if changed and over:  # after the steps it took
            await _tell(on_step, f"turn {status}")
        looked = await look_at_turn(rt, turn.turn_id, status, chain)
        if looked.ended or looked.waiting:  # ended, or suspended on someone's decision
            return looked
        left = deadline - loop.time()
        if left <= 0:
            return looked
        await asyncio.sleep(min(poll_s, left))


async def look_at_turn(rt: Runtime, turn_id: str, status: str, chain: list[Message]) -> FollowedTurn:
    """What one look at a turn says, from its record's ``status`` and the messages answering its
    user message (``chain``): its reply, a failed turn's error, the waits of a turn suspended on
    someone (a suspended turn waiting on a sandbox job only, as on AWS, has none: it goes on)."""
    if status in TERMINAL:
        return _outcome(status, chain)
    if status == "suspended":
        return FollowedTurn(status, reply=_reply(chain), waiting=await _waits_on_people(rt, turn_id))
    return FollowedTurn(status, reply=_reply(chain))


async def _tell(on_step: Callable[[str], Awaitable[None]] | None, step: str | None) -> None:
    if on_step is not None and step is not None:
        await on_step(step)


async def _chain(rt: Runtime, turn: WatchedTurn) -> list[Message]:
    """The messages that answer the turn's user message, in store order."""
    after = await rt.store.recent_messages_after(turn.session_id, turn.user_seq, MAX_TURN_MESSAGES)
    return chains([m.message for m in after]).get(turn.user_message_id, [])


def _step(message: Message) -> str | None:
    if isinstance(message, ToolCallMessage):
        return f"calling tool {message.toolCall.name}"
    if isinstance(message, ToolResultMessage):
        return f"tool {message.toolResult.name} answered"
    return None


def _reply(chain: list[Message]) -> str:
    """The text of the last assistant message (an earlier step's text is not the reply)."""
    texts = [text_of(m.content) for m in chain if isinstance(m, AssistantMessage)]
    return texts[-1] if texts else ""


def _outcome(status: str, chain: list[Message]) -> FollowedTurn:
    errors = [m for m in chain if isinstance(m, ErrorMessage)]
    error = errors[-1] if errors else None
    return FollowedTurn(
        status,
        reply=_reply(chain),
        error=None if error is None else error.content,
        error_code=None if error is None else error.errorCode,
    )


_WAITS_ON = {"approval": "a person's approval", "client": "the client's result"}


async def _waits_on_people(rt: Runtime, turn_id: str) -> tuple[str, ...]:
    """The turn's pending waits that need someone (an approval, a client tool's result); a sandbox
    job's wait ends by itself."""
    if rt.waits is None:
        return ()
    waits = await rt.waits.turn_waits(turn_id)
    return tuple(
        f"{_WAITS_ON[w.kind]} of tool {w.toolName}"
        for w in waits
        if w.status == "pending" and w.kind in _WAITS_ON
    )


__all__ = [
    "MAX_TURN_MESSAGES",
    "TEXT_CHUNKS_PER_STEP",
    "FollowedTurn",
    "WatchedTurn",
    "follow_turn",
    "look_at_turn",
]
