"""The ``Store`` port on DynamoDB through PynamoDB: the AWS host's durable state.

The item layout is in ``dynamodb.models``. PynamoDB is blocking, so every request runs in a worker
thread (``asyncio.to_thread``): the concurrent turns of one Lambda invocation share its wait on
DynamoDB instead of queueing behind each other on the event loop.

Appending a message (no transactions: they cost twice, and this is the hot path):

1. The next seq is read, not counted: a strongly consistent ``Query`` for the session's last
   ``MSG#`` item (``Limit=1``, newest first), then ``PutItem MSG#<seq+1>`` with
   ``attribute_not_exists(sk)``. A concurrent writer that took that seq makes the put fail; read
   again and retry. A seq exists only once its message does, so there are never gaps. (An ``ADD
   lastSeq 1`` counter on the session item burns a seq whenever a writer dies between its two
   writes, costs 1 WRU where the read costs 1 RRU, a fifth of the price, and would create session
   items for sessions that do not exist.)
2. With an idempotency key, a claim ``IDEM#<key>`` holding the seq about to be written is put first
   (``attribute_not_exists``). The message item records the key too, so a claim is fulfilled
   exactly when ``MSG#<claim.seq>`` carries that key. Whoever finds the key claimed reads the claim
   and that one message (O(1), whatever the history length); if the claimant is still writing it
   polls, and if the claim is older than ``CLAIM_LEASE_MS`` without its message (its writer died)
   it takes the claim over with a conditional update. A claimant that loses the seq race moves its
   claim to the new seq (conditional on still owning it) before writing again.

Consistency: reads whose result may have been written a moment ago are strongly consistent (the
turn's history window, which includes the user message the gateway just appended; ids, claims,
cancel marks, turns). A worker's cancel poll is eventually consistent: it looks again a second
later. Listings through ``gsi1`` (images, usage written before ``gsi2``) and ``gsi2`` (usage) are
eventually consistent: GSIs offer nothing else, so an image can be missing from ``list_images``
for a moment after creation.

Cost in capacity units (on-demand: 1 WRU per KB of item written, keys and attribute names
included, $0.625/M; 1 RRU per 4 KB read strongly consistent, half that eventually consistent,
$0.125/M; a write to an item with ``gsi1`` keys also writes the index):

=================================  ======================================================
append_message, item <= 1 KB       1 RRU (last seq) + 1 WRU (a message's JSON of 0.5 KB or more is
                                   stored zlib-compressed: ``message_bodies``; ~1 KB of chat is 1 WRU)
append_message with a key          1 RRU + 2 WRU (claim + message); a repeated key: 1 WRU (the
                                   failed claim) + 3 RRU (last seq, claim, message), no append
put_usage (~0.4 KB)                a conditional put: 1 WRU + 1 on gsi2 = 2 (no gsi1 entry; a repeat
                                   fails its condition: 1); its hour marker once per tenant, hour
                                   and process (2); sums rolled up later (dynamodb_usage)
put_turn (status update)           1 WRU (the terminal one holds the turn's frame map: ~0.6 KB for
                                   the standard turn; +1 WRU per KB past that, ~80+ text frames; a
                                   continued turn's maps all its attempts, and the running write of
                                   a continuation holds the suspended attempts' map too)
recent_messages (50 x ~1 KB)       13 RRU (50 KB strongly consistent, one Query request)
recent_messages_after (the same)   13 RRU (one Query on ``MSG#`` keys above the summary's seq);
                                   a turn's first attempt reads it eventually consistent: 6.5
get_turn / is_cancel_requested     1 RRU each (a cancel mark is ``CANCEL#<turn>``: one per turn;
                                   an attempt reads its turn's once, at its start)
cancel_requests (a worker's poll)  0.5 RRU per interval for all the turns of one worker invocation:
                                   an eventually consistent Query of ``POLL#<poller>`` (empty but for
                                   interrupts: ~50 marks fit in 0.5 RRU)
request_cancel                     1 WRU (the turn's mark) + 1 RRU (its record, strongly consistent)
                                   + 1 WRU (the poller's mark) if the turn is running
get_summary / put_summary          1 RRU / 1 WRU per KB of summary (``SESSION#<s>``/``SUMMARY``)
=================================  ======================================================

Errors: a failed condition is part of the semantics above and never escapes. Anything else
(throttling that outlived botocore's retries, a message over DynamoDB's 400 KB item limit, a
missing table) propagates as PynamoDB's exception, whose ``cause`` is the botocore ``ClientError``.

Its size (~540 lines): one port's adapter over one item layout; the per-concern stores (keys,
budgets, usage, waits...) are already their own modules beside it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PynamoDBException

from agentvm.adapters.aws.dynamodb.message_bodies import body_attributes
from agentvm.adapters.aws.dynamodb.models import (
    CONTAINER_PREFIX,
    GSI1,
    IMAGE_PREFIX,
    META,
    MSG_PREFIX,
    USAGE,
    USAGE_PREFIX,
    TableItem,
    bind_model,
    bind_models,
    cancel_sk,
    container_sk,
    create_table,
    idem_sk,
    image_gsi1sk,
    image_pk,
    message_sk,
    poller_pk,
    seq_of,
    session_pk,
    tenant_pk,
    turn_pk,
)
from agentvm.adapters.aws.dynamodb.usage import DynamoDbUsageRollups, DynamoDbUsageWriter
from agentvm.errors import Conflict
from agentvm.messages import message_from_wire, message_to_wire
from agentvm.ports import AppendResult, SeqMessage
from agentvm.records import (
    ContainerRecord,
    ImageRecord,
    SessionRecord,
    SessionSummary,
    TurnRecord,
    UsageRecord,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action

    from agentvm.adapters.aws.dynamodb.models import IdemItem
    from agentvm.messages import Message

_M = TypeVar("_M", bound="TableItem")

CONDITION_FAILED = "ConditionalCheckFailedException"
# How long an idempotency claim without its message is presumed to be in progress. Its writer
# needs one or two DynamoDB round trips (milliseconds); after this it is presumed dead. A writer
# alive but stalled for longer than this could still append a duplicate: the price of no transactions.
CLAIM_LEASE_MS = 10_000
_POLL_FIRST_S = 0.01
_POLL_MAX_S = 0.2
SUMMARY = "SUMMARY"
# A poller's marks are read only while it runs turns (one invocation, at most the turn deadline):
# DynamoDB's TTL removes them a day later.
POLL_MARK_TTL_S = 86_400
_LAST_MESSAGE_SK = message_sk(10**10 - 1)  # the highest ``MSG#`` key (seqs are 10 digits)


class SummaryItem(TableItem):
    """A session's compaction summary, ``SESSION#<s>``/``SUMMARY``: in the session's partition, so
    ``delete_image`` deletes it with the messages. ``upToSeq`` is copied out for the condition."""

    upToSeq = NumberAttribute()
    data = UnicodeAttribute()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _query_pages(
    model: type[_M],
    hash_key: str,
    range_key_condition: Condition | None = None,
    *,
    limit: int | None = None,
    **kwargs: Any,
) -> tuple[list[_M], int]:
    """Run a PynamoDB query to the end (or to ``limit`` items); returns the items and the requests made.

    Each page is one Query request of at most 1 MB; the pages are walked here so that ``queries``
    counts requests, not calls.
    """
    results = model.query(hash_key, range_key_condition, limit=limit, **kwargs)
    items: list[_M] = []
    pages = 0
    for page in results.page_iter:
        pages += 1
        items.extend(model.from_raw_data(raw) for raw in page.get("Items", ()))
        if limit is not None and len(items) >= limit:
            del items[limit:]
            break
    return items, pages


class DynamoDbStore:
    """``agentvm.ports.Store`` on one DynamoDB table (layout: ``agentvm.adapters.aws.dynamodb.models``)."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._m = bind_models(table_name, region, host)
        self._summary = bind_model(SummaryItem, table_name, region, host)
        self._usage = DynamoDbUsageWriter(table_name, region=region, host=host)
        self._usage_reads = DynamoDbUsageRollups(table_name, region=region, host=host)
        # Read requests (GetItem, Query pages) since construction: lets tests bound a turn's reads.
        # Only ever changed on the event loop thread, never inside a worker thread.
        self.queries = 0

    def create_table(self, wait: bool = True) -> None:
        """Create the table (fixed schema, ``gsi1``, TTL) unless it exists. For tests and tooling."""
        create_table(self._m, wait=wait)

    # requests, each in a worker thread

    async def _get(self, model: type[_M], pk: str, sk: str, *, consistent: bool = True) -> _M | None:
        """A GetItem (strongly consistent unless told); None when the item does not exist."""

        def get() -> _M | None:
            try:
                return model.get(pk, sk, consistent_read=consistent)
            except DoesNotExist:
                return None

        self.queries += 1
        return await asyncio.to_thread(get)

    async def _query(self, model: type[_M], *args: Any, **kwargs: Any) -> list[_M]:
        items, pages = await asyncio.to_thread(_query_pages, model, *args, **kwargs)
        self.queries += pages
        return items

    @staticmethod
    async def _put(item: TableItem, condition: Condition | None = None) -> bool:
        """PutItem (or another write); False when ``condition`` failed, so nothing was written."""
        return await conditional_write(lambda: item.save(condition=condition))

    async def _batch_delete(self, items: list[TableItem]) -> None:
        def delete_all() -> None:
            # BatchWriteItem: 25 deletes per request; PynamoDB resends unprocessed items.
            with self._m.base.batch_write() as batch:
                for item in items:
                    batch.delete(item)

        if items:
            await asyncio.to_thread(delete_all)

    # containers

    async def put_container(self, record: ContainerRecord) -> bool:
        item = self._m.record(
            tenant_pk(record.tenantId),
            container_sk(record.containerId),
            tenantId=record.tenantId,
            data=record.model_dump_json(),
        )
        return await self._put(item, self._m.record.sk.does_not_exist())

    async def get_container(self, tenant_id: str, container_id: str) -> ContainerRecord | None:
        item = await self._get(self._m.record, tenant_pk(tenant_id), container_sk(container_id))
        return None if item is None else ContainerRecord.model_validate_json(item.data)

    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]:
        # Strongly consistent: a client lists right after creating one.
        items = await self._query(
            self._m.record,
            tenant_pk(tenant_id),
            self._m.record.sk.startswith(CONTAINER_PREFIX),
            consistent_read=True,
        )
        return [ContainerRecord.model_validate_json(item.data) for item in items]

    # images and sessions

    def _image_item(self, image: ImageRecord) -> TableItem:
        return self._m.record(
            image_pk(image.imageId),
            META,
            tenantId=image.tenantId,
            data=image.model_dump_json(),
            gsi1pk=tenant_pk(image.tenantId),
            gsi1sk=image_gsi1sk(image.containerId, image.createdAt, image.imageId),
        )

    async def create_image(self, image: ImageRecord, session: SessionRecord) -> None:
        # Two puts, no transaction: the session first, so a crash in between leaves an unreachable
        # session item rather than a listed image without its session.
        session_item = self._m.record(
            session_pk(session.sessionId), META, tenantId=session.tenantId, data=session.model_dump_json()
        )
        if not await self._put(session_item, self._m.record.sk.does_not_exist()):
            raise Conflict(f"session {session.sessionId} already exists")
        if not await self._put(self._image_item(image), self._m.record.sk.does_not_exist()):
            raise Conflict(f"image {image.imageId} already exists")

    async def get_image(self, tenant_id: str, image_id: str) -> ImageRecord | None:
        item = await self._get(self._m.record, image_pk(image_id), META)
        if item is None or item.tenantId != tenant_id:
            return None
        return ImageRecord.model_validate_json(item.data)

    async def list_images(self, tenant_id: str, container_id: str | None = None) -> list[ImageRecord]:
        prefix = IMAGE_PREFIX if container_id is None else f"{IMAGE_PREFIX}{container_id}#"
        items = await self._query(
            self._m.record,
            tenant_pk(tenant_id),
            self._m.record.gsi1sk.startswith(prefix),
            index_name=GSI1,
            scan_index_forward=False,
        )
        images = [ImageRecord.model_validate_json(item.data) for item in items]
        if container_id is not None:
            # Already newest first within one container; the check drops a container whose id
            # merely starts with "<container_id>#".
            return [i for i in images if i.containerId == container_id]
        # The index sorts by container first; the tenant-wide list is sorted here.
        return sorted(images, key=lambda i: (i.createdAt, i.imageId), reverse=True)

    async def put_image(self, image: ImageRecord) -> None:
        # Overwrite (or create), but never an image of another tenant; that write is dropped.
        record = self._m.record
        owned = record.pk.does_not_exist() | (record.tenantId == image.tenantId)
        await self._put(self._image_item(image), owned)

    async def delete_image(self, tenant_id: str, image_id: str) -> None:
        item = await self._get(self._m.record, image_pk(image_id), META)
        if item is None or item.tenantId != tenant_id:
            return
        image = ImageRecord.model_validate_json(item.data)
        # The session partition first (META, messages, claims, cancel mark), the image last: if this
        # fails halfway, the image is still listed and a retry finishes the job.
        session_items = await self._query(
            self._m.base, session_pk(image.sessionId), consistent_read=True, attributes_to_get=["pk", "sk"]
        )
        await self._batch_delete(session_items)
        await asyncio.to_thread(item.delete)

    async def get_session(self, tenant_id: str, session_id: str) -> SessionRecord | None:
        item = await self._get(self._m.record, session_pk(session_id), META)
        if item is None or item.tenantId != tenant_id:
            return None
        return SessionRecord.model_validate_json(item.data)

    # messages

    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        pk = session_pk(session_id)
        body = _dumps(message_to_wire(message))
        if idempotency_key is None:
            seq = await self._last_seq(pk) + 1
            while not await self._put_message(pk, seq, body, None):
                seq = await self._last_seq(pk) + 1
            return AppendResult(message=message, seq=seq, created=True)

        owner = uuid.uuid4().hex
        seq = await self._last_seq(pk) + 1
        if not await self._claim(pk, idempotency_key, seq, owner):
            found = await self._settle_claim(pk, idempotency_key, owner)
            if isinstance(found, AppendResult):
                return found
            seq = found  # we took over a dead claimant's key
        while not await self._put_message(pk, seq, body, idempotency_key):
            seq = await self._last_seq(pk) + 1
            if not await self._move_claim(pk, idempotency_key, owner, seq):
                # Presumed dead and taken over: whoever holds the claim now writes the message.
                found = await self._settle_claim(pk, idempotency_key, owner)
                if isinstance(found, AppendResult):
                    return found
                seq = found
        return AppendResult(message=message, seq=seq, created=True)

    async def _last_seq(self, pk: str) -> int:
        items = await self._query(
            self._m.base,
            pk,
            self._m.base.sk.startswith(MSG_PREFIX),
            consistent_read=True,
            scan_index_forward=False,
            limit=1,
            attributes_to_get=["sk"],
        )
        return seq_of(items[0].sk) if items else 0

    async def _put_message(self, pk: str, seq: int, body: str, key: str | None) -> bool:
        item = self._m.message(pk, message_sk(seq), idem=key, **body_attributes(body))
        return await self._put(item, self._m.message.sk.does_not_exist())

    async def _claim(self, pk: str, key: str, seq: int, owner: str) -> bool:
        item = self._m.idem(pk, idem_sk(key), seq=seq, owner=owner, claimedAt=_now_ms())
        return await self._put(item, self._m.idem.sk.does_not_exist())

    async def _move_claim(self, pk: str, key: str, owner: str, seq: int) -> bool:
        """Point our claim at a new seq (and renew its lease), unless it is no longer ours."""
        idem = self._m.idem
        claim = idem(pk, idem_sk(key))
        actions: list[Action] = [idem.seq.set(seq), idem.claimedAt.set(_now_ms())]
        return await conditional_write(lambda: claim.update(actions=actions, condition=idem.owner == owner))

    async def _settle_claim(self, pk: str, key: str, owner: str) -> AppendResult | int:
        """Wait for the holder of ``key`` to finish. Returns its result, or the seq we must now write
        after taking over (or re-creating) the claim."""
        idem = self._m.idem
        delay = _POLL_FIRST_S
        while True:
            claim = await self._get(idem, pk, idem_sk(key))
            if claim is None:  # deleted with its session since: claim the key afresh
                seq = await self._last_seq(pk) + 1
                if await self._claim(pk, key, seq, owner):
                    return seq
                continue
            claimed_seq = int(claim.seq)  # a NumberAttribute reads back an int here
            stored = await self._get(self._m.message, pk, message_sk(claimed_seq))
            if stored is not None and stored.idem == key:
                return AppendResult(message=message_from_wire(stored.text), seq=claimed_seq, created=False)
            if _now_ms() - claim.claimedAt > CLAIM_LEASE_MS:
                seq = await self._last_seq(pk) + 1
                if await self._take_over(claim, owner, seq):
                    return seq
                continue
            await asyncio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)

    async def _take_over(self, claim: IdemItem, owner: str, seq: int) -> bool:
        """Make a dead claimant's claim ours, conditional on it being exactly what we judged dead."""
        idem = self._m.idem
        actions: list[Action] = [idem.seq.set(seq), idem.owner.set(owner), idem.claimedAt.set(_now_ms())]
        unchanged = (idem.owner == claim.owner) & (idem.claimedAt == claim.claimedAt)
        return await conditional_write(lambda: claim.update(actions=actions, condition=unchanged))

    async def list_messages(self, session_id: str) -> list[Message]:
        items = await self._query(
            self._m.message,
            session_pk(session_id),
            self._m.message.sk.startswith(MSG_PREFIX),
            consistent_read=True,
        )
        return [message_from_wire(item.text) for item in items]

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        # Newest first with Limit: DynamoDB reads (and bills) only the window, never the history.
        items = await self._query(
            self._m.message,
            session_pk(session_id),
            self._m.message.sk.startswith(MSG_PREFIX),
            consistent_read=True,
            scan_index_forward=False,
            limit=limit,
        )
        return [message_from_wire(item.text) for item in reversed(items)]

    async def recent_messages_after(
        self, session_id: str, after_seq: int, limit: int, *, fresh: bool = True
    ) -> list[SeqMessage]:
        if limit <= 0:
            return []
        # One Query, newest first with Limit, on the message keys above the summary's: bounded
        # whatever the history's length.
        items = await self._query(
            self._m.message,
            session_pk(session_id),
            self._m.message.sk.between(message_sk(max(after_seq, 0) + 1), _LAST_MESSAGE_SK),
            consistent_read=fresh,
            scan_index_forward=False,
            limit=limit,
        )
        return [SeqMessage(seq_of(item.sk), message_from_wire(item.text)) for item in reversed(items)]

    # compaction summaries

    async def put_summary(self, summary: SessionSummary) -> bool:
        item = self._summary(
            session_pk(summary.sessionId), SUMMARY, upToSeq=summary.upToSeq, data=summary.model_dump_json()
        )
        # Only ever forward: a slower compaction finishing late never replaces a newer summary.
        forward = self._summary.sk.does_not_exist() | (self._summary.upToSeq < summary.upToSeq)
        return await self._put(item, forward)

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        item = await self._get(self._summary, session_pk(session_id), SUMMARY)
        return None if item is None else SessionSummary.model_validate_json(item.data)

    # turns and usage

    async def put_turn(self, turn: TurnRecord) -> None:
        await self._put(self._m.record(turn_pk(turn.turnId), META, data=turn.model_dump_json()))

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        item = await self._get(self._m.record, turn_pk(turn_id), META)
        return None if item is None else TurnRecord.model_validate_json(item.data)

    async def put_usage(self, usage: UsageRecord) -> bool:
        # Keyed by the turn: the first write wins, so a retried turn never bills twice. The sums are
        # rolled up from the records by hour (dynamodb_usage): the writer adds the gsi2 keys.
        item = self._m.record(
            turn_pk(usage.turnId),
            USAGE,
            tenantId=usage.tenantId,
            data=usage.model_dump_json(),
        )
        return await self._usage.write(item, usage)

    async def list_usage(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        # Records written before they left gsi1 (usage_gsi1sk) are listed there; the others, hour
        # by hour on gsi2 (dynamodb_usage.DynamoDbUsageRollups.records). A record of the version in
        # between has both keys: each turn's record is listed once.
        prefix = USAGE_PREFIX if container_id is None else f"{USAGE_PREFIX}{container_id}#"
        items = await self._query(
            self._m.record, tenant_pk(tenant_id), self._m.record.gsi1sk.startswith(prefix), index_name=GSI1
        )
        by_turn = {
            u.turnId: u for u in await self._usage_reads.records(tenant_id, container_id, since_ms=since_ms)
        }
        for item in items:
            record = UsageRecord.model_validate_json(item.data)
            if container_id is None or record.containerId == container_id:
                by_turn[record.turnId] = record
        records = [u for u in by_turn.values() if u.createdAt >= since_ms]
        return sorted(records, key=lambda u: (u.createdAt, u.turnId))

    # interrupt marks: one item per cancelled turn, in its session's partition (several turns of a
    # session can be cancelled at once: /v1/turns/cancel), read once by each attempt at its start;
    # and one per turn under the poller running it, which reads all of its marks with one Query
    # (turns/cancel_poll.py: the order of these writes and reads is what makes it safe)

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        await self._put(self._m.cancel(session_pk(session_id), cancel_sk(turn_id), turnId=turn_id))
        turn = await self.get_turn(turn_id)  # strongly consistent, and after the mark: see cancel_poll
        if turn is not None and turn.status == "running" and turn.poller:
            expires = datetime.fromtimestamp(time.time() + POLL_MARK_TTL_S, tz=UTC)
            mark = self._m.cancel(
                poller_pk(turn.poller), cancel_sk(turn_id), turnId=turn_id, expiresAt=expires
            )
            await self._put(mark)

    async def cancel_requests(self, poller: str) -> set[str]:
        items = await self._query(self._m.cancel, poller_pk(poller), consistent_read=False)
        return {item.turnId for item in items}

    async def is_cancel_requested(self, session_id: str, turn_id: str, *, fresh: bool = True) -> bool:
        item = await self._get(self._m.cancel, session_pk(session_id), cancel_sk(turn_id), consistent=fresh)
        return item is not None


async def conditional_write(write: Callable[[], object]) -> bool:
    """Run a write in a thread; False if DynamoDB rejected its condition (nothing was written).

    A failed condition still consumes the write units of the item it was evaluated against.
    """
    try:
        await asyncio.to_thread(write)
    except PynamoDBException as exc:
        if exc.cause_response_code == CONDITION_FAILED:
            return False
        raise
    return True


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


__all__ = ["CLAIM_LEASE_MS", "DynamoDbStore", "conditional_write"]
