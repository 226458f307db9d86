"""Authentication of a real ``avm serve`` process: keys on first start, the three ways a WebSocket
authenticates, revocation within the cache bound, and the loopback-only open mode."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm


@pytest.fixture
def port():
    return free_port()


def _code(frame):
    return frame["data"].get("code") or frame["data"].get("details", {}).get("code")


async def _refused_status(url, **kw) -> int:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(url, **kw):
            pass
    return refused.value.response.status_code


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--open", "--host", "0.0.0.0"], {}), (["--host", "0.0.0.0"], {"AVM_OPEN": "true"})],
    ids=["flag", "env"],
)
def test_open_mode_on_a_non_loopback_host_refuses_to_start_with_exit_code_2(tmp_path, port, args, env):
    started = time.monotonic()
    done = run_avm(
        "serve", *args, "--port", str(port), "--data-dir", str(tmp_path), env=base_env(**env), timeout=20
    )
    assert done.returncode == 2
    assert "--open" in done.stderr and "loopback" in done.stderr and "0.0.0.0" in done.stderr
    assert time.monotonic() - started < 20
    assert not (tmp_path / "agentvm.db").exists()  # refused before touching any state


async def test_open_mode_on_loopback_needs_no_key_and_is_tenant_local(tmp_path, port):
    with avm_serve(tmp_path, port, "--open") as server:
        assert server.printed_tokens() == []
        async with AgentVMClient.connect(server.url) as client:
            assert (await client.request("container_create", containerId="c1"))["containerId"] == "c1"
            assert (await client.request("container_list"))["containerIds"] == ["c1"]
        usage = httpx.get(f"{server.http}/v1/usage")
        assert usage.status_code == 200 and usage.json()["totals"]["turns"] == 0
    assert "OPEN DEV MODE" in server.output()


async def test_first_start_prints_the_admin_key_on_stdout_only_and_never_logs_it(tmp_path, port):
    with avm_serve(tmp_path, port) as server:
        token = server.admin_token()
        keys = httpx.get(f"{server.http}/v1/auth/keys", headers={"Authorization": f"Bearer {token}"})
    assert keys.status_code == 200
    [key] = keys.json()["keys"]
    assert (
        key["tenantId"] == "default"
        and key["scopes"] == ["admin"]
        and token.startswith(f"avm_{key['keyId']}_")
    )
    assert "".join(server.stdout).count(token) == 1
    assert token not in "".join(server.stderr)  # the JSON log lines
    assert (tmp_path / "auth_secret").stat().st_mode & 0o777 == 0o600


async def test_header_query_token_and_auth_frame_each_authenticate_a_websocket(tmp_path, port):
    with avm_serve(tmp_path, port) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as client:
            assert (await client.request("container_create", containerId="by-header"))["containerId"]
        async with AgentVMClient.connect(f"{server.url}?token={token}") as client:
            listed = await client.request("container_list")
            assert listed["containerIds"] == ["by-header"]

        async with AgentVMClient.connect(server.url) as client:  # no credentials: accepted, unauthenticated
            refused = await client.request("container_list")
            assert refused["code"] == "unauthorized" and refused["containerIds"] == []
            await client.send_frame({"type": "auth", "headers": {"Authorization": "Bearer avm_nope"}})
            bad = await asyncio.wait_for(_next_system_error(client), 5)
            assert bad["data"]["details"]["code"] == "unauthorized"
            await client.authenticate(token)
            assert (await client.request("container_list"))["containerIds"] == ["by-header"]

        wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert (
            await _refused_status(server.url, additional_headers={"Authorization": f"Bearer {wrong}"}) == 401
        )
        assert await _refused_status(f"{server.url}?token={wrong}") == 401
        assert await _refused_status(f"{server.url}?token=") == 401


async def _next_system_error(client):
    while True:
        frame = await client.events.get()
        if frame["type"] == "system_error":
            return frame


async def test_http_routes_need_a_key_and_answer_one_error_shape(tmp_path, port):
    with avm_serve(tmp_path, port) as server:
        token = server.admin_token()
        for headers in (
            {},
            {"Authorization": "Bearer avm_aaaaaaaaaaaa_" + "A" * 43},
            {"Authorization": "Basic x"},
        ):
            r = httpx.get(f"{server.http}/v1/auth/keys", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert r.json()["error"]["code"] == "unauthorized" and r.json()["error"]["message"]
        assert httpx.get(f"{server.http}/openapi.json").status_code == 200
        assert httpx.get(f"{server.http}/docs").status_code == 200
        created = httpx.post(
            f"{server.http}/v1/auth/keys",
            json={"scopes": ["client"], "name": "app"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert created.status_code == 201
        client_token = created.json()["token"]
        forbidden = httpx.get(
            f"{server.http}/v1/auth/keys", headers={"Authorization": f"Bearer {client_token}"}
        )
        assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"


async def test_a_key_revoked_by_another_process_stops_working_within_the_cache_bound(tmp_path, port):
    cache_s = 1.0
    with avm_serve(tmp_path, port, env=base_env(AVM_KEY_CACHE_S=str(cache_s))) as server:
        admin = server.admin_token()
        created = httpx.post(
            f"{server.http}/v1/auth/keys",
            json={"scopes": ["client"]},
            headers={"Authorization": f"Bearer {admin}"},
        ).json()
        key_id, token = created["key"]["keyId"], created["token"]
        async with AgentVMClient.connect(server.url, token=token) as live:
            assert (await live.request("container_list"))["containerIds"] == []  # verified, now cached
            revoked = run_avm("keys", "revoke", key_id, "--data-dir", str(tmp_path))  # the CLI's own process
            assert revoked.returncode == 0, revoked.stderr
            t0 = time.monotonic()
            while (await live.request("container_list")).get("code") != "unauthorized":
                assert time.monotonic() - t0 < cache_s + 2, "the live connection kept its revoked key"
                await asyncio.sleep(0.1)
            assert time.monotonic() - t0 <= cache_s + 2
        assert (
            await _refused_status(server.url, additional_headers={"Authorization": f"Bearer {token}"}) == 401
        )
        listed = run_avm("keys", "list", "--tenant", "default", "--json", "--data-dir", str(tmp_path))
        by_id = {k["keyId"]: k for k in map(json.loads, listed.stdout.splitlines())}
        assert by_id[key_id]["revokedAt"] is not None and by_id[key_id]["scopes"] == ["client"]
        assert token not in listed.stdout and "secretHash" not in listed.stdout


async def test_cli_keys_create_prints_a_working_token_once(tmp_path, port):
    created = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(tmp_path))
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("avm_") and token not in created.stderr
    with avm_serve(tmp_path, port) as server:
        async with AgentVMClient.connect(server.url, token=token) as client:
            await client.request("container_create", containerId="mine", check=True)
        admin = server.admin_token()  # tenant default's admin cannot see tenant acme's containers
        async with AgentVMClient.connect(server.url, token=admin) as other:
            assert (await other.request("container_get", containerId="mine"))["exists"] is False
