"""The AWS host's knowledge index files in S3 (``adapters/aws/s3_knowledge.py``), on moto: what a
draft's uploads and a version's searches cost in requests and bytes, and the file per chunk.

* Uploads: ``--documents`` documents of ``--chunks-per-document`` chunks (~800 characters of
  Zipf-like words, ``benchmarks.knowledge_search``'s corpus) added one by one to one draft, as
  ``POST /v1/knowledge/{name}/documents`` does (the draft's documents read for its limits, then
  the chunks added), by ``--writers`` functions in turn (each its own cache); the S3 requests, the
  bytes PUT and downloaded, and the draft's bytes in S3 at the end; then ``--cold-runs`` new
  functions' first search of it (median), and with ``--phases`` where one spends its time (LIST,
  GETs, decoding, indexing). ``--compaction both`` (the default) does it all twice, the draft's
  segments never merged and merged past ``COMPACT_AFTER``, side by side; ``off`` also runs on an
  adapter from before compaction (``PYTHONPATH`` to an older checkout's ``shared/``).
* A version: ``--chunks`` chunks with ``--dimensions``-float vectors published in one write; a
  cold read (download into the cache, open), warm searches (words, vectors: no request), and a
  revalidation after the freshness window (a conditional GET: 304).

moto runs in process: request counts and bytes are S3's, the times are not (no network); they show
what the function itself spends. Run: ``./dev python -m benchmarks.knowledge_s3``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections import Counter
from typing import Any

import boto3
from moto import mock_aws

from agentvm.adapters.aws import s3_knowledge
from agentvm.adapters.aws.s3_knowledge import S3KnowledgeIndex, draft_prefix
from agentvm.hosts.aws import s3_knowledge_index
from agentvm.ports import DRAFT, KnowledgeChunk
from benchmarks.knowledge_search import text, unit

BUCKET = "agentvm-knowledge-bench"


def counting(client: Any) -> tuple[Counter[str], list[int], list[int]]:
    """Requests ``client`` makes, by operation, the bytes of each PUT's body and of each GET's."""
    calls: Counter[str] = Counter()
    put_bytes: list[int] = []
    get_bytes: list[int] = []

    def got(parsed: dict[str, Any], **_: Any) -> None:
        get_bytes.append(int(parsed.get("ContentLength") or 0))

    def seen(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls[model.name] += 1
        if model.name == "PutObject":
            body = params["Body"]
            put_bytes.append(len(body) if isinstance(body, bytes) else body.seek(0, 2) or body.tell())
            if not isinstance(body, bytes):
                body.seek(0)

    client.meta.events.register("provide-client-params.s3.*", seen)
    client.meta.events.register("after-call.s3.GetObject", got)
    return calls, put_bytes, get_bytes


async def upload_draft(
    s3: Any, tmp: str, args: argparse.Namespace, resource: str, compact_after: int | None
) -> list[Any]:
    """``--documents`` uploads to ``resource``'s draft by ``--writers`` functions in turn; prints
    what they cost. The same corpus for every ``resource`` (the same seed)."""
    rng = random.Random(7)
    calls, put_bytes, get_bytes = counting(s3)
    writers = [index(s3, f"{tmp}/{resource}-writer-{n}", compact_after) for n in range(args.writers)]
    started = time.perf_counter()
    for d in range(args.documents):
        chunks = [
            KnowledgeChunk(f"doc-{d}.md", f"Doc {d}", "A > B", "B", n, text(rng, 800))
            for n in range(args.chunks_per_document)
        ]
        uploader = writers[d % len(writers)]
        await uploader.documents("acme", resource, DRAFT)  # the upload's limits read the draft
        await uploader.add_chunks("acme", resource, DRAFT, chunks, None)
    elapsed = time.perf_counter() - started
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=draft_prefix("acme", resource))["Contents"]
    stored = sum(o["Size"] for o in listed)
    n_chunks = args.documents * args.chunks_per_document
    mode = "never" if compact_after is None else f"past {compact_after} segments"
    print(
        f"## {args.documents} uploads of {args.chunks_per_document} chunks to one draft (words only),"
        f" {args.writers} writer(s) in turn; compaction {mode}"
    )
    print(f"requests: {dict(calls)}")
    print(f"bytes PUT: {sum(put_bytes)} ({sum(put_bytes) / 2**20:.2f} MiB)")
    print(f"bytes downloaded (GET): {sum(get_bytes)} ({sum(get_bytes) / 2**20:.2f} MiB)")
    per_chunk = stored / n_chunks
    print(f"the draft in S3 at the end: {len(listed)} segment(s), {stored} bytes ({per_chunk:.0f} per chunk)")
    print(f"time: {elapsed * 1000 / args.documents:.1f} ms an upload (mean of the whole run)")
    return writers


async def cold_reads(s3: Any, tmp: str, args: argparse.Namespace, resource: str) -> None:
    """``--cold-runs`` new functions' first search of the draft (the draft as the uploads left it:
    these readers do not compact), median time, and one's requests."""
    times = []
    for run in range(args.cold_runs):
        calls, _, get_bytes = counting(s3)
        cold = index(s3, f"{tmp}/{resource}-cold-{run}", None)
        started = time.perf_counter()
        found = await cold.search_words("acme", resource, DRAFT, "w10 w20", 5)
        times.append((time.perf_counter() - started) * 1000)
        cold.close()
    print(
        f"a new function's first search of the draft: {statistics.median(times):.0f} ms"
        f" (median of {args.cold_runs}; {min(times):.0f}-{max(times):.0f}), requests {dict(calls)},"
        f" {sum(get_bytes)} bytes downloaded, {len(found)} hits"
    )


async def cold_read_phases(s3: Any, tmp: str, resource: str) -> None:
    """Where a new function's first read of the draft spends its time: the LIST, the GETs
    (``FETCHES`` at a time), decoding the segments, indexing their chunks into the local file."""
    from agentvm.adapters.aws.s3_knowledge import decode_segment

    cold = index(s3, f"{tmp}/{resource}-phases", None)
    started = time.perf_counter()
    listing = cold._list_segments("acme", resource)
    listed = time.perf_counter()
    payloads = cold._fetch_segments(listing, "phases")
    fetched = time.perf_counter()
    decoded = [decode_segment(data) for data in payloads]
    chunks = [c for segment, _ in decoded for c in segment]
    done = time.perf_counter()
    local = cold._open_index(cold._new_path())
    await local.add_chunks("acme", resource, DRAFT, chunks, None)
    indexed = time.perf_counter()
    local.close()
    print(
        f"its phases: LIST {(listed - started) * 1000:.0f} ms, {len(listing)} GET"
        f" {(fetched - listed) * 1000:.0f} ms, decode {(done - fetched) * 1000:.0f} ms,"
        f" index {len(chunks)} chunks {(indexed - done) * 1000:.0f} ms"
    )


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        # an adapter from before compaction (PYTHONPATH to an older checkout's shared/) runs "off"
        merged = getattr(s3_knowledge, "COMPACT_AFTER", None)
        modes = {"off": [None], "on": [merged], "both": [None, merged]}[args.compaction]
        writer = None
        for compact_after in modes:
            resource = "kb" if compact_after is None else "kb-compacted"
            writer = (await upload_draft(s3, tmp, args, resource, compact_after))[0]
            await cold_reads(s3, tmp, args, resource)
            if args.phases:
                await cold_read_phases(s3, tmp, resource)
            print()
        assert writer is not None
        calls, put_bytes, get_bytes = counting(s3)
        if args.skip_version:
            return
        chunks = [
            KnowledgeChunk(f"d{n // 10}", "T", "", "", n % 10, text(rng, 800)) for n in range(args.chunks)
        ]
        vectors = [unit(rng, args.dimensions) for _ in chunks]
        started = time.perf_counter()
        await writer.add_chunks("acme", "kb", "1", chunks, vectors)
        publish_s = time.perf_counter() - started
        size = s3.head_object(Bucket=BUCKET, Key=_key("acme", "kb", "1"))["ContentLength"]
        print(f"\n## a version of {args.chunks} chunks with {args.dimensions}-float vectors")
        print(
            f"publish (one PUT): {publish_s * 1000:.0f} ms;"
            f" file {size} bytes ({size / args.chunks:.0f} per chunk)"
        )
        now = [0.0]
        reader = s3_knowledge_index(BUCKET, client=s3, cache_dir=f"{tmp}/reader")
        reader._now = lambda: now[0]  # type: ignore[attr-defined]
        calls.clear()
        started = time.perf_counter()
        await reader.search_words("acme", "kb", "1", "w10 w20", 5)
        cold = time.perf_counter() - started
        print(f"cold search (GET + open + search): {cold * 1000:.0f} ms, requests {dict(calls)}")
        calls.clear()
        words, near = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            await reader.search_words("acme", "kb", "1", "w4990", 10)
            words.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await reader.search_vectors("acme", "kb", "1", unit(rng, args.dimensions), 10)
            near.append((time.perf_counter() - t) * 1000)
        print(
            f"warm: search_words rare word {statistics.median(words):.1f} ms, "
            f"search_vectors k=10 {statistics.median(near):.1f} ms (medians of {args.runs}), "
            f"requests {dict(calls) or 0}"
        )
        now[0] = 3600.0
        started = time.perf_counter()
        await reader.search_words("acme", "kb", "1", "w4990", 10)
        print(
            f"after the freshness window: {(time.perf_counter() - started) * 1000:.1f} ms,"
            f" requests {dict(calls)}"
        )


def index(s3: Any, cache_dir: str, compact_after: int | None) -> S3KnowledgeIndex:
    made = s3_knowledge_index(BUCKET, client=s3, cache_dir=cache_dir)
    assert isinstance(made, S3KnowledgeIndex)
    made.compact_after = compact_after
    return made


def _key(owner: str, resource: str, version: str) -> str:
    from agentvm.adapters.aws.s3_knowledge import object_key

    return object_key(owner, resource, version)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--chunks-per-document", type=int, default=10)
    parser.add_argument("--writers", type=int, default=1, help="functions uploading in turn")
    parser.add_argument(
        "--compaction",
        choices=("off", "on", "both"),
        default="both",
        help="the draft's segments merged past COMPACT_AFTER (off: as before compaction); both: side by side",
    )
    parser.add_argument("--cold-runs", type=int, default=5, help="new functions' first searches (median)")
    parser.add_argument("--phases", action="store_true", help="where a cold read's time goes")
    parser.add_argument("--skip-version", action="store_true", help="the uploads only")
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
