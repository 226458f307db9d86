"""The coalescing sink: turn events → numbered frames → the session's subscribers.

Text deltas are merged: the first is sent at once (time to first token is what users feel), later
ones are buffered and sent as one ``text_delta`` per flush window. ``conversation_responding`` is
sent once, with the first delta, not per delta: it carries no information after that, and every
WebSocket frame is a billed message on AWS. Frames go out through one sender task, so the model
stream is never blocked by a slow post and frames keep their order.

Every frame is numbered and kept in the turn's ``FrameLog`` (``core.frames``). Each subscriber is
sent the frames above the last seq it has: a connection seen for the first time gets this turn
from its first frame (whether it subscribed before the turn, was found late because the AWS index
lagged, or joined mid-turn: it never gets a message's text without its ``message_start``, the
protocol's order, docs/protocol.md "A turn"), or, if it subscribed with a cursor (a client
resuming mid-turn), every frame of this turn above its cursor. The subscriber list is looked up
again every ``subscriber_refresh_s`` (0: on every send, where the lookup is in memory) and once
more before the turn's terminal frames (``release``), so a client that subscribed while the turn
was ending is caught up too.

Fewer WebSocket messages (docs/cost.md): ``message_persisted`` is emitted first but *lingers*
(``emit_frame(..., linger=True)``): it goes out with the next frame (the turn's ``message_start``,
normally tens of milliseconds later) or after one flush window at the latest. ``hold`` keeps the
last buffered text with the terminal frames, so a reply's end is one pass. A subscriber whose
connection takes batched frames (``streaming.batching``) gets each pass as one message, and
text on its cadence (``streaming.batch_cadence``: live, text every 250 ms, or economy, every 2 s;
a message's opening frames with its first text, anything else at once): its connection's
(``Subscription.cadence``), else the turn's (``cadence``: its image's or tenant's). When its wait
ends the cadence wakes the sender for a pass, and ``aclose`` sends it whatever is left.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from agentvm.events import ECONOMY, LIVE, agent_event
from agentvm.ports import PROTOCOL_V2
from agentvm.streaming.batch_cadence import BatchCadence
from agentvm.streaming.batching import pack
from agentvm.streaming.frames import ATTEMPT_SPAN, FrameLog

if TYPE_CHECKING:
    from agentvm.events import EventContext, Json
    from agentvm.ports import Clock, Subscription
    from agentvm.records import FrameMap
    from agentvm.streaming.fanout import Fanout

# Room kept in an attempt's seq band for the frames after the text (terminal events, errors): past
# this many frames, text is no longer flushed on a timer but merged until the next event.
_RESERVED_FRAMES = 16


class CoalescingSink:
    def __init__(
        self,
        *,
        session_id: str,
        context: EventContext,
        fanout: Fanout,
        clock: Clock,
        flush_s: float,
        flush_max_s: float = 0.0,
        subscriber_refresh_s: float = 2.0,
        first_seq: int = 1,
        batch_flush_max_s: float = 0.0,
        batch_flush_s: float = 0.0,
        economy_flush_max_s: float = 2.0,
        economy_flush_s: float = 2.0,
        cadence: str = LIVE,
        continues: FrameMap | None = None,
    ) -> None:
        """``continues``: the map of what the turn sent before this attempt, when the attempt
        continues a suspended turn: kept in this attempt's map (``frame_map``), not sent again."""
        self._session_id = session_id
        self._context = context
        self._fanout = fanout
        self._clock = clock
        # The window doubles after each timed flush, up to flush_max_s: early text streams
        # smoothly, a long reply costs far fewer frames (each one a billed message on AWS).
        self._window = flush_s
        self._max_window = max(flush_max_s, flush_s)
        self._refresh_s = subscriber_refresh_s
        # batched subscribers' cadences: live from batch_flush_s, economy from economy_flush_s (the
        # flush window if shorter or 0), doubling up to their max; a message's opening frames wait
        # for its first text up to the economy window in both (they carry no text)
        economy_max = max(economy_flush_max_s, economy_flush_s, self._max_window)
        self._cadences = {
            LIVE: BatchCadence(
                first_s=max(batch_flush_s, flush_s),
                max_s=max(batch_flush_max_s, self._max_window),
                start_wait_s=economy_max,
                clock=clock,
                wake=self._batch_window_over,
            ),
            ECONOMY: BatchCadence(
                first_s=max(economy_flush_s, flush_s),
                max_s=economy_max,
                clock=clock,
                wake=self._batch_window_over,
            ),
        }
        self._cadence = cadence if cadence in self._cadences else LIVE  # the turn's: image, tenant
        self._batch_due = False  # a batched subscriber's wait ended: a pass for them
        self._linger: asyncio.TimerHandle | None = None
        self._log = FrameLog(first_seq, agent_id=context.agentId, continues=continues)
        self._buffer: list[str] = []
        self._sent_first_delta = False
        self._timer: asyncio.TimerHandle | None = None
        self._held = False
        self._ready = self._log.last  # frames up to this seq may be sent (held ones wait)
        self._sent = self._log.last  # frames up to this seq were handed to the fanout
        self._marks: dict[str, int] = {}  # per connection: the last seq it was sent
        self._subscribers: list[Subscription] | None = None
        self._subscribers_at = 0.0
        self._refresh_due = False
        self._wake = asyncio.Event()
        self._closing = False
        self._aborted = False
        self._sender: asyncio.Task[None] | None = None

    # -- events -----------------------------------------------------------------------------
    def emit(self, type_: str, data: Json, *, ref: str | None = None) -> None:
        """Queue one agent event, after any buffered text so the order holds. ``ref``: the stored
        message the data is made from (the frame map keeps the id, not the data)."""
        self.emit_frame(agent_event(type_, data, now_ms=self._clock.now_ms(), context=self._context), ref=ref)

    def emit_frame(self, frame: Json, *, ref: str | None = None, linger: bool = False) -> None:
        """Queue any frame of the turn (e.g. ``message_persisted``); it gets the next seq. With
        ``linger`` it waits for the next frame, one flush window at most, to go out with it."""
        self._flush_buffer()
        self._add(frame, ref=ref, linger=linger)

    def text(self, text: str) -> None:
        if not text:
            return
        if not self._sent_first_delta:
            self._sent_first_delta = True
            now = self._clock.now_ms()
            self._add(agent_event("text_delta", {"text": text}, now_ms=now, context=self._context))
            self._add(agent_event("conversation_responding", {}, now_ms=now, context=self._context))
            return
        self._buffer.append(text)
        if self._timer is None and len(self._log) < ATTEMPT_SPAN - _RESERVED_FRAMES:
            self._timer = asyncio.get_running_loop().call_later(self._window, self._timed_flush)

    def flush(self) -> None:
        """Send the buffered text now, not at the window's end (a paced read that came late,
        ``agent/pacing.py``)."""
        self._flush_buffer()

    def next_flush_at(self) -> float | None:
        """The event loop time at which buffered text is due to be sent, or None if none waits
        (``agent/pacing.py`` reads the model's stream just before it)."""
        return self._timer.when() if self._timer is not None else None

    def new_message(self) -> None:
        """A new model message starts (a tool turn's next step): its first delta goes out at once,
        with its own ``conversation_responding``, like the turn's first."""
        self._flush_buffer()
        self._sent_first_delta = False

    def hold(self) -> None:
        """From now on frames are numbered and logged but not sent until ``release``: the terminal
        frames, while the turn's status and frame map are stored (persist before the end is seen).
        The text still buffered is held too: it goes out with them, in one pass."""
        self._held = True
        self._flush_buffer()

    def release(self) -> None:
        """Send the held frames, after looking the subscribers up again."""
        self._held = False
        self._refresh_due = True
        self._ready_upto(self._log.last)

    def frame_map(self) -> FrameMap:
        """What this attempt sent (or holds), with the attempts it continues: stored with the
        turn's terminal or suspended status."""
        self._flush_buffer()
        return self._log.frame_map()

    def _timed_flush(self) -> None:
        self._timer = None
        self._flush_buffer()
        self._window = min(self._window * 2, self._max_window)

    def _flush_buffer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._buffer:
            text = "".join(self._buffer)
            self._buffer.clear()
            self._add(
                agent_event("text_delta", {"text": text}, now_ms=self._clock.now_ms(), context=self._context)
            )

    def _add(self, frame: Json, *, ref: str | None = None, linger: bool = False) -> None:
        self._log.add(frame, ref=ref)
        if self._held:
            return
        if linger:
            if self._linger is None:
                self._linger = asyncio.get_running_loop().call_later(self._window, self._linger_over)
            return
        self._ready_upto(self._log.last)

    def _linger_over(self) -> None:
        self._linger = None
        if not self._held:
            self._ready_upto(self._log.last)

    def _ready_upto(self, seq: int) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._ready = seq
        self._wake_sender()

    # -- delivery ---------------------------------------------------------------------------
    async def _targets(self) -> list[Subscription]:
        now = self._clock.monotonic()
        if self._subscribers is None or self._refresh_due or now - self._subscribers_at >= self._refresh_s:
            self._refresh_due = False
            self._subscribers = await self._fanout.subscriptions(self._session_id)
            self._subscribers_at = now
        return self._subscribers

    async def _send_loop(self) -> None:
        while True:
            if self._ready > self._sent or self._batch_due:
                # Whatever is ready by now goes out in one pass over the subscribers.
                self._batch_due = False
                await self._deliver(self._ready)
                continue
            if self._closing:
                if any(mark < self._sent for mark in self._marks.values()):
                    await self._deliver(self._sent, force=True)  # batched text left
                self._close_cadences()
                return
            self._wake.clear()
            await self._wake.wait()

    async def _deliver(self, upto: int, *, force: bool = False) -> None:
        plan: list[tuple[str, list[str]]] = []
        now = self._clock.monotonic()
        for sub in await self._targets():
            conn, cursor = sub.connection_id, sub.after_seq
            mark = self._marks.get(conn)
            if mark is None:  # new: the turn from its first frame, or every frame above its cursor
                mark = self._log.first - 1 if cursor is None else cursor
            if upto > mark:
                paced = sub.batch and not force
                if paced and not self._cadence_of(sub).due(conn, self._log.urgency(mark, upto), now):
                    self._marks[conn] = mark  # its frames wait for their window (the cadence wakes us)
                    continue
                # each subscriber in its connection's protocol (AgentX v1 frames, or v2 notifications)
                v2 = sub.protocol == PROTOCOL_V2
                payloads = self._log.v2_payloads(mark, upto) if v2 else self._log.payloads(mark, upto)
                if payloads:
                    plan.append((conn, pack(payloads) if sub.batch else payloads))
                mark = upto
            self._marks[conn] = mark
        gone = await self._fanout.deliver(plan)
        if gone and self._subscribers is not None:
            self._subscribers = [sub for sub in self._subscribers if sub.connection_id not in gone]
        self._sent = upto

    def _cadence_of(self, sub: Subscription) -> BatchCadence:
        """The cadence a batched subscriber is paced by: its connection's, else the turn's."""
        return self._cadences.get(sub.cadence or self._cadence) or self._cadences[self._cadence]

    def _batch_window_over(self) -> None:
        self._batch_due = True
        self._wake_sender()

    def _wake_sender(self) -> None:
        """Start the sender task if none runs (never after ``abort``), and wake it."""
        if self._sender is None and not self._aborted:
            self._sender = asyncio.create_task(self._send_loop())
        self._wake.set()

    def _close_cadences(self) -> None:
        for cadence in self._cadences.values():
            cadence.close()

    async def aclose(self) -> None:
        """Flush what is buffered and wait until every frame was handed to the fanout."""
        self._flush_buffer()
        if self._held:
            self.release()
        elif self._ready < self._log.last:  # a lingering frame
            self._ready_upto(self._log.last)
        self._closing = True
        if self._sender is None:
            return
        self._wake.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._sender

    async def abort(self) -> None:
        """The attempt stopped before its end (cancelled: the node stops or lost the turn's lease;
        or it failed): send nothing more, now. The sender is its own task, so without this it
        would go on delivering this attempt's frames after the turn was handed to another node,
        interleaving them with the next attempt's. Returns once no send of this sink is in flight;
        what was not sent is lost (a client resumes from its last seq)."""
        self._aborted = True
        self._held = True
        for handle in (self._timer, self._linger):
            if handle is not None:
                handle.cancel()
        self._timer = self._linger = None
        self._close_cadences()
        sender, self._sender = self._sender, None
        if sender is not None and not sender.done():
            sender.cancel()
            await asyncio.wait([sender])  # never raises: the caller's own cancellation goes on


__all__ = ["CoalescingSink"]
