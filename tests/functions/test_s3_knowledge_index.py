"""The AWS host's knowledge index (``adapters/aws/s3_knowledge.py``) on moto's S3: the local index's
own tests run against it, plus what the files in S3 add: two writers of one draft both kept
(conditional PUTs), published files read once and drafts revalidated, a bounded cache, a tenant's
files gone with it."""

from __future__ import annotations

import asyncio

import boto3
import pytest
from moto import mock_aws

from agentvm.adapters.aws.s3_knowledge import S3KnowledgeIndex, object_key, owner_prefix
from agentvm.hosts.aws import s3_knowledge_index
from agentvm.ports import DRAFT
from tests.contract.test_knowledge_index_contract import (  # the index contract's tests, on this index
    HANDBOOK,
    chunk,
    test_a_chunk_of_the_same_document_and_ordinal_replaces_the_indexed_one,  # noqa: F401
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


async def test_one_file_per_version_under_hashed_keys(index, s3):
    await index.add_chunks("acme", "handbook", DRAFT, HANDBOOK[:1], None)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == sorted([object_key("acme", "handbook", "1"), object_key("acme", "handbook", DRAFT)])
    assert all(k.startswith(owner_prefix("acme")) and "acme" not in k and "handbook" not in k for k in keys)
    body = s3.get_object(Bucket=BUCKET, Key=object_key("acme", "handbook", "1"))["Body"].read()
    assert body.startswith(b"SQLite format 3\x00")  # the whole index, checkpointed into one file


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


async def test_two_lambdas_writing_one_draft_keep_both_writes(s3, tmp_path):
    """A writer whose file changed between its read and its PUT gets 412 and writes again."""
    first, second = new_index(s3, tmp_path, "lambda-1"), new_index(s3, tmp_path, "lambda-2")
    await first.add_chunks("acme", "kb", DRAFT, [chunk("a.md", 0, "Alpha plan.")], None)
    await second.documents("acme", "kb", DRAFT)  # the second has the file cached now
    puts = requests_of(s3, "PutObject")
    put_object = s3.put_object
    raced = []

    def put_after_the_other(**params):
        if not raced:  # just before the second's first PUT, the first writes its own document
            raced.append(True)
            asyncio.run_coroutine_threadsafe(
                first.add_chunks("acme", "kb", DRAFT, [chunk("b.md", 0, "Beta plan.")], None), loop
            ).result()
        return put_object(**params)

    loop = asyncio.get_running_loop()
    second._s3 = _Client(s3, put_object=put_after_the_other)
    await second.add_chunks("acme", "kb", DRAFT, [chunk("c.md", 0, "Gamma plan.")], None)
    # the second's first PUT (If-Match the file it read) lost: 412, read again, wrote again
    conditions = [p.get("IfMatch") for p in puts]
    assert len(puts) == 3 and conditions[0] == conditions[1] != conditions[2]
    for reader in (first, second, new_index(s3, tmp_path, "lambda-3")):
        documents = await reader.documents("acme", "kb", DRAFT)
        assert [d.document_id for d in documents] == ["a.md", "b.md", "c.md"]


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
    from agentvm.errors import Conflict

    idx = new_index(s3, tmp_path, attempts=2)
    other = new_index(s3, tmp_path, "lambda-2")
    await idx.add_chunks("acme", "kb", DRAFT, [chunk("a.md", 0, "Alpha.")], None)
    put_object, loop, written = s3.put_object, asyncio.get_running_loop(), []

    def always_changed(**params):  # another Lambda writes before each of this one's PUTs
        written.append(f"{len(written)}.md")
        change = other.add_chunks("acme", "kb", DRAFT, [chunk(written[-1], 0, "Other.")], None)
        asyncio.run_coroutine_threadsafe(change, loop).result()
        return put_object(**params)

    idx._s3 = _Client(s3, put_object=always_changed)
    with pytest.raises(Conflict, match="being changed by someone else"):
        await idx.add_chunks("acme", "kb", DRAFT, [chunk("b.md", 0, "Beta.")], None)
    documents = await other.documents("acme", "kb", DRAFT)
    assert [d.document_id for d in documents] == ["0.md", "1.md", "a.md"]  # the others' writes kept


async def test_a_published_file_is_read_once_and_a_draft_is_revalidated(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer")
    await writer.add_chunks("acme", "kb", "1", HANDBOOK, None)
    await writer.add_chunks("acme", "kb", DRAFT, HANDBOOK, None)
    now = [0.0]
    reader = new_index(s3, tmp_path, "reader", _now=lambda: now[0])
    gets = requests_of(s3, "GetObject")
    for _ in range(3):
        assert await reader.search_words("acme", "kb", "1", "refunds", 5)
    assert len(gets) == 1  # downloaded once: a published version's file never changes
    now[0] = reader.revalidate_s + 1
    assert await reader.search_words("acme", "kb", "1", "refunds", 5)
    assert len(gets) == 2 and gets[-1]["IfNoneMatch"]  # conditional: 304, no bytes
    for _ in range(2):
        assert await reader.search_words("acme", "kb", DRAFT, "refunds", 5)
    assert len(gets) == 4 and "IfNoneMatch" not in gets[2] and gets[3]["IfNoneMatch"]
    # the draft changed elsewhere: the next read sees the change
    await writer.drop_document("acme", "kb", DRAFT, "billing.md")
    assert await reader.search_words("acme", "kb", DRAFT, "refunds", 5) == []


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
