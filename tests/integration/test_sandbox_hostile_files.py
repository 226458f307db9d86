"""The sandbox's file tools against a hostile model (issue 24): every file tool against links,
hard links, ``..``, absolute paths, FIFOs, sockets, devices, a huge file and 100k entries, and the
symlink race a job runs next to concurrent tool calls of the same message. Each ends with a clean
tool error (the caller's path, no host path, no traceback) or a bounded answer, and nothing
outside the workspace is read or written.

Both ways of resolving a path run: ``openat2`` (where the kernel has it) and the ``O_NOFOLLOW``
walk. The race runs the swapping job isolated (bubblewrap) where it works, else as a plain process.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time

import httpx
import pytest

from agentvm.adapters.sandbox import workspace_files as files
from agentvm.adapters.sandbox.process import LocalSandbox, bubblewrap
from agentvm.agent.tools.sandbox import MAX_READ_BYTES, SPECS, SandboxTool
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.api.app import create_app
from agentvm.llm import ToolCall
from agentvm.ports import SandboxLimits, SandboxRun, WorkspaceQuota
from tests.security_harness import ManualClock, new_key, secure

SECRET = b"HOST SECRET: the server's auth_secret"
LIMITS = SandboxLimits(wall_s=30, cpu_s=30, memory_mb=512, output_bytes=4096)


@pytest.fixture(params=["openat2", "walk"])
def resolution(request, monkeypatch):
    if request.param == "openat2" and files._syscall() is None:
        pytest.skip("openat2 is not available on this kernel: the walk is what runs here")
    monkeypatch.setattr(files, "use_openat2", request.param == "openat2")
    return request.param


@pytest.fixture
def host(tmp_path):
    """A directory outside every workspace, with a secret in it (the data dir's stand-in)."""
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    return outside


@pytest.fixture
def sandbox(tmp_path):
    return LocalSandbox(tmp_path / "workspaces", isolate=bubblewrap() is not None)


def toolbox(sandbox: LocalSandbox, container: str = "alice") -> Toolbox:
    tools = [SandboxTool(spec, sandbox, "acme", container, LIMITS) for spec in SPECS.values()]
    return Toolbox(tools)


async def call(box: Toolbox, name: str, **arguments):
    run = await box.run(ToolCall(f"call-{name}", name, arguments))
    return run.result


def assert_clean_error(result, tmp_path, *words):
    assert result.is_error, result.content
    assert str(tmp_path) not in result.content and "Traceback" not in result.content
    for word in words:
        assert word in result.content, result.content


# -- the matrix: every file tool x every hazard ---------------------------------------------------


def _link(ws, host):
    os.symlink(host / "secret.txt", ws / "hazard")


def _dir_link(ws, host):
    os.symlink(host, ws / "hazard")


def _hard_link(ws, host):
    os.link(host / "secret.txt", ws / "hazard")


def _fifo(ws, host):
    os.mkfifo(ws / "hazard")


def _socket(ws, host):
    here = os.getcwd()
    os.chdir(ws)  # a socket's path must be short: bind it by its name
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind("hazard")
        s.close()
    finally:
        os.chdir(here)


def _device(ws, host):
    try:
        os.mknod(ws / "hazard", 0o666 | 0o020000, os.makedev(1, 3))  # a char device like /dev/null
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD, which this test's user lacks")


HAZARDS = {
    "symlink": (_link, "symbolic link"),
    "dir-symlink": (_dir_link, "symbolic link"),
    "hard-link": (_hard_link, "hard link"),
    "fifo": (_fifo, "not a regular file"),
    "socket": (_socket, "not a regular file"),
    "device": (_device, "not a regular file"),
}


@pytest.mark.parametrize("hazard", HAZARDS)
@pytest.mark.parametrize("tool", ["read", "write", "edit"])
async def test_a_file_tool_refuses_anything_but_a_lone_regular_file(
    tool, hazard, sandbox, host, tmp_path, resolution
):
    make, words = HAZARDS[hazard]
    make(sandbox.workspace("acme", "alice"), host)
    box = toolbox(sandbox)
    arguments = {"path": "hazard"}
    if tool == "write":
        arguments["content"] = "overwritten"
    if tool == "edit":
        arguments |= {"old": "HOST", "new": "MINE"}
    if hazard == "dir-symlink":
        arguments["path"] = "hazard/secret.txt"
    started = time.monotonic()
    result = await call(box, tool, **arguments)
    assert time.monotonic() - started < 5  # a FIFO never blocks the call
    assert_clean_error(result, tmp_path, words)
    assert SECRET.decode() not in result.content
    assert (host / "secret.txt").read_bytes() == SECRET
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize("hazard", HAZARDS)
async def test_ls_shows_a_hazard_without_following_it(hazard, sandbox, host, tmp_path, resolution):
    make, _ = HAZARDS[hazard]
    make(sandbox.workspace("acme", "alice"), host)
    box = toolbox(sandbox)
    listed = await call(box, "ls")
    assert not listed.is_error and "hazard" in listed.content and "secret" not in listed.content
    inside = await call(box, "ls", path="hazard")
    assert_clean_error(inside, tmp_path)
    assert "secret.txt" not in inside.content


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "/workspace/../../etc", "x\0y"])
@pytest.mark.parametrize("tool", ["read", "write", "edit", "ls"])
async def test_paths_that_leave_the_workspace_are_refused_by_every_tool(tool, path, sandbox, tmp_path):
    box = toolbox(sandbox)
    arguments = {"path": path} | ({"content": "x"} if tool == "write" else {})
    if tool == "edit":
        arguments |= {"old": "a", "new": "b"}
    assert_clean_error(await call(box, tool, **arguments), tmp_path)


async def test_a_huge_file_is_read_cut_and_not_edited(sandbox, tmp_path, resolution):
    ws = sandbox.workspace("acme", "alice")
    with open(ws / "huge.bin", "wb") as f:
        f.truncate(2 * 1024**3)  # 2 GB, sparse
    box = toolbox(sandbox)
    read = await call(box, "read", path="huge.bin")
    assert not read.is_error and "truncated" in read.content and len(read.content) < MAX_READ_BYTES
    edit = await call(box, "edit", path="huge.bin", old="\0", new="x")
    assert_clean_error(edit, tmp_path, "too large")
    assert os.stat(ws / "huge.bin").st_size == 2 * 1024**3


async def test_a_hundred_thousand_entries_give_bounded_answers_and_a_quota_error(tmp_path, resolution):
    sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False, quota=WorkspaceQuota(max_entries=20_000))
    many = sandbox.workspace("acme", "alice") / "many"
    many.mkdir()
    for i in range(100_000):
        os.close(os.open(many / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    box = toolbox(sandbox)
    listed = await call(box, "ls", path="many")
    assert not listed.is_error and len(listed.content.splitlines()) == files.MAX_LISTED
    wrote = await call(box, "write", path="more.txt", content="one more")
    assert_clean_error(wrote, tmp_path, "quota")
    assert not (many.parent / "more.txt").exists()


async def test_writes_stop_at_the_workspace_quota_in_bytes(tmp_path):
    sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False, quota=WorkspaceQuota(max_bytes=1000))
    box = toolbox(sandbox)
    assert not (await call(box, "write", path="a.txt", content="x" * 600)).is_error
    refused = await call(box, "write", path="b.txt", content="y" * 600)
    assert_clean_error(refused, tmp_path, "quota")


# -- the race: a job swapping links next to concurrent calls of the same message ------------------

SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + float(sys.argv[1])
pairs = []
for n, target in enumerate(sys.argv[2:]):  # per host directory: d<n>/ and f<n>, and links to it
    os.makedirs(f"d{n}", exist_ok=True)
    open(f"d{n}/secret.txt", "w").write("decoy")
    open(f"f{n}", "w").write("decoy")
    os.symlink(target, f"d{n}link")
    os.symlink(target + "/secret.txt", f"f{n}link")
    pairs += [(f"d{n}".encode(), f"d{n}link".encode()), (f"f{n}".encode(), f"f{n}link".encode())]
swaps = 0
open("swapping", "w").close()
while time.time() < end and not os.path.exists("stop"):  # the test writes "stop" when it has enough
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)  # RENAME_EXCHANGE: both names swapped at once
    swaps += 1
print("swaps", swaps)
"""


async def swapping(sandbox: LocalSandbox, container: str, *targets) -> asyncio.Task:
    """A job swapping links to ``targets`` in and out (at most for 30 s, until ``stop_swapping``),
    once it swaps. The tests count what they did, not how long: a busy machine does less a second."""
    argv = ["python3", "-c", SWAPPER, "30", *map(str, targets)]
    job = asyncio.create_task(sandbox.run("acme", container, argv, stdin=None, limits=LIMITS))
    started = sandbox.workspace("acme", container) / "swapping"
    deadline = time.monotonic() + 20
    while not started.exists():
        assert not job.done() and time.monotonic() < deadline, "the swapping job never started"
        await asyncio.sleep(0.02)
    return job


async def stop_swapping(sandbox: LocalSandbox, container: str, job: asyncio.Task) -> SandboxRun:
    await sandbox.write("acme", container, "stop", b"")
    return await job


async def test_concurrent_file_calls_never_cross_a_link_a_running_job_swaps_in(
    sandbox, host, tmp_path, resolution
):
    box = toolbox(sandbox)
    job = await swapping(sandbox, "alice", host)
    reads = writes = 0
    leaked: list[str] = []
    at_least = time.monotonic() + 2.2  # and at least 400 reads, however slow the machine
    while reads < 400 or time.monotonic() < at_least:  # one model message at a time: 40 reads, 20 writes
        calls = [call(box, "read", path="d0/secret.txt") for _ in range(20)]
        calls += [call(box, "read", path="f0") for _ in range(20)]
        calls += [call(box, "write", path=f"d0/new-{writes + i}.txt", content="mine") for i in range(20)]
        calls += [call(box, "edit", path="f0", old="decoy", new="decoy")]
        results = await asyncio.gather(*calls)
        reads, writes = reads + 40, writes + 20
        leaked += [r.content for r in results if "HOST SECRET" in r.content]
        for r in results:
            assert str(tmp_path) not in r.content and "Traceback" not in r.content
    ran = await stop_swapping(sandbox, "alice", job)
    assert ran.exit_code == 0 and int(ran.output.split()[-1]) > 100, ran.output  # it did swap
    assert reads >= 400 and leaked == []
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]
    assert (host / "secret.txt").read_bytes() == SECRET


async def test_the_http_workspace_route_never_reads_through_a_link_the_tenants_job_swaps_in(
    harness, tmp_path, resolution
):
    """A tenant admin reading its own workspace over HTTP while its own job swaps links to another
    tenant's workspace and to the data dir gets decoys or 400s: never their bytes, never a 500."""
    secure(harness, ManualClock())
    sandbox = LocalSandbox(tmp_path / "workspaces", isolate=bubblewrap() is not None)
    harness.rt.sandbox = sandbox
    token = await new_key(harness.rt, "acme", "admin")
    await (await harness.client("acme")).request("container_create", containerId="alice")
    await sandbox.write("globex", "bob", "secret.txt", b"GLOBEX PRIVATE")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "secret.txt").write_bytes(SECRET)
    job = await swapping(sandbox, "alice", sandbox.workspace("globex", "bob"), data_dir)
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    headers = {"Authorization": f"Bearer {token}"}
    statuses: list[int] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        deadline = time.monotonic() + 60  # the key's rate limit may answer some with 429
        at_least = time.monotonic() + 2.2  # and at least 300 answers, however slow the machine
        while len([s for s in statuses if s in (200, 400)]) < 300 or time.monotonic() < at_least:
            assert time.monotonic() < deadline, sorted(set(statuses))
            paths = ["d0/secret.txt", "f0", "d1/secret.txt", "f1"] * 10
            answers = await asyncio.gather(
                *[http.get("/v1/containers/alice/workspace/file", params={"path": p}) for p in paths],
                http.get("/v1/containers/alice/workspace", params={"path": "d1"}),
            )
            for answer in answers:
                statuses.append(answer.status_code)
                assert b"GLOBEX" not in answer.content and b"HOST SECRET" not in answer.content
                assert str(tmp_path).encode() not in answer.content
    ran = await stop_swapping(sandbox, "alice", job)
    assert int(ran.output.split()[-1]) > 100, ran.output
    answered = [s for s in statuses if s in (200, 400)]  # the rest: 429, the key's rate limit
    assert len(answered) >= 300 and set(statuses) <= {200, 400, 429}, sorted(set(statuses))
    assert sorted(p.name for p in data_dir.iterdir()) == ["secret.txt"]


async def test_a_job_that_fills_its_workspace_is_stopped_at_the_quota(tmp_path):
    quota = WorkspaceQuota(max_bytes=20 * 1024 * 1024, max_entries=1000)
    sandbox = LocalSandbox(tmp_path / "workspaces", isolate=bubblewrap() is not None, quota=quota)
    fill = "import os\nfor i in range(10_000):\n    open(f'f{i}', 'wb').write(os.urandom(1 << 20))\n"
    run = await sandbox.run("acme", "alice", ["python3", "-c", fill], stdin=None, limits=LIMITS)
    assert run.stopped_by == "workspace" and run.exit_code is None
    held = await sandbox.scan("acme", "alice")
    assert held.bytes < 10_000 * (1 << 20) and len(held.files) < 10_000
    refused = await call(toolbox(sandbox), "write", path="more.txt", content="x")
    assert_clean_error(refused, tmp_path, "quota")
    # A job may still clean up a workspace past its quota (it is not stopped for being there).
    cleaned = await sandbox.run(
        "acme", "alice", ["sh", "-c", "rm -f f*; echo cleaned"], stdin=None, limits=LIMITS
    )
    assert cleaned.stopped_by is None and "cleaned" in cleaned.output
    assert not (await call(toolbox(sandbox), "write", path="more.txt", content="x")).is_error
