"""The history window, stepped: which stored messages a turn reads, chosen so the conversation
prefix the provider caches stays byte-identical for as many turns as possible.

A window that slides by one message a turn (the last ``window`` messages) changes the first message
the model sees on every turn past ``window`` messages, so every turn writes the whole cache again.
Here the window's start moves in steps of ``step`` messages: a turn reads every message from
``start`` on, where ``start`` is decided by a *cut point* on a grid of ``step`` seqs::

    cut   = after + window + floor((anchor - after - window) / step) * step   (<= anchor)
    start = after + 1 + max(0, cut - window - after)

``after`` is what the session's compaction summary covers, ``anchor`` the seq of the user message
the turn answers: so a first attempt, a redelivery and a resumed (suspended) turn read from the same
start, whatever they stored since. Between ``window`` and ``window + step - 1`` messages up to the
anchor are read; the start stays put for ``step`` messages, then jumps by ``step``.

The model never sees a tool result without its call: a turn's messages all come after its user
message, and ``history.chat_turns`` shows a turn's chain only with its user message, so a chain cut
by the window's start is left out whole.

The context diet (``agent/diet.py``) is decided where the prefix breaks anyway (``diet_cut``): at
the last compaction while the window is not full, then at the window's cut point.

``step = 0`` keeps the old sliding window (the last ``window`` messages): benchmarks compare the two.

Each turn also says whether its prefix differs from what the session's previous turn sent
(``prefix_break``): ``"compaction"`` (a new summary), ``"window"`` (the start moved) or ``"diet"``
(more tool results elided), computed from the messages read, with no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from agentvm.messages import UserMessage, chains

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agentvm.ports import SeqMessage
    from agentvm.records import SessionSummary

PrefixBreak = Literal["compaction", "window", "diet"]
# Messages after the anchor a stepped read still holds besides the window: the turn's own steps
# (maxSteps is at most 100; a step stores its calls, its text and its results) and messages queued
# after it. A read stops at the messages there are, so the slack costs nothing when unused.
AFTER_ANCHOR_SLACK = 400


def cut_seq(after: int, anchor: int, window: int, step: int) -> int:
    """The grid point a turn's window and diet are decided at: moves once every ``step`` seqs."""
    if step <= 0:
        return anchor
    return after + window + ((anchor - after - window) // step) * step


def start_seq(after: int, anchor: int, window: int, step: int) -> int:
    """The first seq a turn answering the message at ``anchor`` reads."""
    if step <= 0:
        return max(after + 1, anchor - window + 1)
    return after + 1 + max(0, cut_seq(after, anchor, window, step) - window - after)


def diet_cut(after: int, anchor: int, window: int, step: int, seen: int = 0) -> int:
    """Where the context diet is decided (``agent/diet.py``): only when the prefix breaks anyway.

    While the messages after the summary fit the window, the window's start stays put and the
    prefix breaks only when a compaction writes a new summary: the diet is decided at what that
    compaction had read (``seen``, 0: none), and stays so until the next one. Once they fill it, at
    the window's cut point, which moves when the start does (and once when the window fills).
    """
    if step > 0 and anchor - after < window:
        return min(anchor, max(after, seen))
    return cut_seq(after, anchor, window, step)


def read_bounds(after: int, anchor: int, window: int, step: int) -> tuple[int, int]:
    """The store read of a stepped window (``Store.recent_messages_after``): above which seq, and
    at most how many messages: from the start, through the anchor and what follows it."""
    start = start_seq(after, anchor, window, step)
    return start - 1, anchor - start + 1 + window + AFTER_ANCHOR_SLACK


def previous_user(entries: Sequence[SeqMessage], anchor: int) -> SeqMessage | None:
    """The newest user message before the one at ``anchor``: the session's previous turn."""
    return next((e for e in reversed(entries) if e.seq < anchor and isinstance(e.message, UserMessage)), None)


def prefix_break(
    entries: Sequence[SeqMessage],
    summary: SessionSummary | None,
    *,
    anchor: int,
    window: int,
    step: int,
    elided: Callable[[int], frozenset[str]],
) -> PrefixBreak | None:
    """Whether the turn at ``anchor`` sends a different prefix than the session's previous turn sent,
    and why (None: the same prefix, or no previous turn). ``elided(cut)``: the ids the diet elides
    at a cut point."""
    previous = previous_user(entries, anchor)
    after = summary.upToSeq if summary is not None else 0
    if summary is not None and (previous is None or summary.seenSeq >= _last_seq(entries, previous)):
        return "compaction"  # the previous turn ran before this summary was written
    if previous is None:
        return None  # the session's first turn: no prefix to keep
    if start_seq(after, anchor, window, step) != start_seq(after, previous.seq, window, step):
        return "window"
    seen = summary.seenSeq if summary is not None else 0
    now, then = diet_cut(after, anchor, window, step, seen), diet_cut(after, previous.seq, window, step, seen)
    if now != then and elided(now) != elided(then):
        return "diet"
    return None


def _last_seq(entries: Sequence[SeqMessage], user: SeqMessage) -> int:
    """The seq of the last stored message of a user message's turn (its own when it has none)."""
    chain = {m.id for m in chains([e.message for e in entries]).get(user.message.id, ())}
    return max((e.seq for e in entries if e.message.id in chain), default=user.seq)


__all__ = [
    "AFTER_ANCHOR_SLACK",
    "PrefixBreak",
    "cut_seq",
    "diet_cut",
    "prefix_break",
    "previous_user",
    "read_bounds",
    "start_seq",
]
