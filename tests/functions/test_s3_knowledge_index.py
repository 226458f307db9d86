"""The AWS host's knowledge index (``adapters/aws/s3_knowledge.py``) on moto's S3: the local index's
own tests run against it, plus what the files in S3 add: a draft as one segment per upload (two
writers never wait, a document dropped from its segments, a segment rewritten meanwhile read again,
a draft from before segments converted), a version's file written conditionally and read once,
a bounded cache, a tenant's files gone with it."""

from __future__ import annotations

import asyncio

import boto3
import pytest
from moto import mock_aws

from agentvm.adapters.aws.s3_knowledge import (
    S3KnowledgeIndex,
    decode_segment,
    draft_prefix,
    object_key,
    owner_prefix,
)
from agentvm.hosts.aws import s3_knowledge_index
from agentvm.ports import DRAFT
from tests.contract.test_knowledge_index_contract import (  # the index contract's tests, on this index
    HANDBOOK,
    chunk,
    test_a_chunk_of_the_same_document_and_ordinal_replaces_the_indexed_one,  # noqa: F401
    test_a_large_first_add_indexes_as_adding_one_by_one_does,  # noqa: F401
    test_accents_are_folded_in_the_text_and_in_the_query,  # noqa: F401
    test_another_tenant_resource_or_version_never_returns_hits,  # noqa: F401
    test_documents_chunks_stats_and_dropping,  # noqa: F401
    test_dropping_an_owner_forgets_its_drafts_and_versions_only,  # noqa: F401
    test_hybrid_search_without_an_embedder_says_it_ran_words_only,  # noqa: F401
    test_query_syntax_is_only_words,  # noqa: F401
    test_the_heading_path_counts_more_than_the_text,  # noqa: F401
    test_words_rank_by_matches_and_stem,  # noqa: F401
)
from tests.knowledge_files import BagOfWordsEmbedder

pytestmark = pytest.mark.aws

BUCKET = "agentvm-knowledge-test"


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def requests_of(client, operation: str) -> list[dict]:
    """Record the ``operation`` calls ``client`` makes from now on (their parameters)."""
    seen: list[dict] = []
    client.meta.events.register(
        f"provide-client-params.s3.{operation}", lambda params, **_: seen.append(params)
    )
    return seen


def new_index(s3, tmp_path, name: str = "lambda-1", **kw) -> S3KnowledgeIndex:
    index = s3_knowledge_index(BUCKET, client=s3, cache_dir=str(tmp_path / name))
    assert isinstance(index, S3KnowledgeIndex)
    for key, value in kw.items():
        setattr(index, key, value)
    return index


@pytest.fixture
def empty(s3, tmp_path):
    idx = new_index(s3, tmp_path)
    yield idx
    idx.close()


@pytest.fixture
async def index(s3, tmp_path):
    idx = new_index(s3, tmp_path)
    await idx.add_chunks("acme", "handbook", "1", HANDBOOK, None)
    yield idx
    idx.close()


async def test_one_file_per_version_and_one_segment_per_draft_upload_under_hashed_keys(index, s3):
    await index.add_chunks("acme", "handbook", DRAFT, HANDBOOK[:1], None)
    await index.add_chunks("acme", "handbook", DRAFT, HANDBOOK[2:3], None)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    segments = [k for k in keys if k.startswith(draft_prefix("acme", "handbook"))]
    assert keys == sorted([object_key("acme", "handbook", "1"), *segments]) and len(segments) == 2
    assert all(k.startswith(owner_prefix("acme")) and "acme" not in k and "handbook" not in k for k in keys)
    body = s3.get_object(Bucket=BUCKET, Key=object_key("acme", "handbook", "1"))["Body"].read()
    assert body.startswith(b"SQLite format 3\x00")  # the whole index, checkpointed into one file
    first = s3.get_object(Bucket=BUCKET, Key=segments[0])["Body"].read()
    assert decode_segment(first) == ([HANDBOOK[0]], None)  # one upload's chunks, as given


async def test_vectors_are_stored_and_searched_in_the_file(s3, tmp_path):
    idx = new_index(s3, tmp_path)
    embedder = BagOfWordsEmbedder()
    vectors = embedder.embed([c.text for c in HANDBOOK], purpose="document")
    await idx.add_chunks("acme", "handbook", "1", HANDBOOK, vectors)
    reader = new_index(s3, tmp_path, "lambda-2")  # another execution environment reads it
    (query,) = embedder.embed(["express delivery from Rotterdam"], purpose="query")
    hits = await reader.search_vectors("acme", "handbook", "1", query, 2)
    assert [h.chunk.document_id for h in hits][:1] == ["shipping.md"] and hits[0].score > hits[1].score
    assert await reader.search_vectors("other", "handbook", "1", query, 5) == []
    assert await reader.search_vectors("acme", "handbook", "1", [1.0, 0.0], 5) == []  # no such dimension


async def test_two_lambdas_writing_one_draft_never_wait_for_each_other(s3, tmp_path):
    """Each upload creates its own segment (``If-None-Match: *``): no read of the draft before the
    PUT, no 412, and every reader sees both."""
    first, second = new_index(s3, tmp_path, "lambda-1"), new_index(s3, tmp_path, "lambda-2")
    await first.add_chunks("acme", "kb", DRAFT, [chunk("a.md", 0, "Alpha plan.")], None)
    await second.documents("acme", "kb", DRAFT)
    puts, gets = requests_of(s3, "PutObject"), requests_of(s3, "GetObject")
    await first.add_chunks("acme", "kb", DRAFT, [chunk("b.md", 0, "Beta plan.")], None)
    await second.add_chunks("acme", "kb", DRAFT, [chunk("c.md", 0, "Gamma plan.")], None)
    assert [p.get("IfNoneMatch") for p in puts] == ["*", "*"] and gets == []
    for reader in (first, second, new_index(s3, tmp_path, "lambda-3")):
        documents = await reader.documents("acme", "kb", DRAFT)
        assert [d.document_id for d in documents] == ["a.md", "b.md", "c.md"]
    assert len(gets) == 1 + 1 + 3  # each reader fetched only the segments it had not written or seen


async def test_concurrent_writers_on_threads_lose_nothing(s3, tmp_path):
    """Four execution environments, each on its own thread and event loop, five uploads each."""
    writers = [new_index(s3, tmp_path, f"lambda-{n}") for n in range(4)]

    def upload_all(n: int, writer: S3KnowledgeIndex) -> None:
        async def run() -> None:
            for m in range(5):
                await writer.add_chunks("acme", "kb", DRAFT, [chunk(f"{n}-{m}.md", 0, f"Doc {n} {m}.")], None)

        asyncio.run(run())

    await asyncio.gather(*(asyncio.to_thread(upload_all, n, w) for n, w in enumerate(writers)))
    documents = await new_index(s3, tmp_path, "reader").documents("acme", "kb", DRAFT)
    assert sorted(d.document_id for d in documents) == sorted(
        f"{n}-{m}.md" for n in range(4) for m in range(5)
    )


async def test_a_writer_that_keeps_losing_gives_up_with_a_conflict(s3, tmp_path):
    """A version's file is a read-modify-write: a writer whose file changed before each PUT gives up."""
    from agentvm.errors import Conflict

    idx = new_index(s3, tmp_path, attempts=2)
    other = new_index(s3, tmp_path, "lambda-2")
    await idx.add_chunks("acme", "kb", "1", [chunk("a.md", 0, "Alpha.")], None)
    put_object, loop, written = s3.put_object, asyncio.get_running_loop(), []

    def always_changed(**params):  # another Lambda writes before each of this one's PUTs
        written.append(f"{len(written)}.md")
        change = other.add_chunks("acme", "kb", "1", [chunk(written[-1], 0, "Other.")], None)
        asyncio.run_coroutine_threadsafe(change, loop).result()
        return put_object(**params)

    idx._s3 = _Client(s3, put_object=always_changed)
    with pytest.raises(Conflict, match="being changed by someone else"):
        await idx.add_chunks("acme", "kb", "1", [chunk("b.md", 0, "Beta.")], None)
    documents = await other.documents("acme", "kb", "1")
    assert [d.document_id for d in documents] == ["0.md", "1.md", "a.md"]  # the others' writes kept


async def test_a_published_file_is_read_once_and_a_draft_is_listed_on_each_read(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer")
    await writer.add_chunks("acme", "kb", "1", HANDBOOK, None)
    for c in HANDBOOK:
        await writer.add_chunks("acme", "kb", DRAFT, [c], None)
    now = [0.0]
    reader = new_index(s3, tmp_path, "reader", _now=lambda: now[0])
    gets, lists = requests_of(s3, "GetObject"), requests_of(s3, "ListObjectsV2")
    for _ in range(3):
        assert await reader.search_words("acme", "kb", "1", "refunds", 5)
    assert len(gets) == 1  # downloaded once: a published version's file never changes
    now[0] = reader.revalidate_s + 1
    assert await reader.search_words("acme", "kb", "1", "refunds", 5)
    assert len(gets) == 2 and gets[-1]["IfNoneMatch"]  # conditional: 304, no bytes
    for _ in range(2):
        assert await reader.search_words("acme", "kb", DRAFT, "refunds", 5)
    assert len(gets) == 2 + len(HANDBOOK) and len(lists) == 2  # each segment fetched once, listed each read
    # the draft changed elsewhere: the next read sees the change (its local file built again)
    assert await writer.drop_document("acme", "kb", DRAFT, "billing.md") == sum(
        len(c.text.encode()) for c in HANDBOOK[:2]
    )
    assert await reader.search_words("acme", "kb", DRAFT, "refunds", 5) == []
    assert len(gets) == 2 + len(HANDBOOK)  # rebuilt from the segments it had: nothing downloaded
    assert [d.document_id for d in await reader.documents("acme", "kb", DRAFT)] == [
        "security.md",
        "shipping.md",
    ]


async def test_uploads_send_each_byte_of_the_draft_once(s3, tmp_path):
    """n uploads (each reading the draft for its limits first, as ``resources/uploads.py`` does) PUT
    exactly the draft's bytes: O(n), where rewriting one file per upload sent O(n^2)."""
    writer = new_index(s3, tmp_path)
    puts = requests_of(s3, "PutObject")
    for n in range(20):
        await writer.documents("acme", "kb", DRAFT)
        await writer.add_chunks(
            "acme", "kb", DRAFT, [chunk(f"{n}.md", 0, f"Document {n} about refunds.")], None
        )
    stored = s3.list_objects_v2(Bucket=BUCKET, Prefix=draft_prefix("acme", "kb"))["Contents"]
    assert len(puts) == len(stored) == 20
    sent = [p["Body"] if isinstance(p["Body"], bytes) else p["Body"].getvalue() for p in puts]
    assert sum(len(body) for body in sent) == sum(o["Size"] for o in stored)
    assert len(await writer.search_words("acme", "kb", DRAFT, "refunds", 50)) == 20


async def test_dropping_a_document_rewrites_only_a_segment_it_shares(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer")
    await writer.add_chunks("acme", "kb", DRAFT, HANDBOOK, None)  # one call, three documents
    await writer.add_chunks("acme", "kb", DRAFT, [chunk("faq.md", 0, "Refunds questions.")], None)
    await writer.documents("acme", "kb", DRAFT)
    puts, deletes = requests_of(s3, "PutObject"), requests_of(s3, "DeleteObject")
    assert await writer.drop_document("acme", "kb", DRAFT, "billing.md") > 0
    assert len(puts) == 1 and puts[0]["IfMatch"] and deletes == []  # rewritten, If-Match its ETag
    assert await writer.drop_document("acme", "kb", DRAFT, "faq.md") > 0
    assert len(puts) == 1 and len(deletes) == 1  # alone in its segment: deleted
    for reader in (writer, new_index(s3, tmp_path, "reader")):
        documents = await reader.documents("acme", "kb", DRAFT)
        assert [d.document_id for d in documents] == ["security.md", "shipping.md"]
        assert await reader.search_words("acme", "kb", DRAFT, "refunds", 5) == []


async def test_a_segment_rewritten_meanwhile_is_read_again(s3, tmp_path):
    first, second = new_index(s3, tmp_path, "lambda-1"), new_index(s3, tmp_path, "lambda-2")
    await first.add_chunks("acme", "kb", DRAFT, HANDBOOK, None)
    await second.documents("acme", "kb", DRAFT)
    put_object, loop, raced = s3.put_object, asyncio.get_running_loop(), []

    def put_after_the_other(**params):
        raced.append(params["IfMatch"])
        if len(raced) == 1:  # just before the second's rewrite, the first drops another document of it
            change = first.drop_document("acme", "kb", DRAFT, "security.md")
            asyncio.run_coroutine_threadsafe(change, loop).result()
        return put_object(**params)

    second._s3 = _Client(s3, put_object=put_after_the_other)
    assert await second.drop_document("acme", "kb", DRAFT, "billing.md") > 0
    assert len(raced) == 2 and raced[0] != raced[1]  # 412, then read again and rewritten
    for reader in (first, second, new_index(s3, tmp_path, "lambda-3")):
        documents = await reader.documents("acme", "kb", DRAFT)
        assert [d.document_id for d in documents] == ["shipping.md"]


async def test_a_segment_gone_between_the_listing_and_its_download_is_listed_again(s3, tmp_path):
    writer, reader = new_index(s3, tmp_path, "writer"), new_index(s3, tmp_path, "reader")
    for c in HANDBOOK:
        await writer.add_chunks("acme", "kb", DRAFT, [c], None)
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=draft_prefix("acme", "kb"))["Contents"]
    security = sorted(o["Key"] for o in listed)[2]  # HANDBOOK[2]'s segment
    get_object, loop, raced = s3.get_object, asyncio.get_running_loop(), []

    def get_after_a_removal(**params):
        if params["Key"] == security and not raced:  # listed by the reader, removed before its GET
            raced.append(params["Key"])
            change = writer.drop_document("acme", "kb", DRAFT, "security.md")
            asyncio.run_coroutine_threadsafe(change, loop).result()
        return get_object(**params)

    reader._s3 = _Client(s3, get_object=get_after_a_removal)
    documents = await reader.documents("acme", "kb", DRAFT)
    assert raced and [d.document_id for d in documents] == ["billing.md", "shipping.md"]


async def test_a_draft_written_as_one_file_becomes_its_first_segment(s3, tmp_path):
    from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex

    old = SqliteKnowledgeIndex(tmp_path / "old.sqlite")  # what the draft was before segments
    await old.add_chunks("acme", "kb", DRAFT, HANDBOOK[:2], None)
    old.close()
    s3.put_object(
        Bucket=BUCKET, Key=object_key("acme", "kb", DRAFT), Body=(tmp_path / "old.sqlite").read_bytes()
    )
    idx = new_index(s3, tmp_path)
    await idx.add_chunks("acme", "kb", DRAFT, [chunk("faq.md", 0, "Refunds questions.")], None)
    assert [d.document_id for d in await idx.documents("acme", "kb", DRAFT)] == ["billing.md", "faq.md"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert object_key("acme", "kb", DRAFT) not in keys and len(keys) == 2
    assert await idx.stats("acme", "kb") == (2, 3, sum(len(c.text.encode()) for c in HANDBOOK[:2]) + 18)


async def test_the_cache_stays_within_its_bytes(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer")
    for n in range(4):
        await writer.add_chunks("acme", f"kb-{n}", "1", HANDBOOK, None)
    reader = new_index(s3, tmp_path, "reader")
    await reader.search_words("acme", "kb-0", "1", "refunds", 5)
    one_file = reader.cached_bytes
    reader.cache_bytes = 2 * one_file
    for n in range(4):
        assert await reader.search_words("acme", f"kb-{n}", "1", "refunds", 5)
        assert reader.cached_bytes <= 2 * one_file
    files = [p for p in (tmp_path / "reader").rglob("*.sqlite")]
    assert len(files) == 2


async def test_dropping_an_owner_deletes_its_prefix_only(index, s3):
    await index.add_chunks("acme", "drafted", DRAFT, HANDBOOK[:1], None)
    await index.add_chunks("other", "handbook", "1", HANDBOOK[:1], None)
    await index.drop_owner("acme")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys == [object_key("other", "handbook", "1")]
    assert await index.search_words("acme", "handbook", "1", "refunds", 5) == []
    assert await index.documents("acme", "drafted", DRAFT) == []


async def test_dropping_a_missing_document_writes_nothing(index, s3):
    puts = requests_of(s3, "PutObject")
    assert await index.drop_document("acme", "nothing-here", DRAFT, "a.md") == 0
    assert puts == []
    assert (
        s3.list_objects_v2(Bucket=BUCKET, Prefix=object_key("acme", "nothing-here", DRAFT))["KeyCount"] == 0
    )


class _Client:
    """The real (moto) S3 client with one operation routed through the test first."""

    def __init__(self, client, **overrides) -> None:
        self._client = client
        self._overrides = overrides

    def __getattr__(self, name: str):
        return self._overrides.get(name) or getattr(self._client, name)
