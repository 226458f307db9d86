"""The HTTP API's view of a workspace on AWS (``S3WorkspaceView``, moto) answers like the local
sandbox for the same files: the same listings, the same reads, the same refusals."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces, S3WorkspaceView
from agentvm.api.app import create_app

pytestmark = pytest.mark.aws

BUCKET = "agentvm-workspaces"
FILES = {
    "a.txt": b"alpha",
    "src/app.py": b"print(42)\n",
    "src/lib/util.py": b"x = 1\n",
    "notes/readme.md": b"# hi",
}


@pytest.fixture
async def both(tmp_path):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        local = LocalSandbox(tmp_path / "ws", isolate=False)
        for path, data in FILES.items():
            await local.write("acme", "alice", path, data)
        await S3Workspaces(BUCKET, client=s3).push("acme", "alice", local.workspace("acme", "alice"), {})
        yield local, S3WorkspaceView(BUCKET, client=s3)


@pytest.mark.parametrize("path", [".", "", "/workspace", "src", "src/lib", "/workspace/notes", "src/../src"])
async def test_listings_match_the_local_sandbox(both, path):
    local, view = both
    assert await view.list("acme", "alice", path) == await local.list("acme", "alice", path)


@pytest.mark.parametrize("path", ["a.txt", "src/app.py", "/workspace/src/lib/util.py", "notes/../a.txt"])
async def test_reads_match_the_local_sandbox(both, path):
    local, view = both
    assert await view.read("acme", "alice", path, max_bytes=3) == await local.read(
        "acme", "alice", path, max_bytes=3
    )
    assert await view.read("acme", "alice", path, max_bytes=1 << 20) == await local.read(
        "acme", "alice", path, max_bytes=1 << 20
    )


@pytest.mark.parametrize(
    ("op", "path"),
    [
        ("read", "missing.txt"),
        ("read", "src"),
        ("read", "../x"),
        ("read", "/etc/passwd"),
        ("list", "missing"),
        ("list", "../.."),
        ("list", "/etc"),
    ],
)
async def test_bad_paths_are_refused_like_the_local_sandbox(both, op, path):
    local, view = both
    for box in (local, view):
        with pytest.raises(ValueError):
            if op == "read":
                await box.read("acme", "alice", path, max_bytes=100)
            else:
                await box.list("acme", "alice", path)


async def test_another_tenant_sees_an_empty_workspace_for_the_same_container_id(both):
    _, view = both
    assert await view.list("other", "alice", ".") == []
    with pytest.raises(ValueError):
        await view.read("other", "alice", "a.txt", max_bytes=100)


async def test_the_http_routes_serve_the_bucket(both, tmp_path):
    import httpx

    from tests.harness import Harness

    _, view = both
    h = Harness(tmp_path)
    h.rt.sandbox = view
    c = await h.client("acme")
    await c.request("container_create", containerId="alice")
    transport = httpx.ASGITransport(app=create_app(h.rt, open_tenant="acme"))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        listed = (await http.get("/v1/containers/alice/workspace?path=src")).json()
        read = (await http.get("/v1/containers/alice/workspace/file?path=src/app.py")).json()
    assert listed["entries"] == [
        {"path": "src/app.py", "kind": "file", "size": 10},
        {"path": "src/lib", "kind": "dir", "size": 0},
    ]
    assert read == {"path": "src/app.py", "content": "print(42)\n", "truncated": False}
