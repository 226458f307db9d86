"""The ``KnowledgeIndex`` port on the AWS host: one SQLite index file per version, kept in S3.

**Why this and not S3 Vectors (or OpenSearch).** Knowledge is searched by words *and* vectors
(``resources/hybrid.py``). S3 Vectors stores vectors only: words would still need a full-text
index next to it, and the fusion would cross two services per search. OpenSearch Serverless does
both but bills its capacity units whether anyone searches or not (hundreds of dollars a month).
The local host's index (SQLite FTS5 for words, sqlite-vec for vectors:
``adapters/local/sqlite/knowledge.py``) needs no server at all, so here it is the same index, in a
file per ``(tenant, resource, version)``: ``knowledge/<hash of tenant>/<hash of
resource>/<version>.sqlite`` in the stack's bucket for large things (``WorkspaceBucket``, passed as
``AVM_KNOWLEDGE_BUCKET``). Everything inside a file is the local index's own code (the host hands
it in as ``open_index``): the same tokenizer, the same BM25 weights, the same vectors; this module
moves the files.

**Reads.** A file is downloaded into ``cache_dir`` (the Lambda's ``/tmp``) and kept there with its
ETag, opened once. A published version's file is immutable: it is asked for again only after
``revalidate_s`` (a version deleted and published again under the same number is seen that late;
the GET then is conditional, ``If-None-Match``: 304 and no bytes when unchanged). A draft's is
revalidated on every read. The cache is bounded (``cache_bytes``): the least recently used files
go first.

**Drafts are segments.** A draft changes one upload at a time, so it is not one file: each
``add_chunks`` to the draft writes its chunks (and vectors, if any) as one small object of its own,
a *segment* (``<resource prefix>/draft/<time in ns>-<random>.json.gz``: gzipped JSON of the call's
arguments), created with ``If-None-Match: *`` (a new name, so no writer ever waits for another).
A read of the draft LISTs its segments (one request: keys and ETags, in key order, so in time
order) and applies the ones it has not seen to a local index file (``cache_dir``), in order, with
the local index's ``add_chunks``: the same replacement rule as one file (a later chunk of the same
document and ordinal wins). Segments already applied are not fetched again; when the listing is no
longer the applied one plus new segments at its end (another function removed a document), the
local file is rebuilt from the segments (their payloads are cached too, so that costs LIST and
local work, not downloads). ``drop_document`` deletes the segments holding only that document and
rewrites (``If-Match`` their ETag) the few that hold others too; the local file drops it in place.
So n uploads move O(n) bytes into S3 (each its own segment), not O(n^2) (BENCHMARKS.md: 50 uploads),
until compaction (below) sends them again now and then.
Segment names carry the writer's clock: two functions whose clocks disagree may apply two writes of
the same document and ordinal in the other order, which only matters when the same document is
uploaded twice at the same moment (the upload that lands last may then not be the one kept).
A draft written before segments (one ``draft.sqlite`` file) is turned into the first segment the
first time it is read (while a deployment replaces the functions, an upload by an old function
landing between that read and the file's deletion would be lost: upload after the deployment).

**Compaction.** A cold function reads every segment (BENCHMARKS.md: 500 uploads, 500 GETs). So a
read that finds more than ``COMPACT_AFTER`` (32) segments, once its local file is built, merges
them: one segment holding their chunks as applying them in order leaves them (a later chunk of
the same document and ordinal replaces the earlier, so each chunk once), named after the last of
them plus ``~`` and a generation (right after it in key order: a segment written later still
applies after it), PUT with ``If-None-Match: *`` (two functions merging the same segments: one
wins, the other stops). It then LISTs again: if one of the merged segments changed or went
meanwhile (a document dropped), it deletes the merged one again and stops (nothing resurrected);
otherwise it deletes the merged ones (``DeleteObjects``, one request). Only listed segments are
merged and deleted, so an upload landing meanwhile (a new key) stays, applied after the merge.
The merged segment names the segments (key and ETag) it holds: a warm function whose local file
holds exactly those first takes it as is (one GET, nothing indexed again); a merged segment
rewritten by a drop names none, and such a function builds its file again.
A reader listing between the merged PUT and the deletes (or after a compaction failed there)
applies both the merged segment and the ones it merges: by the replacement rule the result is the
same chunks, each once, so it only fetches more; the next compaction merges them again. The
remaining window, a drop that listed before the merged PUT and writes after that check, is
closed by the drop: after its writes it LISTs again and removes the document from any merged
segment it had not seen (``If-Match``), until none is new (a merged segment written later
merges the one it fixed, and is then fixed too). This also drops the document from an upload of
the same document made during the drop and merged meanwhile: two such calls at once have no
order anyway. What is left: a drop whose function dies between its writes and that LIST (or
that gives up after ``attempts`` merges in a row, answering 409) can leave the document in a
merged segment written meanwhile; dropping it again removes it. The deletes are not
conditional: S3's conditional ``DeleteObject`` (``If-Match``; moto has it, not the per-key ETag of
``DeleteObjects``) would only turn the rewritten-meanwhile case into a leftover segment, which the
drop's check handles anyway. Segments with vectors mixed with words-only ones are not merged (drafts are words
only: ``resources/uploads.py``). Merging re-sends the draft's bytes at most once per
``COMPACT_AFTER`` uploads: O(n^2 / 32) bytes in all (BENCHMARKS.md, 500 uploads: 12.2 MiB PUT for
a 1.5 MB draft, 8x, against ~1,700x for one file rewritten each time), and a cold read then GETs
at most 33 segments, 3 rounds (500 uploads: 20 GETs, not 500; its first search 0.5 s, not 2.6).
The read that compacts pays for it (a PUT of the draft, a LIST, a ``DeleteObjects``): on the
upload path that is an upload's limits read, once every 32 uploads.

Publishing is unchanged: the draft's chunks (read through its local file) become a version's
single file, written once (``If-None-Match: *``).

**Published versions** change only by being written once or deleted: ``add_chunks`` to a version
other than the draft is a read-modify-write of its file (``If-Match`` on the ETag it was read at,
``If-None-Match: *`` for a new file; a writer that lost a race gets 412, 404 or 409 and does it all
again, ``attempts`` times at most); deleting a version is one DELETE; deleting a tenant lists its
prefix and deletes it in batches of 1,000.

**Costs** (S3 Standard, us-east-1; measured in ``docs/resources.md``): a file holds about 1.6-2.0
KB per chunk of ~800 bytes with words only, ~8 KB with 1,536-dimension vectors: per million chunks
~2 GB or ~8 GB, $0.05 or $0.19 a month. Publishing is one PUT per version, a search of a version at
most one GET (none while the cached file is fresh). An upload is one LIST (its limits read the
draft) and one PUT of its own segment; a draft's search one LIST, plus one GET per segment this
function has not seen (a cold function fetches them all, 16 at a time: at most ``COMPACT_AFTER`` +
1 of them), and past ``COMPACT_AFTER`` segments one PUT, one LIST and one ``DeleteObjects`` more.
What compaction does not remove: a cold function still indexes every chunk of the draft into its
``/tmp`` file (one FTS5 rebuild: about 0.05 ms a chunk here, BENCHMARKS.md), the larger part of a
cold read on real S3 once the GETs are few. A search needs the
version's whole file in ``/tmp``: this suits versions up to some hundreds of thousands of chunks,
not millions.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import secrets
import shutil
import tempfile
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

from agentvm.errors import Conflict
from agentvm.ports import DRAFT, KnowledgeChunk, vector_dimensions

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from agentvm.ports import KnowledgeDocument, KnowledgeHit, KnowledgeIndex

    class IndexFile(KnowledgeIndex, Protocol):
        """A knowledge index on one local file (the local host's ``SqliteKnowledgeIndex``)."""

        def close(self) -> None: ...


T = TypeVar("T")
log = logging.getLogger("agentvm.knowledge")

PREFIX = "knowledge/"
SUFFIX = ".sqlite"
SEGMENT_SUFFIX = ".json.gz"
FETCHES = 16  # segments downloaded at once when a draft's local file is (re)built
# A read that finds more segments than this merges them into one (see "Compaction"): a cold read of
# 32 is two rounds of FETCHES parallel GETs, so past it each further round is a compaction's worth
# of saved round trips for every later cold function, while the merged PUT re-sends the draft's
# bytes once per COMPACT_AFTER uploads at most (O(n^2 / 32) bytes, not O(n^2)).
COMPACT_AFTER = 32
MERGED = "~"  # a merged segment's key: the last segment it replaces, then this and a generation
_RETRY_CODES = frozenset(
    {"PreconditionFailed", "412", "NoSuchKey", "404", "ConditionalRequestConflict", "409"}
)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def owner_prefix(owner: str) -> str:
    return f"{PREFIX}{_digest(owner)}/"


def resource_prefix(owner: str, resource: str) -> str:
    return f"{owner_prefix(owner)}{_digest(resource)}/"


def object_key(owner: str, resource: str, version: str) -> str:
    """Where a version's index file lives (hashes: no tenant id or resource name in a key)."""
    return f"{resource_prefix(owner, resource)}{quote(version, safe='')}{SUFFIX}"


def draft_prefix(owner: str, resource: str) -> str:
    """Where a draft's segments live."""
    return f"{resource_prefix(owner, resource)}{DRAFT}/"


def segment_key(owner: str, resource: str) -> str:
    """A new segment's key: the writer's clock first (segments list in time order), then randomness."""
    return f"{draft_prefix(owner, resource)}{time.time_ns():020d}-{secrets.token_hex(6)}{SEGMENT_SUFFIX}"


def merged_key(last: str) -> str:
    """The key of the segment merging segments up to ``last``: right after ``last`` in key order
    (``~`` sorts after ``.`` and every character of a segment's name), so a segment written later
    still applies after it; the same for two functions merging the same segments (one PUT wins)."""
    base = last.removesuffix(SEGMENT_SUFFIX)
    stem, _, generation = base.partition(MERGED)
    return f"{stem}{MERGED}{int(generation or 0) + 1:06d}{SEGMENT_SUFFIX}"


def is_merged(key: str) -> bool:
    return MERGED in key.rsplit("/", 1)[-1]


def merge_segments(
    segments: Sequence[tuple[list[KnowledgeChunk], list[list[float]] | None]],
) -> tuple[list[KnowledgeChunk], list[list[float]] | None] | None:
    """Segments' chunks as one segment's, applying them in order: a later chunk of the same
    document and ordinal replaces an earlier one and takes its place at the end, as in the index.
    None when some carry vectors and others not (such segments are left as they are)."""
    if len({vectors is None for _, vectors in segments}) > 1:
        return None
    last: dict[tuple[str, int], tuple[KnowledgeChunk, list[float] | None]] = {}
    for chunks, vectors in segments:
        for n, c in enumerate(chunks):
            last.pop((c.document_id, c.ordinal), None)
            last[(c.document_id, c.ordinal)] = (c, None if vectors is None else vectors[n])
    kept = list(last.values())
    with_vectors = segments and segments[0][1] is not None
    return [c for c, _ in kept], ([v for _, v in kept if v is not None] if with_vectors else None)


def encode_segment(
    chunks: Sequence[KnowledgeChunk],
    vectors: Sequence[Sequence[float]] | None,
    replaces: Sequence[tuple[str, str]] = (),
) -> bytes:
    """One ``add_chunks`` call's arguments as a segment's bytes; a merged segment's also name the
    segments (key, ETag) it holds exactly (a segment rewritten later no longer does: it names none)."""
    rows = [[c.document_id, c.title, c.heading_path, c.location, c.ordinal, c.text] for c in chunks]
    payload: dict[str, Any] = {
        "chunks": rows,
        "vectors": None if vectors is None else [list(v) for v in vectors],
    }
    if replaces:
        payload["replaces"] = [list(segment) for segment in replaces]
    return gzip.compress(json.dumps(payload, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def replaced_segments(data: bytes) -> list[tuple[str, str]]:
    """The segments (key, ETag) a merged segment holds exactly, as written by the merge ([]: none)."""
    return [(key, etag) for key, etag in json.loads(gzip.decompress(data)).get("replaces", [])]


def decode_segment(data: bytes) -> tuple[list[KnowledgeChunk], list[list[float]] | None]:
    payload = json.loads(gzip.decompress(data))
    return [KnowledgeChunk.from_row(row) for row in payload["chunks"]], payload["vectors"]


@dataclass
class _Cached:
    """A file in the local cache: its path, the ETag it was downloaded (or written) at, and the
    index opened on it (for reads)."""

    path: Path
    etag: str
    checked_at: float
    size: int
    index: IndexFile | None = None
    # a draft's local file only: the segments applied to it, in order ((key, ETag)), and the
    # documents each holds
    applied: list[tuple[str, str]] = field(default_factory=list)
    documents: dict[str, frozenset[str]] = field(default_factory=dict)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None


class S3KnowledgeIndex:
    """``agentvm.ports.KnowledgeIndex``: the index files of ``open_index`` kept in ``bucket``."""

    def __init__(
        self,
        bucket: str,
        open_index: Callable[[Path], IndexFile],
        *,
        client: Any | None = None,
        cache_dir: str | Path | None = None,
        cache_bytes: int = 256 * 1024 * 1024,
        revalidate_s: float = 60.0,
        attempts: int = 8,
        compact_after: int | None = COMPACT_AFTER,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self._s3 = client
        self.bucket = bucket
        self._open_index = open_index
        self._base = Path(cache_dir or tempfile.gettempdir())
        self._dir: Path | None = None  # this index's own directory in it, made on first use
        self.cache_bytes = cache_bytes
        self.revalidate_s = revalidate_s
        self.attempts = attempts
        self.compact_after = compact_after  # None: never compact (benchmarks compare)
        self._now = now
        self._cache: OrderedDict[str, _Cached] = OrderedDict()  # least recently used first
        self._lock = asyncio.Lock()  # one change of the cache at a time (a Lambda serves one event)
        self._files = 0

    # -- the port ---------------------------------------------------------------------------------

    async def add_chunks(
        self,
        owner: str,
        resource: str,
        version: str,
        chunks: Sequence[KnowledgeChunk],
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        if version == DRAFT:
            vector_dimensions(chunks, vectors)  # refused here, not by the next reader
            if chunks:
                await self._add_segment(owner, resource, encode_segment(chunks, vectors))
            return

        async def add(index: IndexFile) -> None:
            await index.add_chunks(owner, resource, version, chunks, vectors)

        await self._change(object_key(owner, resource, version), add, missing=None)

    async def search_words(
        self, owner: str, resource: str, version: str, query: str, limit: int
    ) -> list[KnowledgeHit]:
        index = await self._reading(owner, resource, version)
        return [] if index is None else await index.search_words(owner, resource, version, query, limit)

    async def search_vectors(
        self, owner: str, resource: str, version: str, vector: Sequence[float], limit: int
    ) -> list[KnowledgeHit]:
        index = await self._reading(owner, resource, version)
        return [] if index is None else await index.search_vectors(owner, resource, version, vector, limit)

    async def documents(self, owner: str, resource: str, version: str) -> list[KnowledgeDocument]:
        index = await self._reading(owner, resource, version)
        return [] if index is None else await index.documents(owner, resource, version)

    async def chunks(self, owner: str, resource: str, version: str) -> list[KnowledgeChunk]:
        index = await self._reading(owner, resource, version)
        return [] if index is None else await index.chunks(owner, resource, version)

    async def drop_document(self, owner: str, resource: str, version: str, document_id: str) -> int:
        if version == DRAFT:
            return await self._drop_from_draft(owner, resource, document_id)

        async def drop(index: IndexFile) -> int:
            return await index.drop_document(owner, resource, version, document_id)

        # no file, nothing to drop: no write
        return await self._change(object_key(owner, resource, version), drop, missing=0)

    async def drop_version(self, owner: str, resource: str, version: str) -> None:
        key = object_key(owner, resource, version)
        async with self._lock:
            await asyncio.to_thread(self._s3.delete_object, Bucket=self.bucket, Key=key)
            self._forget(key)
            if version == DRAFT:
                prefix = draft_prefix(owner, resource)
                await asyncio.to_thread(self._delete_prefix, prefix)
                self._forget(_view_key(owner, resource))
                for cached in [k for k in self._cache if k.startswith(prefix)]:
                    self._forget(cached)

    async def drop_owner(self, owner: str) -> None:
        prefix = owner_prefix(owner)
        async with self._lock:
            await asyncio.to_thread(self._delete_prefix, prefix)
            for key in [k for k in self._cache if k.startswith(prefix)]:
                self._forget(key)

    async def stats(self, owner: str, resource: str) -> tuple[int, int, int]:
        prefix = resource_prefix(owner, resource)
        keys = await asyncio.to_thread(self._list, prefix)
        draft = object_key(owner, resource, DRAFT)
        documents = chunks = size = 0
        indexes = [
            await self._reading_key(key, revalidate=True)
            for key in keys
            if "/" not in key[len(prefix) :] and key.endswith(SUFFIX) and key != draft
        ]
        if any(k == draft or k.startswith(draft_prefix(owner, resource)) for k in keys):
            indexes.append(await self._reading(owner, resource, DRAFT))
        for index in indexes:
            if index is not None:
                d, c, b = await index.stats(owner, resource)
                documents, chunks, size = documents + d, chunks + c, size + b
        return documents, chunks, size

    # -- reads ----------------------------------------------------------------------------------

    async def _reading(self, owner: str, resource: str, version: str) -> IndexFile | None:
        if version == DRAFT:
            async with self._lock:
                view = await self._draft_view(owner, resource)
                return None if view is None else view.index
        return await self._reading_key(object_key(owner, resource, version), revalidate=False)

    async def _reading_key(self, key: str, *, revalidate: bool) -> IndexFile | None:
        """The index on the key's current file (downloaded or revalidated as needed); None: no file."""
        async with self._lock:
            entry = await asyncio.to_thread(self._fresh, key, revalidate)
            if entry is None:
                return None
            if entry.index is None:
                entry.index = self._open_index(entry.path)
            return entry.index

    def _fresh(self, key: str, revalidate: bool) -> _Cached | None:
        """The cached file of ``key``, fetched again when missing, stale or ``revalidate``."""
        entry = self._cache.get(key)
        now = self._now()
        if entry is not None:
            self._cache.move_to_end(key)
            if not revalidate and now - entry.checked_at < self.revalidate_s:
                return entry
        from botocore.exceptions import ClientError

        extra = {"IfNoneMatch": entry.etag} if entry is not None else {}
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=key, **extra)
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 304 and entry is not None:
                entry.checked_at = now
                return entry
            if status == 404 or e.response.get("Error", {}).get("Code") in {"NoSuchKey", "404"}:
                self._forget(key)
                return None
            raise
        path = self._new_path()
        with path.open("wb") as out:
            shutil.copyfileobj(answer["Body"], out, 1 << 20)
        return self._install(key, path, answer["ETag"])

    # -- writes ---------------------------------------------------------------------------------

    async def _change(self, key: str, change: Callable[[IndexFile], Awaitable[T]], *, missing: T | None) -> T:
        """Read-modify-write of one file, conditional on the ETag it was read at; again on a lost
        race. ``missing``: what a change of a file that does not exist answers, without writing
        one (None: the change makes the file)."""
        for attempt in range(self.attempts):
            async with self._lock:
                entry = await asyncio.to_thread(self._fresh, key, True)
                if entry is None and missing is not None:
                    return missing
                work = self._new_path()
                if entry is not None:
                    await asyncio.to_thread(shutil.copyfile, entry.path, work)
                index = self._open_index(work)
                try:
                    result = await change(index)
                finally:
                    index.close()  # the log is checkpointed into the file, which is then whole
                condition = {"IfMatch": entry.etag} if entry is not None else {"IfNoneMatch": "*"}
                etag = await asyncio.to_thread(self._put, key, work, condition)
                if etag is not None:
                    self._install(key, work, etag)
                    return result
                _remove(work)
                self._forget(key)
            log.info("knowledge index file changed meanwhile: writing again", extra={"attempt": attempt + 1})
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
        raise Conflict("the knowledge resource is being changed by someone else; try again")

    def _put(self, key: str, path: Path, condition: dict[str, str]) -> str | None:
        """Upload ``path`` as ``key`` if ``condition`` still holds: its new ETag, else None."""
        from botocore.exceptions import ClientError

        try:
            with path.open("rb") as body:
                answer = self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, **condition)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in _RETRY_CODES:
                return None
            raise
        return str(answer["ETag"])

    # -- drafts: segments -----------------------------------------------------------------------

    async def _add_segment(self, owner: str, resource: str, data: bytes) -> None:
        """Write one new segment (a new name each time: a name taken, which takes two writers in
        the same nanosecond with the same random suffix, is simply drawn again)."""
        for _ in range(self.attempts):
            key = segment_key(owner, resource)
            etag = await asyncio.to_thread(self._put_bytes, key, data, {"IfNoneMatch": "*"})
            if etag is not None:
                async with self._lock:  # kept: this function's next read of the draft fetches nothing
                    path = self._new_path(SEGMENT_SUFFIX)
                    path.write_bytes(data)
                    self._install(key, path, etag, keep=_view_key(owner, resource))
                return
        raise Conflict("could not name a new segment of the draft; try again")

    async def _draft_view(self, owner: str, resource: str) -> _Cached | None:
        """The draft's local file, brought up to its segments' listing (under ``_lock``); None when
        the draft has no segment. A segment removed or rewritten between the LIST and its GET (412
        or 404) makes it list again."""
        from botocore.exceptions import ClientError

        for attempt in range(self.attempts):
            try:
                return await self._draft_view_once(owner, resource)
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") not in _RETRY_CODES:
                    raise
            log.info(
                "knowledge draft segment changed while read: listing again", extra={"attempt": attempt + 1}
            )
        raise Conflict("the knowledge resource is being changed by someone else; try again")

    async def _draft_view_once(self, owner: str, resource: str) -> _Cached | None:
        view_key = _view_key(owner, resource)
        listing = await asyncio.to_thread(self._list_segments, owner, resource)
        legacy = object_key(owner, resource, DRAFT)
        if listing and listing[0][0] == legacy:
            await self._convert_legacy(owner, resource)
            listing = await asyncio.to_thread(self._list_segments, owner, resource)
        if not listing:
            self._forget(view_key)
            return None
        view = self._cache.get(view_key)
        if view is not None and (
            view.applied == listing[: len(view.applied)]
            or await asyncio.to_thread(self._adopt_merge, view, listing)  # merged by another function
        ):
            self._cache.move_to_end(view_key)
            new = listing[len(view.applied) :]
        else:  # first read, or the segments changed under it: built again from all of them
            self._forget(view_key)
            path = self._new_path()
            view = _Cached(path, "", self._now(), 0, index=self._open_index(path))
            self._cache[view_key] = view
            new = listing
        if new:
            payloads = await asyncio.to_thread(self._fetch_segments, new, view_key)
            assert view.index is not None
            words_only: list[KnowledgeChunk] = []  # consecutive segments without vectors: one call
            for (key, etag), data in zip(new, payloads, strict=True):
                chunks, vectors = decode_segment(data)
                if vectors is None:
                    words_only += chunks  # in order: a later chunk still replaces an earlier one
                else:
                    if words_only:
                        await view.index.add_chunks(owner, resource, DRAFT, words_only, None)
                        words_only = []
                    await view.index.add_chunks(owner, resource, DRAFT, chunks, vectors)
                view.applied.append((key, etag))
                view.documents[key] = frozenset(c.document_id for c in chunks)
            if words_only:
                await view.index.add_chunks(owner, resource, DRAFT, words_only, None)
            view.size = _size_of(view.path)
            self._evict(keep={view_key})
        if self.compact_after is not None and len(view.applied) > self.compact_after:
            await self._compact(owner, resource, view)
        return view

    def _adopt_merge(self, view: _Cached, listing: list[tuple[str, str]]) -> bool:
        """When another function merged segments this local file holds (the listing starts with a
        merged segment naming exactly the first of ``view.applied``, then the rest of them), the file
        already holds what it does: the merged segment replaces them in ``view.applied``, nothing is
        indexed again. False: it does not (the file is built again)."""
        head = listing[0]
        if not is_merged(head[0]) or head in view.applied:
            return False
        (data,) = self._fetch_segments([head], _view_key_of(head[0]))
        replaced = replaced_segments(data)
        rest = view.applied[len(replaced) :]
        if not replaced or view.applied[: len(replaced)] != replaced or listing[1 : 1 + len(rest)] != rest:
            return False
        documents = frozenset(d for k, _ in replaced for d in view.documents.get(k, ()))
        for key, _ in replaced:
            view.documents.pop(key, None)
            self._forget(key)
        view.applied = [head, *rest]
        view.documents[head[0]] = documents
        return True

    async def _compact(self, owner: str, resource: str, view: _Cached) -> None:
        """Merge the segments ``view`` applied into one (its local file, already built, is what the
        merged segment holds); a compaction that fails leaves the draft as it was, readable."""
        from botocore.exceptions import BotoCoreError, ClientError

        segments = list(view.applied)
        try:
            done = await asyncio.to_thread(self._merge, owner, resource, segments, _view_key(owner, resource))
        except ClientError as e:  # the read itself succeeded: a later one compacts
            code = e.response.get("Error", {}).get("Code")
            (log.info if code in _RETRY_CODES else log.warning)("knowledge draft not compacted: %s", code)
            return
        except BotoCoreError as e:
            log.warning("knowledge draft not compacted: %s", type(e).__name__)
            return
        if done is None:
            return
        key, etag = done
        documents = frozenset(d for k, _ in segments for d in view.documents.get(k, ()))
        for old, _ in segments:
            view.documents.pop(old, None)
            self._forget(old)
        view.applied = [(key, etag)]
        view.documents[key] = documents

    def _merge(
        self, owner: str, resource: str, segments: list[tuple[str, str]], keep: str
    ) -> tuple[str, str] | None:
        """Write ``segments``' chunks as one merged segment (``If-None-Match: *``), check by a new
        LIST that none of them changed meanwhile (else delete it again: a document dropped
        meanwhile is not resurrected), then delete them. The merged segment and its ETag; None
        when another function merged them first, or one changed."""
        decoded = [decode_segment(data) for data in self._fetch_segments(segments, keep)]
        merged = merge_segments(decoded)
        if merged is None:
            return None
        key = merged_key(segments[-1][0])
        data = encode_segment(*merged, replaces=segments)
        etag = self._put_bytes(key, data, {"IfNoneMatch": "*"})
        if etag is None:
            return None
        current = dict(self._list_segments(owner, resource))
        if any(current.get(k) != e for k, e in segments):
            self._s3.delete_object(Bucket=self.bucket, Key=key)
            log.info("knowledge draft changed while being compacted: compaction undone")
            return None
        self._delete_keys([k for k, _ in segments])
        path = self._new_path(SEGMENT_SUFFIX)
        path.write_bytes(data)
        self._install(key, path, etag, keep=keep)
        log.info("knowledge draft compacted", extra={"segments": len(segments), "bytes": len(data)})
        return key, etag

    async def _drop_from_draft(self, owner: str, resource: str, document_id: str) -> int:
        """Delete the segments holding only ``document_id``, rewrite those holding others too
        (``If-Match``: a segment changed meanwhile is read again, all of it from the listing on);
        the bytes of its text in the draft."""
        for attempt in range(self.attempts):
            async with self._lock:
                view = await self._draft_view(owner, resource)
                if view is None or view.index is None:
                    return 0
                found = [
                    d
                    for d in await view.index.documents(owner, resource, DRAFT)
                    if d.document_id == document_id
                ]
                if not found:
                    return 0  # nothing to drop: no write
                seen = set(view.applied)
                holding = [(k, e) for k, e in view.applied if document_id in view.documents.get(k, ())]
                changed = await asyncio.to_thread(
                    self._drop_in_segments, holding, document_id, view.documents, _view_key(owner, resource)
                )
                if changed is not None:
                    await view.index.drop_document(owner, resource, DRAFT, document_id)
                    applied: list[tuple[str, str]] = []
                    for key, etag in view.applied:
                        if changed.get(key) == "":  # deleted
                            view.documents.pop(key, None)
                            self._forget(key)
                            continue
                        if key in changed:  # rewritten without the document
                            view.documents[key] -= {document_id}
                        applied.append((key, changed.get(key, etag)))
                    view.applied = applied
                    view.size = _size_of(view.path)
                    await asyncio.to_thread(
                        self._drop_in_new_merged, owner, resource, document_id, seen | set(applied)
                    )
                    return found[0].bytes
                self._forget(_view_key(owner, resource))
            log.info(
                "knowledge draft segment changed meanwhile: dropping again", extra={"attempt": attempt + 1}
            )
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
        raise Conflict("the knowledge resource is being changed by someone else; try again")

    def _drop_in_segments(
        self,
        holding: list[tuple[str, str]],
        document_id: str,
        documents: dict[str, frozenset[str]],
        keep: str,
    ) -> dict[str, str] | None:
        """Each segment of ``holding`` without ``document_id``: {key: its new ETag, or "" when
        deleted}; None when one was rewritten by someone else meanwhile (nothing more changed)."""
        from botocore.exceptions import ClientError

        changed: dict[str, str] = {}
        for key, etag in holding:
            if documents[key] == {document_id}:
                self._s3.delete_object(Bucket=self.bucket, Key=key)
                changed[key] = ""
                continue
            try:
                (data,) = self._fetch_segments([(key, etag)], keep)
            except ClientError as e:  # rewritten or deleted since the listing: read it all again
                if e.response.get("Error", {}).get("Code") in _RETRY_CODES:
                    return None
                raise
            chunks, vectors = decode_segment(data)
            kept = [n for n, c in enumerate(chunks) if c.document_id != document_id]
            body = encode_segment(
                [chunks[n] for n in kept], None if vectors is None else [vectors[n] for n in kept]
            )
            new_etag = self._put_bytes(key, body, {"IfMatch": etag})
            if new_etag is None:
                return None
            changed[key] = new_etag
            self._forget(key)
        return changed

    def _drop_in_new_merged(
        self, owner: str, resource: str, document_id: str, seen: set[tuple[str, str]]
    ) -> None:
        """After a drop: a merged segment this drop did not see (written by a compaction that read
        a segment before the drop changed it) may hold the document again; list until none does.
        (A merging function checks its segments after its PUT and undoes it if one changed, so
        only a drop landing between that check and its deletes needs this; the drop's next LIST
        comes after the merged PUT, so it finds it, or the segment merging it again.)"""
        from botocore.exceptions import ClientError

        keep = _view_key(owner, resource)
        for _ in range(self.attempts):
            new = [s for s in self._list_segments(owner, resource) if is_merged(s[0]) and s not in seen]
            if not new:
                return
            for key, etag in new:
                try:
                    (data,) = self._fetch_segments([(key, etag)], keep)
                except ClientError as e:  # gone or changed since the listing: the next one says
                    if e.response.get("Error", {}).get("Code") in _RETRY_CODES:
                        continue
                    raise
                chunks, vectors = decode_segment(data)
                kept = [n for n, c in enumerate(chunks) if c.document_id != document_id]
                if len(kept) < len(chunks):
                    body = encode_segment(
                        [chunks[n] for n in kept], None if vectors is None else [vectors[n] for n in kept]
                    )
                    new_etag = self._put_bytes(key, body, {"IfMatch": etag})
                    self._forget(key)
                    if new_etag is None:
                        continue
                    etag = new_etag
                    log.info("knowledge document dropped from a segment merged meanwhile")
                seen.add((key, etag))
        raise Conflict("the knowledge resource is being changed by someone else; try again")

    async def _convert_legacy(self, owner: str, resource: str) -> None:
        """A draft written as one file (before segments) becomes the first segment (its chunks,
        words only: drafts are not embedded), then the file goes. Two functions converting at once
        write the same name: the second's ``If-None-Match`` fails and the first's is kept."""
        legacy = object_key(owner, resource, DRAFT)
        entry = await asyncio.to_thread(self._fresh, legacy, True)
        if entry is not None:
            index = self._open_index(entry.path)
            try:
                chunks = await index.chunks(owner, resource, DRAFT)
            finally:
                index.close()
            if chunks:
                key = f"{draft_prefix(owner, resource)}{0:020d}-legacy{SEGMENT_SUFFIX}"
                await asyncio.to_thread(
                    self._put_bytes, key, encode_segment(chunks, None), {"IfNoneMatch": "*"}
                )
        await asyncio.to_thread(self._s3.delete_object, Bucket=self.bucket, Key=legacy)
        self._forget(legacy)

    def _list_segments(self, owner: str, resource: str) -> list[tuple[str, str]]:
        """The draft's segments (and a file from before segments, first), in key order, with ETags."""
        legacy = object_key(owner, resource, DRAFT)
        prefix = draft_prefix(owner, resource)
        found: list[tuple[str, str]] = []
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix[:-1])
        for page in pages:
            found += [
                (o["Key"], o["ETag"])
                for o in page.get("Contents", [])
                if o["Key"] == legacy or (o["Key"].startswith(prefix) and o["Key"].endswith(SEGMENT_SUFFIX))
            ]
        return sorted(found)

    def _fetch_segments(self, segments: list[tuple[str, str]], keep: str) -> list[bytes]:
        """The payloads of ``segments``: from the cache when it holds that ETag, else GET (FETCHES
        at a time) and kept."""

        def one(segment: tuple[str, str]) -> tuple[bytes, Path | None]:
            key, etag = segment
            entry = self._cache.get(key)
            if entry is not None and entry.etag == etag:
                return entry.path.read_bytes(), None
            body = self._s3.get_object(Bucket=self.bucket, Key=key, IfMatch=etag)["Body"].read()
            path = self._new_path(SEGMENT_SUFFIX)
            path.write_bytes(body)
            return body, path

        with ThreadPoolExecutor(max_workers=FETCHES) as pool:
            futures = [pool.submit(one, segment) for segment in segments]
        fetched: list[bytes] = []
        failed: BaseException | None = None
        for (key, etag), future in zip(segments, futures, strict=True):
            if future.exception() is not None:  # the others are kept (no file left behind), then raised
                failed = failed or future.exception()
                continue
            data, path = future.result()
            fetched.append(data)
            if path is not None:
                self._install(key, path, etag, keep=keep)
            elif key in self._cache:
                self._cache.move_to_end(key)
        if failed is not None:
            raise failed
        return fetched

    def _put_bytes(self, key: str, data: bytes, condition: dict[str, str]) -> str | None:
        """PUT ``data`` as ``key`` if ``condition`` still holds: its ETag, else None."""
        from botocore.exceptions import ClientError

        try:
            answer = self._s3.put_object(Bucket=self.bucket, Key=key, Body=data, **condition)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in _RETRY_CODES:
                return None
            raise
        return str(answer["ETag"])

    # -- the local cache ------------------------------------------------------------------------

    def _new_path(self, suffix: str = SUFFIX) -> Path:
        if self._dir is None:  # its own: two indexes in one process never share a file name
            self._base.mkdir(parents=True, exist_ok=True)
            self._dir = Path(tempfile.mkdtemp(prefix="avm-knowledge-", dir=self._base))
        self._files += 1
        return self._dir / f"{self._files}{suffix}"

    def _install(self, key: str, path: Path, etag: str, keep: str | None = None) -> _Cached:
        self._forget(key)
        entry = _Cached(path, etag, self._now(), path.stat().st_size)
        self._cache[key] = entry
        self._evict(keep={key} if keep is None else {key, keep})
        return entry

    def _forget(self, key: str) -> None:
        entry = self._cache.pop(key, None)
        if entry is not None:
            entry.close()
            _remove(entry.path)

    def _evict(self, keep: set[str]) -> None:
        """Drop the least recently used files until the cache holds ``cache_bytes`` at most (the
        files in use stay, however large)."""
        total = sum(e.size for e in self._cache.values())
        for key in list(self._cache):
            if total <= self.cache_bytes:
                break
            if key not in keep:
                total -= self._cache[key].size
                self._forget(key)

    @property
    def cached_bytes(self) -> int:
        return sum(e.size for e in self._cache.values())

    # -- listing and deleting -------------------------------------------------------------------

    def _list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    def _delete_prefix(self, prefix: str) -> None:
        self._delete_keys(self._list(prefix))

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            self._s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def close(self) -> None:
        for key in list(self._cache):
            self._forget(key)


_VIEW = "#view"  # a draft's local file, in the cache: its resource prefix and this


def _view_key(owner: str, resource: str) -> str:
    return f"{draft_prefix(owner, resource)}{_VIEW}"


def _view_key_of(segment: str) -> str:
    """The local file's cache key of the draft ``segment`` belongs to."""
    return f"{segment.rsplit('/', 1)[0]}/{_VIEW}"


def _size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _remove(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


__all__ = [
    "COMPACT_AFTER",
    "PREFIX",
    "S3KnowledgeIndex",
    "decode_segment",
    "draft_prefix",
    "encode_segment",
    "is_merged",
    "merge_segments",
    "merged_key",
    "replaced_segments",
    "object_key",
    "owner_prefix",
    "resource_prefix",
    "segment_key",
]
