"""``/v1/containers/{id}/workspace``: a container's sandbox files, listed and read over HTTP by
its tenant's admin key; paths cannot leave the workspace."""

from __future__ import annotations

import httpx
import pytest

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.api.app import create_app
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
async def http(harness, tmp_path):
    secure(harness, ManualClock())
    harness.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    token = await new_key(harness.rt, "acme", "admin")
    c = await harness.client("acme")
    await c.request("container_create", containerId="user-alice")
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
        yield client


async def test_a_containers_workspace_files_are_listed_and_read(http, harness):
    await harness.rt.sandbox.write("acme", "user-alice", "src/hello.py", b"print(6*7)\n")
    root = (await http.get("/v1/containers/user-alice/workspace")).json()
    assert root["entries"] == [{"path": "src", "kind": "dir", "size": 0}]
    src = (await http.get("/v1/containers/user-alice/workspace", params={"path": "src"})).json()
    assert src["entries"] == [{"path": "src/hello.py", "kind": "file", "size": 11}]
    file = (
        await http.get("/v1/containers/user-alice/workspace/file", params={"path": "src/hello.py"})
    ).json()
    assert file == {"path": "src/hello.py", "content": "print(6*7)\n", "truncated": False}


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "missing.txt"])
async def test_paths_outside_the_workspace_or_missing_files_are_a_400(http, path):
    r = await http.get("/v1/containers/user-alice/workspace/file", params={"path": path})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"


async def test_an_unknown_container_is_a_404_and_a_server_without_sandbox_says_so(http, harness):
    r = await http.get("/v1/containers/user-nobody/workspace")
    assert r.status_code == 404 and "Container not found" in r.json()["error"]["message"]
    harness.rt.sandbox = None
    r = await http.get("/v1/containers/user-alice/workspace")
    assert r.status_code == 404 and "no sandbox" in r.json()["error"]["message"]
