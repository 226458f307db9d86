"""The context diet (opt-in per image, ``contextDiet``): old tool results are elided to a short stub,
and large ones are shown as a head plus a note, so a long tool-using conversation sends less.

**What.** At a turn's diet cut (``agent/window.py``), among the tool results stored at or before it:

- a result followed by at least ``keepSteps`` tool steps (a step: a run of consecutive results, one
  model call's) is *elided*: the model sees a one-line stub naming its size and its message id;
- any other result longer than ``maxResultChars`` is *kept by reference*: the model sees its first
  ``headChars`` characters and a note of how much is left and where the whole text is.

The full text always stays in the store (``image_messages_request`` and the session export return
it). No built-in tool reads a stored result back: the note says so, and that calling the tool again
gets a fresh copy.

**Cache-friendly.** The decision is a function of the stored messages up to the cut, and the cut
only moves where the prefix breaks anyway: at a compaction (a new summary) while the unsummarised
messages fit the history window, then with the window's start (every ``historyWindowStep``
messages). Between moves every turn elides the same results the same way, so the prefix stays
byte-identical; once elided, a result stays elided (later steps only add to the count after it).
The cut is never past the turn's user message, so the current turn's steps are never dieted.

**A stub, not a summary.** A summary of each old result would need a model call: on the hot path
(before the turn's request) it would add latency and a bill to every turn that crosses a cut; off it
(after the turn, like compaction) it would need a stored summary per result. The stub costs nothing,
is deterministic, and the model can call the tool again for what it needs. Compaction (on by
default) still summarises the whole older history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.agent.history import tool_result_of
from agentvm.messages import ToolResultMessage

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentvm.messages import Message
    from agentvm.ports import SeqMessage

DEFAULT_KEEP_STEPS = 4
DEFAULT_MAX_RESULT_CHARS = 8000
DEFAULT_HEAD_CHARS = 2000
_DIETED_TYPES = ("text", "json", "error-text", "error-json", "content")  # content: its media go too


@dataclass(frozen=True, slots=True)
class ContextDiet:
    """An image's diet, as its ``contextDiet`` policy sets it."""

    keep_steps: int = DEFAULT_KEEP_STEPS
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    head_chars: int = DEFAULT_HEAD_CHARS

    @classmethod
    def of(cls, policy: Mapping[str, Any] | None) -> ContextDiet | None:
        """The diet an image's stored policy asks for (None: off)."""
        if not policy or not policy.get("enabled", True):
            return None
        return cls(
            keep_steps=int(policy.get("keepSteps", DEFAULT_KEEP_STEPS)),
            max_result_chars=int(policy.get("maxResultChars", DEFAULT_MAX_RESULT_CHARS)),
            head_chars=int(policy.get("headChars", DEFAULT_HEAD_CHARS)),
        )

    def trimmed(self, entries: Sequence[SeqMessage], cut: int) -> dict[str, Message]:
        """What the model sees instead of each dieted result stored at or before ``cut``, by id."""
        results = [e for e in entries if e.seq <= cut and isinstance(e.message, ToolResultMessage)]
        steps_after: dict[int, int] = {}  # a result's seq -> the steps that start after it
        count, previous = 0, None
        for entry in reversed(results):
            if previous is None or entry.seq != previous - 1:
                count += 1  # a new run of consecutive results: one more step
            steps_after[entry.seq] = count - 1
            previous = entry.seq
        out: dict[str, Message] = {}
        for entry in results:
            message = entry.message
            assert isinstance(message, ToolResultMessage)
            if message.toolResult.output.type not in _DIETED_TYPES:
                continue
            content = tool_result_of(message).content
            if steps_after[entry.seq] >= self.keep_steps:
                shown = elided_note(message.id, len(content))
            elif len(content) > self.max_result_chars:
                shown = content[: self.head_chars] + reference_note(
                    message.id, len(content) - self.head_chars
                )
            else:
                continue
            out[message.id] = _with_text(message, shown)
        return out


def elided_note(message_id: str, chars: int) -> str:
    return (
        f"[output elided to save context: {chars} characters, kept in full as message {message_id} "
        "of this session; call the tool again if you need it]"
    )


def reference_note(message_id: str, rest: int) -> str:
    return (
        f"\n[… {rest} more characters not shown: the whole output is kept as message {message_id} of "
        "this session (no tool reads it back; call the tool again, asking for less, if you need more)]"
    )


def _with_text(message: ToolResultMessage, text: str) -> ToolResultMessage:
    error = message.toolResult.output.type.startswith("error")
    output = message.toolResult.output.model_copy(
        update={"type": "error-text" if error else "text", "value": text}
    )
    return message.model_copy(update={"toolResult": message.toolResult.model_copy(update={"output": output})})


__all__ = [
    "DEFAULT_HEAD_CHARS",
    "DEFAULT_KEEP_STEPS",
    "DEFAULT_MAX_RESULT_CHARS",
    "ContextDiet",
    "elided_note",
    "reference_note",
]
