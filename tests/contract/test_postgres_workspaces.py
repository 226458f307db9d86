"""Sandbox workspaces on a cluster: two nodes' ``ReplicatedSandbox`` (each its own local
workspaces) on one PostgreSQL store (``adapters/postgres/workspaces.py``). What one node's file
tool or job wrote, the other reads on the container's next turn; what a job removed is gone there;
a link a job made is never stored; a tenant purge removes the stored files; a workspace over the
quota is refused before anything is written."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.postgres.workspaces import PostgresWorkspaces
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.adapters.sandbox.replicated import ReplicatedSandbox
from agentvm.adapters.sandbox.workspace_files import WorkspaceTooLarge
from agentvm.ports import SandboxLimits
from tests.postgres_server import fresh_database

pytestmark = pytest.mark.postgres

LIMITS = SandboxLimits(wall_s=20)


def _nodes(database, tmp_path, *, max_bytes: int = 1 << 20) -> tuple[ReplicatedSandbox, ReplicatedSandbox]:
    store = PostgresWorkspaces(database, max_bytes=max_bytes)
    return (
        ReplicatedSandbox(LocalSandbox(tmp_path / "node-a", isolate=False), store),
        ReplicatedSandbox(LocalSandbox(tmp_path / "node-b", isolate=False), store),
    )


async def test_what_one_node_writes_the_other_reads_and_a_removal_follows(tmp_path):
    async with fresh_database() as database:
        a, b = _nodes(database, tmp_path)
        await a.write("t1", "c1", "notes/plan.md", b"step one\n")
        assert await b.read("t1", "c1", "notes/plan.md", max_bytes=100) == b"step one\n"
        # a job on node B changes one file, adds one and removes the first
        run = await b.run(
            "t1", "c1", ["sh", "-c", "echo two >> notes/plan.md; cp notes/plan.md done.md; rm notes/plan.md"],
            stdin=None, limits=LIMITS,
        )  # fmt: skip
        assert run.exit_code == 0, run
        assert await a.read("t1", "c1", "done.md", max_bytes=100) == b"step one\ntwo\n"
        with pytest.raises(ValueError):
            await a.read("t1", "c1", "notes/plan.md", max_bytes=100)
        assert [e.path for e in await a.list("t1", "c1", "") if e.kind == "file"] == ["done.md"]
        # another container, and another tenant's container of the same name, see nothing of it
        assert await b.list("t1", "c2", "") == []
        assert await b.list("t2", "c1", "") == []


async def test_a_link_a_job_makes_is_never_stored(tmp_path):
    async with fresh_database() as database:
        a, b = _nodes(database, tmp_path)
        secret = tmp_path / "server-secret"
        secret.write_text("do not copy")
        run = await a.run(
            "t1", "c1", ["sh", "-c", f"ln -s {secret} leak; ln -s /etc/passwd passwd; echo ok > ok.txt"],
            stdin=None, limits=LIMITS,
        )  # fmt: skip
        assert run.exit_code == 0, run
        entries = {e.path for e in await b.list("t1", "c1", "")}
        assert entries == {"ok.txt"}  # the links stayed on node A's disk, never in the store
        async with database.connection() as conn:
            cur = await conn.execute("SELECT string_agg(encode(body, 'escape'), '') FROM workspace_files")
            stored = (await cur.fetchone())[0] or ""
        assert "do not copy" not in stored and "root:" not in stored


async def test_when_two_nodes_write_at_once_each_file_keeps_the_last_write_and_both_see_both(tmp_path):
    async with fresh_database() as database:
        a, b = _nodes(database, tmp_path)
        await a.write("t1", "c1", "base.txt", b"base")
        assert await b.read("t1", "c1", "base.txt", max_bytes=10) == b"base"
        await asyncio.gather(a.write("t1", "c1", "from-a.txt", b"a"), b.write("t1", "c1", "from-b.txt", b"b"))
        for node in (a, b):  # whichever wrote second pulls again before its next use
            files = {e.path for e in await node.list("t1", "c1", "")}
            assert files == {"base.txt", "from-a.txt", "from-b.txt"}


async def test_a_tenant_purge_removes_its_stored_workspaces_only(tmp_path):
    async with fresh_database() as database:
        a, b = _nodes(database, tmp_path)
        await a.write("t1", "c1", "x.txt", b"x")
        await a.write("t2", "c1", "y.txt", b"y")
        store = PostgresWorkspaces(database)
        assert await store.purge_tenant("t1") == 1
        assert await store.version("t1", "c1") == 0
        assert await b.list("t1", "c1", "") == []
        assert await b.read("t2", "c1", "y.txt", max_bytes=10) == b"y"


async def test_a_workspace_over_the_quota_is_refused_before_anything_is_written(tmp_path):
    async with fresh_database() as database:
        big, _ = _nodes(database, tmp_path, max_bytes=1 << 20)
        await big.write("t1", "c1", "big.bin", b"x" * 2000)
        _, small = _nodes(database, tmp_path / "small", max_bytes=1000)
        with pytest.raises(WorkspaceTooLarge, match="2000 bytes"):
            await small.read("t1", "c1", "big.bin", max_bytes=10)
