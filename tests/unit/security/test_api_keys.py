"""API keys: token format, hashing under the server secret, verification, rotation, the cache bound."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest
from pydantic import ValidationError

from agentvm.adapters.local.sqlite.keys import SqliteKeyStore
from agentvm.config import Settings
from agentvm.errors import BadRequest, Unauthorized
from agentvm.security.apikeys import ApiKeys, ServerSecrets, key_id_of, new_token
from agentvm.security.auth import Authenticator, bearer_token
from tests.security_harness import SERVER_SECRET, ManualClock

OTHER_SECRET = b"another-server-secret-abcdefghijklmnopqrstuvwxyz"


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def store():
    s = SqliteKeyStore(":memory:")
    yield s
    s.close()


@pytest.fixture
def keys(store, clock):
    return ApiKeys(store, ServerSecrets(SERVER_SECRET), clock)


@pytest.fixture
def auth(keys, clock):
    return Authenticator(keys, clock, cache_s=30)


def test_token_is_avm_keyid_secret_and_the_key_id_is_its_lookup_key():
    key_id, token = new_token()
    assert re.fullmatch(r"[0-9a-z]{12}", key_id)
    prefix, kid, secret = token.split("_", 2)
    assert (prefix, kid) == ("avm", key_id)
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", secret)  # 32 random bytes, URL-safe base64
    assert key_id_of(token) == key_id
    assert len({new_token()[1] for _ in range(200)}) == 200


@pytest.mark.parametrize(
    "token",
    ["", "avm_", "avm_short_x", "avm_ABCDEFGHIJKL_" + "a" * 43, "avm_abcdefghijkl_" + "a" * 42, "x" * 60],
)
def test_malformed_tokens_have_no_key_id(token):
    assert key_id_of(token) is None


async def test_the_store_keeps_only_an_hmac_of_the_token(keys, store):
    record, token = await keys.create("acme", ["client"], name="app")
    stored = await store.get_key(record.keyId)
    assert stored == record
    assert stored.secretHash == hmac.new(SERVER_SECRET, token.encode(), hashlib.sha256).hexdigest()
    dumped = stored.model_dump_json()
    assert token not in dumped and token.split("_", 2)[2] not in dumped
    assert "secretHash" not in record.to_public() and "secretId" not in record.to_public()


async def test_every_bad_token_reads_as_the_same_invalid_api_key(keys, auth):
    record, token = await keys.create("acme", ["client"])
    _, other_tenant_token = await keys.create("other", ["client"])
    wrong_secret = f"avm_{record.keyId}_{other_tenant_token.split('_', 2)[2]}"
    await auth.authenticate(token)  # cached: the wrong secret must still fail from the cache
    unknown = "avm_zzzzzzzzzzzz_" + "A" * 43
    messages = set()
    for bad in (wrong_secret, unknown, "garbage", token + "x"):
        with pytest.raises(Unauthorized) as refused:
            await auth.authenticate(bad)
        messages.add(refused.value.message)
    assert messages == {"invalid API key"}


async def test_a_revoked_key_is_refused(keys, auth):
    record, token = await keys.create("acme", ["admin"])
    assert (await auth.authenticate(token)).tenant_id == "acme"
    assert (await auth.revoke(record.keyId)).revokedAt is not None
    with pytest.raises(Unauthorized):
        await auth.authenticate(token)


async def test_a_key_revoked_elsewhere_works_until_the_cache_bound_then_stops(keys, store, auth, clock):
    record, token = await keys.create("acme", ["client"])
    await auth.authenticate(token)
    await store.revoke_key(record.keyId, revoked_at=clock.now_ms())  # another process (the CLI)
    clock.advance(29.9)
    assert (await auth.authenticate(token)).key_id == record.keyId
    assert (await auth.principal(record.keyId)).key_id == record.keyId
    clock.advance(0.2)
    with pytest.raises(Unauthorized):
        await auth.authenticate(token)
    with pytest.raises(Unauthorized):
        await auth.principal(record.keyId)


async def test_a_zero_cache_rechecks_the_store_every_time(keys, store, clock):
    auth = Authenticator(keys, clock, cache_s=0)
    record, token = await keys.create("acme", ["client"])
    await auth.authenticate(token)
    await store.revoke_key(record.keyId, revoked_at=1)
    with pytest.raises(Unauthorized):
        await auth.authenticate(token)


def test_the_cache_can_never_exceed_the_documented_60_s_bound(keys, clock, monkeypatch):
    with pytest.raises(ValueError):
        Authenticator(keys, clock, cache_s=61)
    monkeypatch.setenv("AVM_KEY_CACHE_S", "61")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)
    monkeypatch.setenv("AVM_KEY_CACHE_S", "5")
    assert Settings(_env_file=None).key_cache_s == 5


async def test_rotation_accepts_keys_of_the_previous_secret_and_rehashes_them_on_use(store, clock):
    old = ApiKeys(store, ServerSecrets(SERVER_SECRET), clock)
    record, token = await old.create("acme", ["client"])
    rotated = ApiKeys(store, ServerSecrets(OTHER_SECRET, previous=SERVER_SECRET), clock)
    auth = Authenticator(rotated, clock, cache_s=0)
    assert (await auth.authenticate(token)).key_id == record.keyId
    rehashed = await store.get_key(record.keyId)
    assert rehashed.secretId == rotated.secrets.current_id != record.secretId
    # once the previous secret is dropped, the re-hashed key still works; an unused one would not
    done = Authenticator(ApiKeys(store, ServerSecrets(OTHER_SECRET), clock), clock, cache_s=0)
    assert (await done.authenticate(token)).key_id == record.keyId
    _, never_used = await old.create("acme", ["client"])
    with pytest.raises(Unauthorized):
        await done.authenticate(never_used)


def test_server_secrets_shorter_than_32_bytes_are_refused():
    with pytest.raises(ValueError):
        ServerSecrets(b"too-short")
    assert "unit-test" not in repr(ServerSecrets(SERVER_SECRET))


async def test_importing_a_token_is_idempotent_and_refuses_a_different_token_for_the_same_id(keys):
    _, token = new_token()
    first = await keys.import_token(token, "default", ["admin"], name="AVM_ADMIN_KEY")
    assert await keys.import_token(token, "default", ["admin"]) == first
    impostor = f"avm_{first.keyId}_{new_token()[1].split('_', 2)[2]}"
    with pytest.raises(BadRequest):
        await keys.import_token(impostor, "default", ["admin"])
    with pytest.raises(BadRequest):
        await keys.import_token("not-a-token", "default", ["admin"])


@pytest.mark.parametrize(
    ("tenant", "scopes"), [("", ["client"]), ("a#b", ["client"]), ("ok", []), ("ok", ["root"])]
)
async def test_bad_tenant_ids_and_scopes_are_refused(keys, tenant, scopes):
    with pytest.raises(BadRequest):
        await keys.create(tenant, scopes)


def test_bearer_token_reads_the_authorization_header_in_any_case():
    assert bearer_token({"authorization": "Bearer abc"}) == "abc"
    assert bearer_token({"AUTHORIZATION": "bearer  abc "}) == "abc"
    assert bearer_token({"x-other": "1"}) is None
    for bad in ("Basic abc", "Bearer", "Bearer   "):
        with pytest.raises(Unauthorized):
            bearer_token({"Authorization": bad})


async def test_query_token_authenticates_and_a_missing_one_is_none(keys, auth):
    _, token = await keys.create("acme", ["client"])
    assert (await auth.from_query({"token": token})).tenant_id == "acme"
    assert await auth.from_query({}) is None
    with pytest.raises(Unauthorized):
        await auth.from_query({"token": ""})


async def test_admin_scope_includes_client(keys, auth):
    _, admin = await keys.create("acme", ["admin"])
    _, client = await keys.create("acme", ["client"])
    assert (await auth.authenticate(admin)).allows("client")
    assert not (await auth.authenticate(client)).allows("admin")
