"""Containers' workspaces in S3, for the sandbox worker: pulled into a local directory before a
job, pushed back after it.

One prefix per workspace, ``workspaces/<hash of tenant and container>/`` (the directory name the
local sandbox uses), one object per file. A pull is one LIST and one GET per file; a push uploads
the files that are new or changed (by MD5, which S3 keeps as the ETag of a single-part PUT) and
deletes the objects of files the job removed (DELETE is free). Plain GetObject/PutObject, not
boto3's transfer manager: one request per file (no HEAD first), and no threads of its own (a job's
files are at most 64 MB, one PUT each). Both go through ``adapters/sandbox/workspace_files.py``:
only lone regular files beneath the directory are pushed, never through a link (say, to
``/proc/self/environ``, even one a leftover process swaps in during the push), so a job cannot
smuggle a file of the worker into storage; a pull writes beneath the fresh directory only.
A workspace past ``max_bytes`` is refused at the pull, before anything is downloaded.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from typing import TYPE_CHECKING, Any, BinaryIO

from agentvm.adapters.sandbox.workspace_files import (
    PUSH_MAX_ENTRIES,
    STORED_MAX_BYTES,
    WorkspaceError,
    WorkspaceTooLarge,
    create_file,
    open_file,
    relative_parts,
    scan,
)
from agentvm.ports import WorkspaceEntry, WorkspaceScan
from agentvm.records import workspace_digest

if TYPE_CHECKING:
    from pathlib import Path

PREFIX = "workspaces/"


class S3Workspaces:
    def __init__(self, bucket: str, *, client: Any | None = None, max_bytes: int = STORED_MAX_BYTES) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self._s3 = client
        self.bucket = bucket
        self.max_bytes = max_bytes

    @staticmethod
    def prefix(tenant_id: str, container_id: str) -> str:
        return f"{PREFIX}{workspace_digest(tenant_id, container_id)}/"

    async def pull(self, tenant_id: str, container_id: str, dest: Path) -> dict[str, str]:
        """Download the workspace into ``dest``; returns ``{relative path: etag}`` of what it held."""
        return await asyncio.to_thread(self._pull, self.prefix(tenant_id, container_id), dest)

    async def push(self, tenant_id: str, container_id: str, src: Path, before: dict[str, str]) -> int:
        """Store ``src`` as the workspace (changed files up, removed ones deleted); returns the
        number of objects written or deleted."""
        return await asyncio.to_thread(self._push, self.prefix(tenant_id, container_id), src, before)

    def _objects(self, prefix: str) -> list[dict[str, Any]]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [obj for page in pages for obj in page.get("Contents", [])]

    def _pull(self, prefix: str, dest: Path) -> dict[str, str]:
        objects = self._objects(prefix)
        total = sum(obj["Size"] for obj in objects)
        if total > self.max_bytes:
            raise WorkspaceTooLarge(f"the workspace holds {total} bytes (at most {self.max_bytes})")
        dest.mkdir(parents=True, exist_ok=True, mode=0o700)
        held: dict[str, str] = {}
        for obj in objects:
            rel = obj["Key"][len(prefix) :]
            try:
                ours = rel != "" and "/".join(relative_parts(rel)) == rel
            except WorkspaceError:
                ours = False
            if not ours:
                continue  # not a file of this workspace (we never write such keys)
            body = self._s3.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"]
            with create_file(dest, rel) as f:
                shutil.copyfileobj(body, f, 1 << 20)
            held[rel] = obj["ETag"].strip('"')
        return held

    def _push(self, prefix: str, src: Path, before: dict[str, str]) -> int:
        """Through ``workspace_files``: a process the job left behind may still be swapping
        links in ``src``, and a link followed here would upload a file of the worker."""
        held = scan(src, max_entries=PUSH_MAX_ENTRIES, max_seconds=60)
        now: dict[str, str] = {}
        writes = 0
        for rel in held.files:
            try:
                with open_file(src, rel) as f:
                    digest = _md5(f)
                    now[rel] = digest
                    if before.get(rel) != digest:
                        f.seek(0)
                        self._s3.put_object(Bucket=self.bucket, Key=prefix + rel, Body=f)
                        writes += 1
            except WorkspaceError:
                continue  # no longer a lone regular file: not stored (as if removed)
        # A cut scan has not seen every file: deleting what it missed would lose files.
        seen = set(before) if held.complete else set(before) & set(held.files)
        gone = seen - set(now)
        for rel in gone:
            self._s3.delete_object(Bucket=self.bucket, Key=prefix + rel)
            writes += 1
        return writes


class S3WorkspaceView:
    """The ``Sandbox`` port's read side on the workspace bucket, for the HTTP API on AWS (list and
    read a container's workspace). Runs no jobs and writes nothing: jobs run on the sandbox worker.

    Paths follow the local sandbox's rules: relative or under ``/workspace``, never absolute or
    leaving the workspace (``..``), so one workspace's routes never reach another's prefix.
    """

    isolated = False

    def __init__(self, bucket: str, *, client: Any | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self._s3 = client
        self.bucket = bucket

    def _key(self, tenant_id: str, container_id: str, path: str) -> tuple[str, str]:
        """(the workspace prefix, the path below it: "" for the root)."""
        return S3Workspaces.prefix(tenant_id, container_id), "/".join(relative_parts(path))

    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes:
        prefix, rel = self._key(tenant_id, container_id, path)
        if not rel:
            raise ValueError(f"{path!r} is not a file in the workspace")

        def get() -> bytes:
            try:
                got = self._s3.get_object(
                    Bucket=self.bucket, Key=prefix + rel, Range=f"bytes=0-{max_bytes - 1}"
                )
            except self._s3.exceptions.NoSuchKey:
                raise ValueError(f"{path!r} is not a file in the workspace") from None
            return got["Body"].read(max_bytes)

        return await asyncio.to_thread(get)

    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]:
        prefix, rel = self._key(tenant_id, container_id, path)
        below = prefix + (rel + "/" if rel else "")

        def listing() -> list[WorkspaceEntry]:
            page = self._s3.list_objects_v2(Bucket=self.bucket, Prefix=below, Delimiter="/", MaxKeys=1000)
            dirs = [
                WorkspaceEntry(p["Prefix"][len(prefix) :].rstrip("/"), "dir", 0)
                for p in page.get("CommonPrefixes", [])
            ]
            files = [
                WorkspaceEntry(o["Key"][len(prefix) :], "file", o["Size"]) for o in page.get("Contents", [])
            ]
            if rel and not dirs and not files:
                raise ValueError(f"{path!r} is not a directory in the workspace")
            return sorted([*dirs, *files], key=lambda e: e.path)

        return await asyncio.to_thread(listing)

    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None:
        raise RuntimeError("the HTTP API's view of a workspace is read-only; jobs run on the sandbox worker")

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sandbox jobs run on the sandbox worker, not here")

    async def scan(self, tenant_id: str, container_id: str) -> WorkspaceScan:
        raise RuntimeError("the HTTP API's view of a workspace runs no tools; jobs run on the sandbox worker")


def _md5(f: BinaryIO) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    for chunk in iter(lambda: f.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


__all__ = ["S3WorkspaceView", "S3Workspaces"]
