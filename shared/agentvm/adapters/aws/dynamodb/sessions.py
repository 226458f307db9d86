"""The ``SessionArchive`` port on DynamoDB: imports and forks under a ledger claim, and message
search by reading messages (no index, nothing written per message).

**Imports and forks.** The ledger entry is ``TENANT#<t>`` / ``IMPORT#<key>`` (``data``: the
``SessionImport``), claimed with ``attribute_not_exists`` and changed only on an exact match of
``data`` (the owner's claim). ``write_import`` writes the messages (``BatchWriteItem``, 25 a
request), the summary, the session's ``META``, the image (last: what makes it listed), then the
claim ``done``. No transaction: DynamoDB's cap is 100 items and each item costs twice. A write
that fails is discarded (``discard_import``: one Query of the session's keys, batch deletes, the
image, the claim); a writer that dies leaves an unlisted session until a retry with the same key
takes the claim over (``sessions.writer``).

**Search: read the messages, match in the worker.** DynamoDB has no full-text index. Per search,
the images of the tenant (or of the container) are listed (one Query on ``gsi1``) and their
sessions' messages read newest first (``Query`` pages on ``MSG#`` keys, eventually consistent),
matched with ``sessions.search.matches``. Each request reads at most ``scan_budget_bytes`` of
messages (default 4 MiB: under a second of CPU on a small Lambda) and then answers with a cursor
where it stopped. Costs (us-east-1 on-demand, ``COST_MODEL.md``):

=================================  =========================================================
per message written                nothing (no index item, no extra write unit)
per search request                 messages read / 8 KB read units (4 KB strongly, halved when
                                   eventually consistent) at $0.125 per million, + 1 gsi1 Query
10,000 messages of ~1 KB           ~1,250 RRU = ~$0.00016 for the whole container, in 3 requests
one full 4 MiB request             512 RRU = $0.000064
=================================  =========================================================

(RRU are billed on whole items whatever the projection, so reading only ``sk`` and ``body``
saves transfer, not money.) The alternative, an inverted index (an item per distinct word of
each message), costs ~30 write units per ~1 KB message: ~$0.00002 per message, about $40 per
million standard turns, twice the whole AWS budget of a turn, to make searches cheaper that are
far rarer than turns. Measured figures: BENCHMARKS.md, "Session search".
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.aws.dynamodb.message_bodies import body_attributes, raw_body
from agentvm.adapters.aws.dynamodb.models import (
    META,
    MSG_PREFIX,
    bind_model,
    bind_models,
    image_pk,
    message_sk,
    seq_of,
    session_pk,
    tenant_pk,
)
from agentvm.adapters.aws.dynamodb.store import SUMMARY, DynamoDbStore, SummaryItem, conditional_write
from agentvm.errors import Conflict
from agentvm.messages import message_to_wire
from agentvm.records import SessionImport
from agentvm.sessions.search import scan

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from agentvm.adapters.aws.dynamodb.models import RecordItem
    from agentvm.messages import Message
    from agentvm.ports import SearchPage, SearchPosition, SearchTerm
    from agentvm.records import ImageRecord, SessionRecord, SessionSummary

IMPORT_PREFIX = "IMPORT#"
SCAN_BUDGET_BYTES = 4 * 1024 * 1024


class DynamoDbSessionArchive:
    """``agentvm.ports.SessionArchive`` on AgentVM's one table (``dynamodb.models``)."""

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        scan_budget_bytes: int = SCAN_BUDGET_BYTES,
    ) -> None:
        self._m = bind_models(table_name, region, host)
        self._summary = bind_model(SummaryItem, table_name, region, host)
        self._store = DynamoDbStore(table_name, region=region, host=host)
        self.scan_budget_bytes = scan_budget_bytes
        self.queries = 0  # read requests of searches (Query pages), for tests and benchmarks

    # -- the ledger -------------------------------------------------------------------------------
    def _ledger(self, claim: SessionImport) -> RecordItem:
        return self._m.record(
            tenant_pk(claim.tenantId),
            f"{IMPORT_PREFIX}{claim.key}",
            tenantId=claim.tenantId,
            data=claim.model_dump_json(),
        )

    async def claim_import(self, claim: SessionImport) -> SessionImport:
        item = self._ledger(claim)
        await conditional_write(lambda: item.save(condition=self._m.record.sk.does_not_exist()))

        def get() -> RecordItem:
            return self._m.record.get(item.pk, item.sk, consistent_read=True)

        return SessionImport.model_validate_json((await asyncio.to_thread(get)).data)

    async def replace_import(self, stored: SessionImport, claim: SessionImport) -> bool:
        item = self._ledger(claim)
        unchanged = self._m.record.data == stored.model_dump_json()
        return await conditional_write(lambda: item.save(condition=unchanged))

    # -- whole-session writes -----------------------------------------------------------------------
    async def write_import(
        self,
        claim: SessionImport,
        image: ImageRecord,
        session: SessionRecord,
        messages: Sequence[Message],
        summary: SessionSummary | None,
    ) -> SessionImport:
        pk = session_pk(session.sessionId)
        model = self._m.message

        def write_messages() -> None:
            # BatchWriteItem, 25 puts a request; PynamoDB resends what DynamoDB left unprocessed.
            with model.batch_write() as batch:
                for seq, message in enumerate(messages, 1):
                    body = json.dumps(message_to_wire(message), separators=(",", ":"), ensure_ascii=False)
                    batch.save(model(pk, message_sk(seq), **body_attributes(body)))

        await asyncio.to_thread(write_messages)
        if summary is not None:
            item = self._summary(pk, SUMMARY, upToSeq=summary.upToSeq, data=summary.model_dump_json())
            await conditional_write(item.save)
        await self._store.create_image(image, session)  # the session's META, then the image: listed
        done = claim.model_copy(update={"status": "done"})
        ours = self._m.record.data == claim.model_dump_json()
        if not await conditional_write(lambda: self._ledger(done).save(condition=ours)):
            raise Conflict("this import was taken over by another request")
        return done

    async def discard_import(self, claim: SessionImport) -> None:
        record = self._m.record

        def discard() -> None:
            keys = self._m.base.query(
                session_pk(claim.sessionId), consistent_read=True, attributes_to_get=["pk", "sk"]
            )
            with self._m.base.batch_write() as batch:
                for item in keys:
                    batch.delete(item)
            try:
                image = record.get(image_pk(claim.imageId), META, consistent_read=True)
            except record.DoesNotExist:
                image = None
            if image is not None and image.tenantId == claim.tenantId:
                image.delete()

        await asyncio.to_thread(discard)
        ledger = self._ledger(claim)
        await conditional_write(lambda: ledger.delete(condition=record.data == claim.model_dump_json()))

    # -- search ---------------------------------------------------------------------------------------
    async def search_messages(
        self,
        tenant_id: str,
        terms: Sequence[SearchTerm],
        *,
        container_id: str | None,
        limit: int,
        after: SearchPosition | None,
    ) -> SearchPage:
        images = await self._store.list_images(tenant_id, container_id)
        return await scan(
            images, self._pages, terms, limit=limit, after=after, budget_bytes=self.scan_budget_bytes
        )

    async def _pages(self, image: ImageRecord, below: int | None) -> AsyncGenerator[list[tuple[int, str]]]:
        """The session's messages, newest first (below ``below``), one Query page (<= 1 MB) at a time."""
        if below is not None and below <= 1:
            return
        model = self._m.message
        high = message_sk(below - 1) if below is not None else f"{MSG_PREFIX}9999999999"
        results = model.query(
            session_pk(image.sessionId),
            model.sk.between(message_sk(1), high),
            scan_index_forward=False,
            consistent_read=False,  # half the read units; a search a second behind is fine
            attributes_to_get=["sk", "body", "bodyz"],
        )
        pages: Any = iter(results.page_iter)
        while True:
            page = await asyncio.to_thread(next, pages, None)
            if page is None:
                return
            self.queries += 1
            yield [(seq_of(raw["sk"]["S"]), raw_body(raw)) for raw in page.get("Items", ())]


__all__ = ["IMPORT_PREFIX", "SCAN_BUDGET_BYTES", "DynamoDbSessionArchive"]
