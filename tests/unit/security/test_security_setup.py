"""Wiring security for the local host: the server secret file, the first admin key, log masking."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from agentvm.config import Settings
from agentvm.errors import BadRequest
from agentvm.hosts.local import local_security, local_server_secrets
from agentvm.hosts.local_server import is_loopback, open_mode_error
from agentvm.logs import SecretMask
from agentvm.runtime import SystemClock
from agentvm.security.apikeys import new_token
from agentvm.security.setup import DEFAULT_TENANT, ensure_admin_key


def settings(tmp_path, **kw) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, **kw)


def test_the_local_server_secret_is_generated_once_with_mode_0600(tmp_path):
    first = local_server_secrets(settings(tmp_path))
    path = tmp_path / "auth_secret"
    assert path.stat().st_mode & 0o777 == 0o600 and len(path.read_bytes()) >= 32
    assert local_server_secrets(settings(tmp_path)).current_id == first.current_id


def test_an_auth_secret_from_the_environment_wins_and_no_file_is_written(tmp_path):
    env_secret = SecretStr("e" * 40)
    chosen = local_server_secrets(settings(tmp_path, auth_secret=env_secret))
    assert not (tmp_path / "auth_secret").exists()
    assert chosen.current_id != local_server_secrets(settings(tmp_path)).current_id


async def test_the_first_start_creates_one_admin_key_for_tenant_default(tmp_path):
    s = settings(tmp_path)
    auth = local_security(s, SystemClock()).auth
    token = await ensure_admin_key(auth, s)
    principal = await auth.authenticate(token)
    assert (principal.tenant_id, principal.scopes) == (DEFAULT_TENANT, frozenset({"admin"}))
    assert await ensure_admin_key(auth, s) is None  # later starts print nothing
    assert len(await auth.keys.list(DEFAULT_TENANT)) == 1


async def test_avm_admin_key_is_stored_hashed_and_never_returned(tmp_path):
    _, token = new_token()
    s = settings(tmp_path, admin_key=SecretStr(token))
    auth = local_security(s, SystemClock()).auth
    assert await ensure_admin_key(auth, s) is None
    assert (await auth.authenticate(token)).tenant_id == DEFAULT_TENANT
    [stored] = await auth.keys.list(DEFAULT_TENANT)
    assert token not in stored.model_dump_json()
    with pytest.raises(BadRequest):
        await ensure_admin_key(auth, settings(tmp_path, admin_key=SecretStr("not-a-key")))


async def test_open_mode_has_no_authenticator(tmp_path):
    assert local_security(settings(tmp_path, open=True), SystemClock()).auth is None


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("127.0.0.2", True),
        ("0.0.0.0", False),
        ("", False),
    ],
)
def test_the_open_mode_is_allowed_only_on_loopback(tmp_path, host, ok):
    assert is_loopback(host) is ok
    assert (open_mode_error(settings(tmp_path, open=True, host=host)) is None) is ok
    assert open_mode_error(settings(tmp_path, open=False, host=host)) is None


def test_the_log_mask_hides_api_keys_token_parameters_and_authorization_headers():
    _, token = new_token()
    key_id = token.split("_")[1]
    record = logging.LogRecord(
        "uvicorn.error", logging.INFO, "", 0, "%s %s", ("GET", f"/ws?token={token}&x=1"), None
    )
    record.header = f"authorization: Bearer {token}"
    record.extra = "sk-provider-secret"
    SecretMask(["sk-provider-secret"]).filter(record)
    text = f"{record.getMessage()} {record.header} {record.extra}"
    assert token.split("_", 2)[2] not in text and "sk-provider-secret" not in text
    assert text == "GET /ws?token=***&x=1 authorization: Bearer *** ***"
    assert SecretMask([])._mask(f"key {token}") == f"key avm_{key_id}_***"
