"""The turns that are queued, running or suspended, and stopping them (``/v1/turns``).

**Which turns.** The gateway marks a turn when it queues it (``RunningTurns.mark``, next to the
``queued`` turn record); the worker unmarks it when the turn ends (``completed``, ``interrupted``
or ``failed``). A listing reads the tenant's marks (of one container), then each turn's record for
its status; a mark whose turn has ended (the worker died between the two writes) is removed there
and then. A turn whose worker died mid-way stays listed as ``running`` until the queue runs it
again: exactly what an operator needs to see.

**What is shown.** Status, the image's model, when it was queued (``ageMs`` since), when its
status last changed, the tool calls a suspended turn waits on, and its **tokens so far**: the model
calls that finished (each is billed as it ends: its usage records), plus, for a call streaming in
this very process (the local host runs API and turns in one process), the output deltas received
so far (``streamingOutputTokens``, one delta counted as one token, as a cut stream is billed). On
AWS the API and the worker are different Lambdas: the call streaming now shows when it ends
(writing progress while streaming would cost a write per turn and interval).

**Stopping** them is ``agentvm.turns.interrupt.interrupt_turns`` (``agent_interrupt``'s mechanism,
for any set of the turns listed here); this module only lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.errors import NotFound

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentvm.ports import RunningTurn, TurnTokens
    from agentvm.records import TurnRecord, TurnStatus
    from agentvm.runtime import Runtime

LIVE: frozenset[str] = frozenset({"queued", "running", "suspended"})
_ENDED = frozenset({"completed", "interrupted", "failed"})


@dataclass
class TurnProgress:
    """Output deltas of the model call each turn streams now, in this process (the turn's hooks
    count them; a finished call's tokens are in its usage record instead)."""

    _deltas: dict[str, int] = field(default_factory=dict)

    def started(self, turn_id: str) -> None:
        self._deltas[turn_id] = 0

    def delta(self, turn_id: str) -> None:
        self._deltas[turn_id] = self._deltas.get(turn_id, 0) + 1

    def forget(self, turn_id: str) -> None:
        self._deltas.pop(turn_id, None)

    def streaming(self, turn_id: str) -> int | None:
        """Deltas of the call streaming now; None when no call of the turn streams here."""
        return self._deltas.get(turn_id)


@dataclass(frozen=True)
class LiveTurn:
    """A listed turn: its mark, its record (None: the gateway has not written it yet) and tokens."""

    mark: RunningTurn
    record: TurnRecord | None
    tokens: TurnTokens | None
    waiting: list[dict[str, Any]]
    streaming: int | None

    @property
    def status(self) -> TurnStatus:
        return self.record.status if self.record is not None else "queued"

    def to_wire(self, now_ms: int, model: str | None) -> dict[str, Any]:
        m = self.mark
        out: dict[str, Any] = {
            "turnId": m.turn_id,
            "containerId": m.container_id,
            "imageId": m.image_id,
            "sessionId": m.session_id,
            "status": self.status,
            "model": model,
            "queuedAt": m.queued_at,
            "ageMs": max(now_ms - m.queued_at, 0),
            "updatedAt": self.record.updatedAt if self.record is not None else m.queued_at,
            "tokens": {
                "calls": self.tokens.calls if self.tokens else 0,
                "inputTokens": self.tokens.input_tokens if self.tokens else 0,
                "outputTokens": self.tokens.output_tokens if self.tokens else 0,
                "cacheReadTokens": self.tokens.cache_read_tokens if self.tokens else 0,
                "cacheWriteTokens": self.tokens.cache_write_tokens if self.tokens else 0,
            },
        }
        if self.streaming is not None:
            out["streamingOutputTokens"] = self.streaming
        if self.waiting:
            out["waitingFor"] = self.waiting
        return out


def _running(rt: Runtime) -> Any:
    if rt.running is None:
        raise NotFound("this server keeps no list of running turns")
    return rt.running


async def live_turns(
    rt: Runtime,
    tenant_id: str,
    container_id: str | None = None,
    statuses: Iterable[str] = LIVE,
) -> list[LiveTurn]:
    """The tenant's unfinished turns (of one container), oldest first, in ``statuses``."""
    running = _running(rt)
    wanted = set(statuses)
    found: list[tuple[RunningTurn, TurnRecord | None]] = []
    for mark in await running.running(tenant_id, container_id):
        record = await rt.store.get_turn(mark.turn_id)
        if record is not None and record.status in _ENDED:
            await running.unmark(mark.tenant_id, mark.container_id, mark.turn_id)  # a stale mark
            continue
        status = record.status if record is not None else "queued"
        if status in wanted:
            found.append((mark, record))
    tokens = await running.tokens([m.turn_id for m, _ in found]) if found else {}
    out = []
    for mark, record in found:
        waiting = (
            await _waiting(rt, mark.turn_id) if record is not None and record.status == "suspended" else []
        )
        out.append(
            LiveTurn(mark, record, tokens.get(mark.turn_id), waiting, rt.progress.streaming(mark.turn_id))
        )
    return out


async def _waiting(rt: Runtime, turn_id: str) -> list[dict[str, Any]]:
    if rt.waits is None:
        return []
    return [
        {"toolCallId": w.toolCallId, "toolName": w.toolName, "kind": w.kind, "deadlineAt": w.deadlineAt}
        for w in await rt.waits.turn_waits(turn_id)
        if w.status == "pending" and not w.consumed
    ]


def model_of(rt: Runtime, model: str | None) -> str | None:
    """The model a turn runs: the image's, or the server's default (``provider/model``)."""
    try:
        return rt.models.resolve(model)[2]
    except Exception:  # an unknown provider: say what the image names
        return model


__all__ = ["LIVE", "LiveTurn", "TurnProgress", "live_turns", "model_of"]
