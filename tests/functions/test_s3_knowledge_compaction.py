"""A knowledge draft's segments merged into one (``adapters/aws/s3_knowledge.py``, "Compaction"), on
moto's S3: a read past ``compact_after`` segments merges them and later cold readers GET one; the
results do not change; an upload, a drop or a reader landing in the middle of a compaction loses
nothing, resurrects nothing and counts nothing twice; a compaction failing halfway leaves a
readable draft."""

from __future__ import annotations

import asyncio
import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from agentvm.adapters.aws.s3_knowledge import (
    _view_key,
    decode_segment,
    draft_prefix,
    encode_segment,
    is_merged,
    merge_segments,
    merged_key,
)
from agentvm.ports import DRAFT
from tests.contract.test_knowledge_index_contract import chunk
from tests.functions.test_s3_knowledge_index import BUCKET, _Client, new_index, requests_of

pytestmark = pytest.mark.aws

COMPACT_AFTER = 4


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def segment_keys(s3) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=draft_prefix("acme", "kb")).get("Contents", [])
    return sorted(o["Key"] for o in listed)


async def upload(index, n: int, text: str = "") -> None:
    body = text or f"Document {n} about refunds and invoices, number {n}."
    await index.add_chunks("acme", "kb", DRAFT, [chunk(f"{n}.md", 0, body)], None)


async def documents_of(index) -> list[str]:
    return [d.document_id for d in await index.documents("acme", "kb", DRAFT)]


async def test_a_read_past_the_limit_merges_the_segments_and_a_cold_reader_gets_one(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 2):
        await upload(writer, n)
    await upload(writer, 0, "Document 0 rewritten: shipping only.")  # replaces 0.md's chunk 0
    before = await writer.search_words("acme", "kb", DRAFT, "refunds shipping", 10)
    chunks_before = await writer.chunks("acme", "kb", DRAFT)
    assert len(segment_keys(s3)) == COMPACT_AFTER + 3

    compactor = new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER)
    assert await compactor.search_words("acme", "kb", DRAFT, "refunds shipping", 10) == before
    (merged,) = segment_keys(s3)
    assert is_merged(merged)
    chunks, vectors = decode_segment(s3.get_object(Bucket=BUCKET, Key=merged)["Body"].read())
    assert vectors is None and len(chunks) == COMPACT_AFTER + 2  # 0.md's first chunk replaced, not kept

    reader = new_index(s3, tmp_path, "reader", compact_after=COMPACT_AFTER)
    gets = requests_of(s3, "GetObject")
    assert await reader.search_words("acme", "kb", DRAFT, "refunds shipping", 10) == before
    assert await reader.chunks("acme", "kb", DRAFT) == chunks_before
    assert len(gets) == 1
    # the compactor's own next read, and the writer's (whose segments went), fetch at most the merged one
    assert await compactor.search_words("acme", "kb", DRAFT, "refunds shipping", 10) == before
    assert await writer.search_words("acme", "kb", DRAFT, "refunds shipping", 10) == before
    assert len(gets) == 2
    # later uploads apply after the merged segment, and compact again past the limit
    await upload(writer, 0, "Document 0 third version, about returns.")
    assert segment_keys(s3)[0] == merged
    assert [h.chunk.document_id for h in await reader.search_words("acme", "kb", DRAFT, "returns", 5)] == [
        "0.md"
    ]
    for n in range(100, 100 + COMPACT_AFTER):
        await upload(writer, n)
    await reader.documents("acme", "kb", DRAFT)
    (again,) = segment_keys(s3)
    assert again > merged and len(await documents_of(new_index(s3, tmp_path, "cold"))) == COMPACT_AFTER + 6


def test_a_merged_key_sorts_after_the_last_segment_it_replaces_and_before_later_ones():
    last = f"{draft_prefix('acme', 'kb')}{1000:020d}-abcdef012345.json.gz"
    later = f"{draft_prefix('acme', 'kb')}{1001:020d}-000000000000.json.gz"
    first = merged_key(last)
    second = merged_key(first)
    assert last < first < second < later
    assert is_merged(first) and not is_merged(last)
    assert second.count("~") == 1  # a generation, not a growing name


def test_merging_keeps_the_last_chunk_of_a_document_and_ordinal_where_it_came():
    a0, b0, a0_new = chunk("a.md", 0, "one"), chunk("b.md", 0, "two"), chunk("a.md", 0, "three")
    assert merge_segments([([a0, b0], None), ([a0_new], None)]) == ([b0, a0_new], None)
    assert merge_segments([([a0], [[1.0, 0.0]]), ([b0], None)]) is None  # vectors and words only: left


async def test_an_upload_during_a_compaction_is_kept(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    compactor = new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER)
    put_object, loop, raced = s3.put_object, asyncio.get_running_loop(), []

    def put_with_an_upload_landing(**params):
        if is_merged(params["Key"]) and not raced:  # another function uploads as the merge is written
            raced.append(params["Key"])
            asyncio.run_coroutine_threadsafe(upload(writer, 99), loop).result()
        return put_object(**params)

    compactor._s3 = _Client(s3, put_object=put_with_an_upload_landing)
    await compactor.documents("acme", "kb", DRAFT)
    keys = segment_keys(s3)
    assert raced and len(keys) == 2 and is_merged(keys[0])  # the merged segment, then the upload's
    expected = [f"{n}.md" for n in range(COMPACT_AFTER + 1)] + ["99.md"]
    assert sorted(await documents_of(new_index(s3, tmp_path, "cold"))) == sorted(expected)
    assert sorted(await documents_of(compactor)) == sorted(expected)


async def test_a_document_dropped_before_the_merge_is_checked_undoes_it(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    compactor = new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER)
    put_object, loop, raced = s3.put_object, asyncio.get_running_loop(), []

    def put_then_a_drop(**params):
        answer = put_object(**params)
        if is_merged(params["Key"]) and not raced:  # dropped between the merged PUT and its check
            raced.append(params["Key"])
            drop = writer.drop_document("acme", "kb", DRAFT, "1.md")
            assert asyncio.run_coroutine_threadsafe(drop, loop).result() > 0
        return answer

    compactor._s3 = _Client(s3, put_object=put_then_a_drop)
    await compactor.documents("acme", "kb", DRAFT)
    keys = segment_keys(s3)
    assert raced and len(keys) == COMPACT_AFTER and not any(is_merged(k) for k in keys)  # undone
    for reader in (compactor, new_index(s3, tmp_path, "cold")):
        assert "1.md" not in await documents_of(reader)
        assert len(await documents_of(reader)) == COMPACT_AFTER


async def test_a_document_dropped_between_the_check_and_the_deletes_stays_dropped(s3, tmp_path):
    """The hardest order: the drop lists before the merged PUT (so does not see it) and deletes its
    segment after the compaction checked its segments; the drop then finds the merged segment."""
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    dropper = new_index(s3, tmp_path, "dropper", compact_after=None)
    compactor = new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER)
    loop = asyncio.get_running_loop()
    dropper_listed, compaction_checked = threading.Event(), threading.Event()
    dropping: list[asyncio.Future] = []

    def dropper_delete(**params):  # the drop's own write waits for the compaction's check
        dropper_listed.set()
        assert compaction_checked.wait(10)
        return s3.delete_object(**params)

    def compactor_put(**params):
        if is_merged(params["Key"]) and not dropping:
            drop = dropper.drop_document("acme", "kb", DRAFT, "1.md")
            dropping.append(asyncio.run_coroutine_threadsafe(drop, loop))
            assert dropper_listed.wait(10)  # it listed before this PUT
        return s3.put_object(**params)

    def compactor_deletes(**params):
        compaction_checked.set()
        assert dropping[0].result(10) > 0  # the drop lands before the compaction's deletes
        return s3.delete_objects(**params)

    dropper._s3 = _Client(s3, delete_object=dropper_delete)
    compactor._s3 = _Client(s3, put_object=compactor_put, delete_objects=compactor_deletes)
    await compactor.documents("acme", "kb", DRAFT)
    (merged,) = segment_keys(s3)
    assert is_merged(merged)
    for reader in (new_index(s3, tmp_path, "cold"), compactor, dropper, writer):
        assert "1.md" not in await documents_of(reader)
        assert len(await documents_of(reader)) == COMPACT_AFTER


async def test_a_reader_between_the_merged_put_and_the_deletes_counts_each_chunk_once(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    await upload(writer, 2, "Document 2 rewritten about refunds.")
    expected = await writer.search_words("acme", "kb", DRAFT, "refunds", 20)
    keys = segment_keys(s3)
    parts = [decode_segment(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys]
    merged = merge_segments(parts)
    assert merged is not None
    # the state a compaction leaves between its PUT and its deletes (or when it failed in between)
    s3.put_object(Bucket=BUCKET, Key=merged_key(keys[-1]), Body=encode_segment(*merged))
    reader = new_index(s3, tmp_path, "reader", compact_after=None)
    assert await reader.search_words("acme", "kb", DRAFT, "refunds", 20) == expected
    chunks = await reader.chunks("acme", "kb", DRAFT)
    assert len(chunks) == len({(c.document_id, c.ordinal) for c in chunks}) == COMPACT_AFTER + 1
    assert await reader.stats("acme", "kb") == await writer.stats("acme", "kb")


async def test_a_compaction_failing_halfway_leaves_a_readable_draft_merged_again_later(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    expected = await writer.search_words("acme", "kb", DRAFT, "refunds", 20)

    def deletes_fail(**_):
        raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}}, "DeleteObjects")

    failing = new_index(s3, tmp_path, "failing", compact_after=COMPACT_AFTER)
    failing._s3 = _Client(s3, delete_objects=deletes_fail)
    assert await failing.search_words("acme", "kb", DRAFT, "refunds", 20) == expected  # the read answers
    assert len(segment_keys(s3)) == COMPACT_AFTER + 2  # the merged one and all it merged
    for reader in (failing, new_index(s3, tmp_path, "cold", compact_after=None)):
        assert await reader.search_words("acme", "kb", DRAFT, "refunds", 20) == expected
    compactor = new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER)
    assert await compactor.search_words("acme", "kb", DRAFT, "refunds", 20) == expected
    (merged,) = segment_keys(s3)
    chunks, _ = decode_segment(s3.get_object(Bucket=BUCKET, Key=merged)["Body"].read())
    assert len(chunks) == COMPACT_AFTER + 1  # merged once more, each chunk still once


async def test_a_warm_reader_takes_a_merge_of_what_it_holds_without_indexing_again(s3, tmp_path):
    writer = new_index(s3, tmp_path, "writer", compact_after=None)
    for n in range(COMPACT_AFTER + 1):
        await upload(writer, n)
    reader = new_index(s3, tmp_path, "reader", compact_after=None)
    await reader.documents("acme", "kb", DRAFT)
    local_file = reader._cache[_view_key("acme", "kb")].path
    await new_index(s3, tmp_path, "compactor", compact_after=COMPACT_AFTER).documents("acme", "kb", DRAFT)
    await upload(writer, 99)  # after the merge
    gets = requests_of(s3, "GetObject")
    expected = [f"{n}.md" for n in range(COMPACT_AFTER + 1)] + ["99.md"]
    assert sorted(await documents_of(reader)) == sorted(expected)
    assert len(gets) == 2  # the merged segment (what it replaces) and the new one
    assert reader._cache[_view_key("acme", "kb")].path == local_file  # not built again
    # a merged segment rewritten by a drop no longer says what it holds: the file is built again
    assert await writer.drop_document("acme", "kb", DRAFT, "2.md") > 0
    assert "2.md" not in await documents_of(reader)
    assert reader._cache[_view_key("acme", "kb")].path != local_file
    assert sorted(await documents_of(reader)) == sorted(d for d in expected if d != "2.md")
