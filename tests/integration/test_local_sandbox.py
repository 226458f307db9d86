"""The local sandbox (``adapters/sandbox/process.py``): a persistent workspace per container, jobs
stopped at their limits, and no way out of the workspace or into another tenant's.

Isolation needs bubblewrap (``./dev`` installs Debian's ``bubblewrap``); where it cannot run, the
isolation tests skip with the reason, and the limits are still tested on plain processes.
"""

from __future__ import annotations

import socket

import pytest

from agentvm.adapters.sandbox.process import LocalSandbox, bubblewrap
from agentvm.client import AgentVMClient
from agentvm.ports import SandboxLimits
from tests.integration.avm_process import avm_serve, free_port

NO_BWRAP = (
    "bubblewrap (bwrap) is not installed or cannot create namespaces on this machine: "
    "sandbox isolation is NOT tested here (./dev installs Debian's 'bubblewrap')"
)
needs_bwrap = pytest.mark.skipif(bubblewrap() is None, reason=NO_BWRAP)
LIMITS = SandboxLimits(wall_s=20, cpu_s=10, memory_mb=256, output_bytes=4096, file_mb=1)


@pytest.fixture(params=["isolated", "plain"])
def sandbox(request, tmp_path):
    if request.param == "isolated" and bubblewrap() is None:
        pytest.skip(NO_BWRAP)
    box = LocalSandbox(tmp_path / "workspaces", isolate=request.param == "isolated")
    assert box.isolated == (request.param == "isolated")
    return box


async def test_a_written_file_runs_and_is_still_there_for_the_next_job(sandbox, tmp_path):
    await sandbox.write("acme", "alice", "hello.py", b"print(6 * 7)\n")
    run = await sandbox.run("acme", "alice", ["python3", "hello.py"], stdin=None, limits=LIMITS)
    assert (run.exit_code, run.output, run.stopped_by) == (0, "42\n", None)
    again = LocalSandbox(tmp_path / "workspaces", isolate=sandbox.isolated)  # a restarted server
    assert await again.read("acme", "alice", "/workspace/hello.py", max_bytes=100) == b"print(6 * 7)\n"
    listed = await again.list("acme", "alice", ".")
    assert [(e.path, e.kind, e.size) for e in listed] == [("hello.py", "file", 13)]


async def test_a_job_that_never_ends_is_stopped_at_its_wall_time(sandbox):
    limits = SandboxLimits(wall_s=1, cpu_s=30, memory_mb=256, output_bytes=4096)
    run = await sandbox.run("acme", "alice", ["sleep", "60"], stdin=None, limits=limits)
    assert run.stopped_by == "wall_time" and run.exit_code is None


async def test_a_job_that_spins_is_stopped_at_its_cpu_time(sandbox):
    limits = SandboxLimits(wall_s=30, cpu_s=1, memory_mb=256, output_bytes=4096)
    run = await sandbox.run("acme", "alice", ["python3", "-c", "while True: pass"], stdin=None, limits=limits)
    assert run.stopped_by == "cpu_time"


async def test_a_job_that_allocates_too_much_is_stopped_by_its_memory_limit(sandbox):
    code = "x = bytearray(1024 * 1024 * 1024)\nprint('allocated')"
    run = await sandbox.run("acme", "alice", ["python3", "-"], stdin=code, limits=LIMITS)
    assert run.stopped_by == "memory" and "allocated" not in run.output


async def test_a_job_that_prints_without_end_is_cut_at_its_output_limit(sandbox):
    run = await sandbox.run("acme", "alice", ["yes", "flood"], stdin=None, limits=LIMITS)
    assert run.stopped_by == "output" and run.truncated and len(run.output) == LIMITS.output_bytes


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "/workspace/../../etc/passwd", "a/../../x"])
async def test_paths_outside_the_workspace_are_refused(sandbox, path):
    with pytest.raises(ValueError, match="workspace"):
        await sandbox.read("acme", "alice", path, max_bytes=100)
    with pytest.raises(ValueError, match="workspace"):
        await sandbox.write("acme", "alice", path, b"x")


@needs_bwrap
async def test_a_job_sees_its_own_workspace_only_and_no_network(tmp_path):
    sandbox = LocalSandbox(tmp_path / "workspaces")
    await sandbox.write("globex", "bob", "secret.txt", b"globex's secret")
    theirs = sandbox.workspace("globex", "bob")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    script = f"""
import os, socket
print(sorted(os.listdir("/")))
for path in ({str(theirs / "secret.txt")!r}, {str(tmp_path)!r}, "/root", "/work"):
    print(path, os.path.exists(path))
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("network: reached")
except OSError as exc:
    print("network: refused", type(exc).__name__)
"""
    run = await sandbox.run("acme", "alice", ["python3", "-"], stdin=script, limits=LIMITS)
    listener.close()
    assert run.exit_code == 0, run.output
    assert "secret" not in run.output.replace("secret.txt", "")
    assert f"{theirs / 'secret.txt'} False" in run.output
    assert f"{tmp_path} False" in run.output and "/root False" in run.output and "/work False" in run.output
    assert "network: refused" in run.output


@needs_bwrap
async def test_a_link_a_job_made_to_another_workspace_is_refused_by_the_file_tools(tmp_path):
    sandbox = LocalSandbox(tmp_path / "workspaces")
    await sandbox.write("globex", "bob", "secret.txt", b"globex's secret")
    theirs = sandbox.workspace("globex", "bob") / "secret.txt"
    run = await sandbox.run("acme", "alice", ["ln", "-s", str(theirs), "peek"], stdin=None, limits=LIMITS)
    assert run.exit_code == 0
    with pytest.raises(ValueError, match="symbolic link"):
        await sandbox.read("acme", "alice", "peek", max_bytes=100)
    with pytest.raises(ValueError, match="symbolic link"):
        await sandbox.write("acme", "alice", "peek", b"overwritten")
    assert theirs.read_bytes() == b"globex's secret"


async def _tool_turn(client: AgentVMClient, image_id: str, tool: str, arguments: str) -> dict:
    await client.request("message_send", check=True, imageId=image_id, content=f"/tool {tool} {arguments}")
    events = [e async for e in client.turn_events(timeout=60)]
    assert events[-1]["type"] == "conversation_end"
    return next(e["data"] for e in events if e["type"] == "tool_result")


async def test_a_sandbox_turn_through_avm_serve_writes_runs_and_keeps_files_per_container(tmp_path):
    with avm_serve(tmp_path, free_port()) as server:
        async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
            images = {}
            for user in ("user-alice", "user-bob"):
                await client.request("container_create", check=True, containerId=user)
                created = await client.request(
                    "image_create",
                    check=True,
                    containerId=user,
                    config={"name": "Coder", "tools": [{"type": "sandbox", "wallS": 10}]},
                )
                images[user] = created["record"]["imageId"]
            alice, bob = images["user-alice"], images["user-bob"]
            wrote = await _tool_turn(client, alice, "write", '{"path": "hello.py", "content": "print(6*7)"}')
            ran = await _tool_turn(client, alice, "sh", '{"command": "python3 hello.py"}')
            spun = await _tool_turn(client, alice, "python", '{"code": "while True: pass"}')
            peek = await _tool_turn(client, bob, "read", '{"path": "hello.py"}')

    assert wrote["isError"] is False and "wrote 10 bytes" in wrote["result"]
    assert ran["isError"] is False and ran["result"] == "42\n\n[exit code 0]"
    assert (
        spun["isError"] is True
        and "[stopped: it ran longer than its wall-time limit of 10 s]" in spun["result"]
    )
    assert peek["isError"] is True and "does not exist" in peek["result"]  # bob's workspace is his own
