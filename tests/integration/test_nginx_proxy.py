"""deploy/nginx/agentvm.conf, run by Debian's nginx in front of two ``avm serve`` processes.

The shipped file is used as written, except the lines a deployment edits anyway: the `server` lines
of ``upstream agentvm`` (here the two nodes' loopback ports), the ``listen`` port and the access
log's path. nginx runs unprivileged-style from a temp dir (pid, temp paths, logs there). Both nodes
start from copies of one data dir, so one key is valid on either: the proxy, not a shared store, is
what is tested (the cluster host shares its store through PostgreSQL, docs/cluster.md). Skipped when
nginx is missing (``./dev test`` installs Debian's ``nginx-light``); failed under ``CI=true``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, free_port

CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "agentvm.conf"


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("nginx is required in CI (./dev test installs Debian's nginx-light)", pytrace=False)
        pytest.skip("no nginx: install Debian's nginx-light (./dev test does when apt-get can run)")
    return found


def upstream_block(conf: str) -> str:
    match = re.search(r"upstream agentvm \{(.*?)\n\}", conf, re.S)
    assert match, "deploy/nginx/agentvm.conf has no `upstream agentvm` block"
    return match.group(1)


def render(conf: str, *, listen: int, upstreams: list[int], access_log: Path) -> str:
    """The shipped config with this test's upstream servers, listen port and access log."""
    servers = "".join(f"    server 127.0.0.1:{port} max_fails=3 fail_timeout=10s;\n" for port in upstreams)
    block = upstream_block(conf)
    kept = "".join(line + "\n" for line in block.splitlines() if not line.strip().startswith("server "))
    conf = conf.replace(block, "\n" + servers + kept.rstrip("\n"), 1)
    conf, listens = re.subn(r"^(\s*)listen \d+;", rf"\1listen 127.0.0.1:{listen};", conf, flags=re.M)
    assert listens == 1
    conf, logs = re.subn(r"access_log \S+ agentvm;", f"access_log {access_log} agentvm;", conf)
    assert logs == 1
    return conf


def start_nginx(workdir: Path, site: str) -> subprocess.Popen:
    (workdir / "agentvm.conf").write_text(site)
    temp = "".join(
        f"    {kind}_temp_path {workdir / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root nginx would hand its workers to `nobody`, who cannot write this temp dir.
    user = "user root;\n" if os.geteuid() == 0 else ""
    (workdir / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {workdir / 'nginx.pid'};\nerror_log {workdir / 'error.log'} info;\n"
        f"events {{ worker_connections 256; }}\nhttp {{\n{temp}    include {workdir / 'agentvm.conf'};\n}}\n"
    )
    binary = nginx_binary()
    check = subprocess.run(
        [
            binary,
            "-t",
            "-p",
            str(workdir),
            "-e",
            str(workdir / "error.log"),
            "-c",
            str(workdir / "nginx.conf"),
        ],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    return subprocess.Popen(
        [
            binary,
            "-p",
            str(workdir),
            "-e",
            str(workdir / "error.log"),
            "-c",
            str(workdir / "nginx.conf"),
            "-g",
            "daemon off;",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_http(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"nginx exited: {proc.stderr.read() if proc.stderr else ''}"
        try:
            httpx.get(url, timeout=0.5)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"nginx did not listen at {url}")


def upstreams_logged(access_log: Path, request: str) -> list[str]:
    """(status, upstream) of each access-log line of ``request`` (e.g. ``GET /ws``)."""
    text = access_log.read_text() if access_log.exists() else ""
    return re.findall(rf'"{re.escape(request)}[^"]*" (\d+) \d+ upstream=(\S+)', text)


def test_shipped_config_proxies_websockets_without_stickiness():
    conf = CONF.read_text()
    block = upstream_block(conf)
    for sticky in ("ip_hash", "sticky", "hash ", "route"):
        assert sticky not in block, f"{sticky} in the upstream: sessions must not be pinned to a node"
    ws = re.search(r"location = /ws \{(.*?)\n    \}", conf, re.S)
    assert ws, "no `location = /ws`"
    body = ws.group(1)
    assert "proxy_http_version 1.1;" in body
    assert "proxy_set_header Upgrade $http_upgrade;" in body
    assert "proxy_set_header Connection $agentvm_connection;" in body
    timeout = re.search(r"proxy_read_timeout (\d+)s;", body)
    assert timeout and int(timeout.group(1)) >= 3600  # a quiet socket waits for turns


async def test_http_and_websocket_turns_reach_both_nodes_through_nginx(tmp_path):
    conf = CONF.read_text()
    nginx_binary()  # skip (or fail under CI) before starting anything
    first, second = tmp_path / "node-a", tmp_path / "node-b"
    with avm_serve(first, free_port()) as server:
        token = server.admin_token()
    shutil.copytree(first, second)  # the same key on both nodes
    ports = [free_port(), free_port()]
    listen = free_port()
    workdir = tmp_path / "nginx"
    workdir.mkdir()
    access_log = workdir / "access.log"
    with avm_serve(first, ports[0]) as node_a, avm_serve(second, ports[1]) as node_b:
        proxy = start_nginx(workdir, render(conf, listen=listen, upstreams=ports, access_log=access_log))
        try:
            base = f"http://127.0.0.1:{listen}"
            wait_http(f"{base}/health", proxy)
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, timeout=10) as http:
                for _ in range(4):
                    health = http.get("/health")
                    assert health.status_code == 200 and health.json()["status"] == "ok"
                    keys = http.get("/v1/auth/keys", headers=headers)
                    assert keys.status_code == 200 and keys.json()["keys"]
                    assert http.get("/v1/auth/keys").status_code == 401  # refusals pass through as they are
            http_upstreams = {
                up for status, up in upstreams_logged(access_log, "GET /v1/auth/keys") if status == "200"
            }
            assert http_upstreams == {f"127.0.0.1:{p}" for p in ports}

            created: list[str] = []
            for n in range(6):  # round robin: two sockets suffice; a few more tolerate reordering
                container = f"user-{n}"
                async with AgentVMClient.connect(f"ws://127.0.0.1:{listen}/ws", token=token) as client:
                    await client.request("container_create", containerId=container, check=True)
                    image = (
                        await client.request(
                            "image_create", containerId=container, config={"name": "A"}, check=True
                        )
                    )["record"]
                    await client.request(
                        "message_send", imageId=image["imageId"], content=f"hi {n}", check=True
                    )
                    events = [e async for e in client.turn_events(timeout=20)]
                created.append(container)
                agent = [e for e in events if e["source"] == "agent"]
                deltas = [e for e in agent if e["type"] == "text_delta"]
                assert len(deltas) > 1  # streamed in pieces through the proxy, not one buffered answer
                assert "".join(e["data"]["text"] for e in deltas) == f"Echo: hi {n}"
                assert agent[-1]["type"] == "conversation_end"
                if await _containers(node_a, token) and await _containers(node_b, token):
                    break
            # Each node ran at least one of the turns, and between them all of them, each once.
            on_a, on_b = await _containers(node_a, token), await _containers(node_b, token)
            assert on_a and on_b and not set(on_a) & set(on_b)
            assert sorted(on_a + on_b) == sorted(created)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # nginx logs a WebSocket when it closes
                ws = upstreams_logged(access_log, "GET /ws")
                if len(ws) == len(created):
                    break
                time.sleep(0.05)
            assert {status for status, _ in ws} == {"101"}
            assert {up for _, up in ws} == {f"127.0.0.1:{p}" for p in ports}

            # One node gone: nginx passes what it may repeat (GETs, upgrades) to the other one.
            node_b.proc.terminate()
            node_b.proc.wait(timeout=10)
            with httpx.Client(base_url=base, timeout=10) as http:
                for _ in range(4):
                    assert http.get("/v1/auth/keys", headers=headers).status_code == 200
            for _ in range(2):
                async with AgentVMClient.connect(f"ws://127.0.0.1:{listen}/ws", token=token) as client:
                    listed = await client.request("container_list", check=True)
                assert sorted(listed["containerIds"]) == sorted(on_a)
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)


async def _containers(node, token: str) -> list[str]:
    """The containers a node holds, asked of the node directly (not through nginx)."""
    async with AgentVMClient.connect(node.url, token=token) as client:
        listed = await client.request("container_list", check=True)
    return list(listed["containerIds"])
