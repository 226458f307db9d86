"""Session search at 10,000 messages: latency on every store, and what a search costs on AWS.

One container of 10 conversations x 1,000 messages of ~1 KB (words drawn from a Zipf-like
vocabulary), with one planted phrase. Three searches: the planted phrase (one hit: on DynamoDB
this reads the whole container), a frequent word (the first page of 20 hits) and a prefix.

* SQLite (``SqliteSessionArchive``, FTS5, a file in a temporary directory): the first search of
  the container (which indexes all 10,000 messages), then each search warm (median and p95 of
  ``--runs``), and a search after 100 more messages were written (the index catching up).
* PostgreSQL (``PostgresSessionArchive``, tsvector + GIN, the cluster host): the same rows as
  SQLite, on a throwaway local server (``tests/postgres_server.py``: loopback TCP, fsync off) or
  ``AVM_TEST_DATABASE_URL``'s; the tables are ANALYZEd after the first search, as autovacuum
  would within a minute (without statistics the planner's first plans are slower).
* DynamoDB (``DynamoDbSessionArchive`` through PynamoDB on moto): each search followed page after
  page to its end, with every AWS request counted and billed by ``benchmarks/billing.py``
  (eventually consistent Query pages, read units on whole items) and priced with
  ``benchmarks/prices.py``. moto answers in this process, so its latencies say how much CPU the
  search spends here (parsing and matching ~10 MB), not DynamoDB's network time; the request
  count says how many round trips a deployed search makes.

Run: ``./dev python -m benchmarks.session_search [--messages 10000] [--runs 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.messages import AssistantMessage, Message, TextPart, UserMessage
from agentvm.records import ImageRecord, SessionImport, SessionRecord
from agentvm.sessions.search import parse_query
from benchmarks import prices

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

TENANT, CONTAINER = "bench", "user-bench"
PHRASE = "amber lighthouse at midnight"
CONVERSATIONS = 10
MESSAGE_CHARS = 1000


def _vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    syllables = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en", "ol")]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


@dataclass
class Corpus:
    conversations: list[list[Message]]
    frequent: str  # the vocabulary's most frequent word
    prefix: str
    planted: tuple[int, int]  # (conversation, message index) of the phrase

    @property
    def messages(self) -> int:
        return sum(len(c) for c in self.conversations)


def corpus(n_messages: int = 10_000, *, seed: int = 7) -> Corpus:
    """``n_messages`` of ~1 KB in ``CONVERSATIONS`` conversations; ``PHRASE`` in exactly one."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    per = max(1, n_messages // CONVERSATIONS)
    planted = (CONVERSATIONS // 3, per * 6 // 10)
    conversations: list[list[Message]] = []
    for c in range(CONVERSATIONS):
        history: list[Message] = []
        for i in range(per):
            text = ""
            while len(text) < MESSAGE_CHARS:
                text += " ".join(rng.choices(words, weights, k=20)) + ". "
            if (c, i) == planted:
                text = f"{text[:400]} {PHRASE.capitalize()} {text[400:]}"
            mid = f"msg_{c}_{i}"
            if i % 2 == 0:
                history.append(UserMessage(id=mid, timestamp=1_767_225_600_000 + i, content=text))
            else:
                history.append(
                    AssistantMessage(
                        id=mid,
                        timestamp=1_767_225_600_000 + i,
                        content=[TextPart(text=text)],
                        parentId=f"msg_{c}_{i - 1}",
                    )
                )
        conversations.append(history)
    return Corpus(conversations, words[0], words[0][:3], planted)


async def seed(archive: object, data: Corpus) -> list[ImageRecord]:
    """Every conversation written at once, as an import writes it (``SessionArchive.write_import``)."""
    images = []
    for c, history in enumerate(data.conversations):
        image = ImageRecord(
            tenantId=TENANT,
            imageId=f"img_bench_{c:02d}",
            containerId=CONTAINER,
            sessionId=f"sess_bench_{c:02d}",
            name=f"conversation {c}",
            createdAt=1_767_225_600_000 + c,
            updatedAt=1_767_225_600_000 + c,
        )
        session = SessionRecord(
            tenantId=TENANT,
            sessionId=image.sessionId,
            imageId=image.imageId,
            containerId=CONTAINER,
            createdAt=image.createdAt,
            updatedAt=image.createdAt,
        )
        claim = SessionImport(
            tenantId=TENANT,
            key=f"bench:{c}",
            containerId=CONTAINER,
            imageId=image.imageId,
            sessionId=image.sessionId,
            owner="bench",
            claimedAt=0,
        )
        await archive.claim_import(claim)  # type: ignore[attr-defined]
        await archive.write_import(claim, image, session, history, None)  # type: ignore[attr-defined]
        images.append(image)
    return images


def queries(data: Corpus) -> dict[str, str]:
    return {
        "phrase (1 hit)": f'"{PHRASE}"',
        "frequent word (20 of many)": data.frequent,
        "prefix": f"{data.prefix}*",
    }


async def search_all(
    archive: object, query: str, *, limit: int = 20, pages: int | None = None
) -> tuple[int, int]:
    """Follow ``next`` to the end (or ``pages`` pages); returns (hits, requests made)."""
    terms = parse_query(query)
    after, hits, requests = None, 0, 0
    while True:
        page = await archive.search_messages(  # type: ignore[attr-defined]
            TENANT, terms, container_id=CONTAINER, limit=limit, after=after
        )
        hits += len(page.hits)
        requests += 1
        after = page.next
        if after is None or (pages is not None and requests >= pages):
            return hits, requests


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


async def indexed_rows(
    name: str,
    store: object,
    archive: object,
    data: Corpus,
    runs: int,
    settle: Callable[[], Awaitable[None]] | None = None,
) -> list[dict[str, object]]:
    """The rows of a store with an index (SQLite FTS5, PostgreSQL): first search, warm, catching up.
    ``settle`` runs after the first search (PostgreSQL: the ANALYZE autovacuum would run)."""
    rows: list[dict[str, object]] = []
    images = await seed(archive, data)
    started = time.perf_counter()
    hits, _ = await search_all(archive, f'"{PHRASE}"')
    rows.append(
        {
            "store": name,
            "search": f"phrase, first search (indexes all {data.messages:,} messages)",
            "hits": hits,
            "requests": 1,
            "latency ms": _ms(time.perf_counter() - started),
        }
    )
    if settle is not None:
        await settle()
    for label, query in queries(data).items():
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            hits, requests = await search_all(archive, query, pages=1)
            times.append(time.perf_counter() - started)
        times.sort()
        p95 = times[max(0, int(len(times) * 0.95) - 1)]
        rows.append(
            {
                "store": name,
                "search": f"{label}, warm",
                "hits": hits,
                "requests": requests,
                "latency ms": f"{_ms(statistics.median(times))} (p95 {_ms(p95)})",
            }
        )
    for i in range(100):
        await store.append_message(  # type: ignore[attr-defined]
            images[0].sessionId, UserMessage(id=f"new_{i}", timestamp=i, content=f"new words {i}")
        )
    started = time.perf_counter()
    hits, _ = await search_all(archive, f'"{PHRASE}"')
    rows.append(
        {
            "store": name,
            "search": "phrase, after 100 new messages (indexes them)",
            "hits": hits,
            "requests": 1,
            "latency ms": _ms(time.perf_counter() - started),
        }
    )
    return rows


async def sqlite_rows(data: Corpus, runs: int) -> list[dict[str, object]]:
    from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive
    from agentvm.adapters.local.sqlite.store import SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "agentvm.db")
        try:
            return await indexed_rows("SQLite FTS5", store, SqliteSessionArchive(store), data, runs)
        finally:
            store.close()


async def postgres_rows(data: Corpus, runs: int) -> list[dict[str, object]]:
    """On the tests' PostgreSQL: ``AVM_TEST_DATABASE_URL``'s server, or a throwaway one started
    here from Debian's binaries (tests/postgres_server.py), over loopback TCP."""
    import pytest

    from agentvm.adapters.postgres.sessions import PostgresSessionArchive
    from agentvm.adapters.postgres.store import PostgresStore
    from tests.postgres_server import fresh_database, stop_shared_server

    try:
        from tests.postgres_server import shared_server

        shared_server()
    except pytest.skip.Exception as exc:  # no PostgreSQL here: say so in the table
        return [{"store": "PostgreSQL", "search": f"not run: {exc.msg}"}]
    try:
        async with fresh_database() as database:
            store, archive = PostgresStore(database), PostgresSessionArchive(database)

            async def analyze() -> None:
                # what autovacuum does within a minute of a bulk write (its default naptime)
                async with database.connection() as conn:
                    await conn.execute("ANALYZE")

            return await indexed_rows("PostgreSQL tsvector + GIN", store, archive, data, runs, analyze)
    finally:
        stop_shared_server()


async def dynamo_rows(data: Corpus, runs: int) -> list[dict[str, object]]:
    from agentvm.adapters.aws.dynamodb.sessions import DynamoDbSessionArchive
    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from benchmarks.billing import DDB_READ, DDB_WRITE, TableSchema
    from benchmarks.moto_turns import Metering

    schema = TableSchema(("pk", "sk"), {"gsi1": ("gsi1pk", "gsi1sk")})
    metering = Metering(schema)
    rows: list[dict[str, object]] = []
    with metering.active():
        store = DynamoDbStore("agentvm-search-bench", region="us-east-1")
        store.create_table()
        archive = DynamoDbSessionArchive("agentvm-search-bench", region="us-east-1")
        images = await seed(archive, data)
        calls = metering.aws.calls
        for label, query in queries(data).items():
            pages = None if label.startswith("phrase") else 1
            times, cpu, rru, requests, hits = [], [], 0.0, 0, 0
            for _ in range(max(1, runs // 5)):  # moto reads 10 MB per phrase search: fewer runs
                before = len(calls)
                started, cpu_started, moto_started = (
                    time.perf_counter(),
                    time.process_time(),
                    metering.excluded_s(),
                )
                hits, requests = await search_all(archive, query, pages=pages)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - cpu_started - (metering.excluded_s() - moto_started))
                rru = sum(c.units for c in calls[before:] if c.kind == DDB_READ)
                aws_requests = len(calls[before:])
            rows.append(
                {
                    "store": "DynamoDB (moto)",
                    "search": label + (", to the end" if pages is None else ", first page"),
                    "hits": hits,
                    "requests": f"{requests} search, {aws_requests} DynamoDB",
                    "latency ms": _ms(statistics.median(times)),
                    "search CPU ms (moto's excluded)": _ms(statistics.median(cpu)),
                    "read units": f"{rru:.0f}",
                    "$ per search": f"{rru * prices.DDB_READ_UNIT.usd:.6f}",
                }
            )
        # what a message costs to write, with search in place: the store's append, nothing more
        before = len(calls)
        for i in range(100):
            await store.append_message(
                images[0].sessionId, UserMessage(id=f"w{i}", timestamp=i, content="x" * 900)
            )
        wru = sum(c.units for c in calls[before:] if c.kind == DDB_WRITE) / 100
        rru = sum(c.units for c in calls[before:] if c.kind == DDB_READ) / 100
        append_usd = rru * prices.DDB_READ_UNIT.usd + wru * prices.DDB_WRITE_UNIT.usd
        rows.append(
            {
                "store": "DynamoDB (moto)",
                "search": "(writing a ~1 KB message: the append alone, no index)",
                "hits": "",
                "requests": "",
                "latency ms": "",
                "read units": f"{rru:.0f} + {wru:.0f} WRU",
                "$ per search": f"search adds $0 per message (the append: ${append_usd:.7f})",
            }
        )
    return rows


def _table(rows: list[dict[str, object]]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(out)


async def run(n_messages: int, runs: int) -> str:
    data = corpus(n_messages)
    size = sum(len(m.model_dump_json()) for c in data.conversations for m in c)
    rows = await sqlite_rows(data, runs) + await postgres_rows(data, runs) + await dynamo_rows(data, runs)
    head = (
        f"{data.messages:,} messages in one container ({CONVERSATIONS} conversations), "
        f'{size / 2**20:.1f} MiB of message JSON; queries: `"{PHRASE}"`, `{data.frequent}`, `{data.prefix}*`.'
    )
    return head + "\n\n" + _table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(asyncio.run(run(args.messages, args.runs)))


if __name__ == "__main__":
    main()
