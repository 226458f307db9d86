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

**Writes.** A draft changes by read-modify-write of its whole file: the current file (revalidated),
changed in a copy through the local index, then ``PutObject`` with ``If-Match`` on the ETag it was
read at (``If-None-Match: *`` for a new file). A writer that lost a race gets 412 (404 when the
file went meanwhile, 409 for a conditional write S3 was already serving) and does it all again
from the new file, ``attempts`` times at most: two Lambdas uploading to one draft never lose a
write. Publishing writes a new version's file once (one ``add_chunks``); deleting a version is one
DELETE; deleting a tenant lists its prefix and deletes it in batches of 1,000.

**Costs** (S3 Standard, us-east-1; measured in ``docs/resources.md``): a file holds about 1.6-2.0
KB per chunk of ~800 bytes with words only, ~8 KB with 1,536-dimension vectors: per million chunks
~2 GB or ~8 GB, $0.05 or $0.19 a month. Publishing is one PUT per version, a search at most one
GET (none while the cached file is fresh), an upload one conditional GET (304 when the cache is
current) and one PUT. But uploads re-send the draft's whole file, so n uploads one by one to one
draft move O(n^2) bytes; and a search needs the version's whole file in ``/tmp``: this suits
versions up to some hundreds of thousands of chunks, not millions.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

from agentvm.errors import Conflict

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from agentvm.ports import KnowledgeChunk, KnowledgeDocument, KnowledgeHit, KnowledgeIndex

    class IndexFile(KnowledgeIndex, Protocol):
        """A knowledge index on one local file (the local host's ``SqliteKnowledgeIndex``)."""

        def close(self) -> None: ...


T = TypeVar("T")
log = logging.getLogger("agentvm.knowledge")

PREFIX = "knowledge/"
SUFFIX = ".sqlite"
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


@dataclass
class _Cached:
    """A file in the local cache: its path, the ETag it was downloaded (or written) at, and the
    index opened on it (for reads)."""

    path: Path
    etag: str
    checked_at: float
    size: int
    index: IndexFile | None = None

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
        async def drop(index: IndexFile) -> int:
            return await index.drop_document(owner, resource, version, document_id)

        # no file, nothing to drop: no write
        return await self._change(object_key(owner, resource, version), drop, missing=0)

    async def drop_version(self, owner: str, resource: str, version: str) -> None:
        key = object_key(owner, resource, version)
        async with self._lock:
            await asyncio.to_thread(self._s3.delete_object, Bucket=self.bucket, Key=key)
            self._forget(key)

    async def drop_owner(self, owner: str) -> None:
        prefix = owner_prefix(owner)
        async with self._lock:
            await asyncio.to_thread(self._delete_prefix, prefix)
            for key in [k for k in self._cache if k.startswith(prefix)]:
                self._forget(key)

    async def stats(self, owner: str, resource: str) -> tuple[int, int, int]:
        keys = await asyncio.to_thread(self._list, resource_prefix(owner, resource))
        documents = chunks = size = 0
        for key in keys:
            index = await self._reading_key(key, revalidate=True)
            if index is not None:
                d, c, b = await index.stats(owner, resource)
                documents, chunks, size = documents + d, chunks + c, size + b
        return documents, chunks, size

    # -- reads ----------------------------------------------------------------------------------

    async def _reading(self, owner: str, resource: str, version: str) -> IndexFile | None:
        from agentvm.ports import DRAFT

        return await self._reading_key(object_key(owner, resource, version), revalidate=version == DRAFT)

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

    # -- the local cache ------------------------------------------------------------------------

    def _new_path(self) -> Path:
        if self._dir is None:  # its own: two indexes in one process never share a file name
            self._base.mkdir(parents=True, exist_ok=True)
            self._dir = Path(tempfile.mkdtemp(prefix="avm-knowledge-", dir=self._base))
        self._files += 1
        return self._dir / f"{self._files}{SUFFIX}"

    def _install(self, key: str, path: Path, etag: str) -> _Cached:
        self._forget(key)
        entry = _Cached(path, etag, self._now(), path.stat().st_size)
        self._cache[key] = entry
        self._evict(keep=key)
        return entry

    def _forget(self, key: str) -> None:
        entry = self._cache.pop(key, None)
        if entry is not None:
            entry.close()
            _remove(entry.path)

    def _evict(self, keep: str) -> None:
        """Drop the least recently used files until the cache holds ``cache_bytes`` at most (the
        file just used stays, however large)."""
        total = sum(e.size for e in self._cache.values())
        for key in list(self._cache):
            if total <= self.cache_bytes:
                break
            if key != keep:
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
        keys = self._list(prefix)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            self._s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def close(self) -> None:
        for key in list(self._cache):
            self._forget(key)


def _remove(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


__all__ = ["PREFIX", "S3KnowledgeIndex", "object_key", "owner_prefix", "resource_prefix"]
