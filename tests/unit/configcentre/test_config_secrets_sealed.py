"""Config-centre secrets at rest (``configcentre.sealing``): the store holds ciphertext only (no
byte of the key in any file of the database, its -wal included), the centre reads the value back,
a value sealed under the previous server secret still opens and is sealed again under the current
one at the next write, an older version's plaintext is read and sealed at start, a sealed value
moved to another setting or sealed under a secret no longer configured reads as unset (with a
warning that does not quote it), and ``cryptography`` is loaded only when a secret is touched."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from agentvm.adapters.local.sqlite.config import SqliteConfigStore
from agentvm.config import Settings
from agentvm.configcentre.centre import SERVER, ConfigCentre
from agentvm.configcentre.sealing import PREFIX, SecretSealer, SecretUnreadable
from agentvm.records import ConfigValues
from tests.security_harness import ManualClock

KEY = "sk-ant-at-rest-0123456789abcdefSECRET"
OLD_SECRET = b"the-previous-server-secret-0123456789abcdef"
NEW_SECRET = b"the-current-server-secret-0123456789abcdefgh"


def centre(store: SqliteConfigStore, *secrets: bytes) -> ConfigCentre:
    sealer = SecretSealer(lambda: list(secrets)) if secrets else None
    return ConfigCentre(store, Settings(), ManualClock(), cache_s=0, sealer=sealer)


async def _value(c: ConfigCentre, name: str = "llm.anthropic.apiKey"):
    return (await c.resolved(None))[name]


async def test_a_secret_is_stored_sealed_and_no_file_of_the_database_holds_it(tmp_path):
    db = tmp_path / "agentvm.db"
    store = SqliteConfigStore(db)
    c = centre(store, NEW_SECRET)
    view = await c.set({"llm.anthropic.apiKey": KEY}, tenant_id=None, by="key_1", platform_admin=True)
    assert view["llm.anthropic.apiKey"]["value"] == "********"
    stored = (await store.get_values(SERVER)).values["llm.anthropic.apiKey"]
    assert stored.startswith(PREFIX) and KEY not in stored
    assert await _value(c) == (KEY, "server")  # what the provider client is given
    assert await _value(centre(SqliteConfigStore(db), NEW_SECRET)) == (KEY, "server")  # another process
    files = sorted(tmp_path.iterdir())
    assert any(f.name.endswith("-wal") for f in files)
    for f in files:
        assert KEY.encode() not in f.read_bytes(), f.name
    store.close()


async def test_a_value_sealed_under_the_previous_secret_opens_and_is_resealed_at_the_next_write():
    store = SqliteConfigStore(":memory:")
    await centre(store, OLD_SECRET).set(
        {"llm.anthropic.apiKey": KEY}, tenant_id=None, by="k", platform_admin=True
    )
    rotating = centre(store, NEW_SECRET, OLD_SECRET)
    assert await _value(rotating) == (KEY, "server")
    await rotating.set({"llm.timeoutS": 30.0}, tenant_id=None, by="k", platform_admin=True)
    stored = (await store.get_values(SERVER)).values["llm.anthropic.apiKey"]
    assert SecretSealer(lambda: [NEW_SECRET]).open("llm.anthropic.apiKey", stored) == KEY
    with pytest.raises(SecretUnreadable):
        SecretSealer(lambda: [OLD_SECRET]).open("llm.anthropic.apiKey", stored)
    assert await _value(centre(store, NEW_SECRET)) == (KEY, "server")  # the rotation is over


async def test_an_older_versions_plaintext_is_read_then_sealed_at_start():
    store = SqliteConfigStore(":memory:")
    plain = {"llm.openai.apiKey": KEY, "llm.maxOutputTokens": 100}
    await store.put_values(ConfigValues(scope=SERVER, values=plain, version=1, updatedAt=1), [])
    c = centre(store, NEW_SECRET)
    assert await _value(c, "llm.openai.apiKey") == (KEY, "server")
    assert await c.seal_stored_secrets() == ["llm.openai.apiKey"]
    stored = await store.get_values(SERVER)
    assert stored.version == 2 and stored.values["llm.maxOutputTokens"] == 100
    assert stored.values["llm.openai.apiKey"].startswith(PREFIX)
    assert await _value(c, "llm.openai.apiKey") == (KEY, "server")
    assert await c.seal_stored_secrets() == []  # nothing left to seal: no write
    assert (await store.get_values(SERVER)).version == 2
    assert await store.list_changes(SERVER) == []  # not a change of any setting: not audited


async def test_a_value_that_does_not_open_reads_as_unset_with_a_warning_that_does_not_quote_it(caplog):
    caplog.set_level(logging.DEBUG)
    store = SqliteConfigStore(":memory:")
    await centre(store, OLD_SECRET).set(
        {"llm.anthropic.apiKey": KEY}, tenant_id=None, by="k", platform_admin=True
    )
    sealed = (await store.get_values(SERVER)).values["llm.anthropic.apiKey"]
    assert await _value(centre(store, NEW_SECRET)) == (None, "default")  # rotated twice since
    assert "opens with neither server secret" in caplog.text

    moved = ConfigValues(scope=SERVER, values={"llm.openai.apiKey": sealed}, version=9, updatedAt=1)
    await store.put_values(moved, [])  # the other setting's sealed value: bound to its own name
    assert await _value(centre(store, OLD_SECRET), "llm.openai.apiKey") == (None, "default")
    assert KEY not in caplog.text and sealed not in caplog.text


async def test_a_host_without_a_sealer_refuses_secrets_and_stores_nothing():
    store = SqliteConfigStore(":memory:")
    with pytest.raises(Exception, match="secrets cannot be set"):
        await centre(store).set({"llm.anthropic.apiKey": KEY}, tenant_id=None, by="k", platform_admin=True)
    assert await store.get_values(SERVER) is None


def test_cryptography_is_imported_only_when_a_secret_is_touched():
    code = (
        "import sys, agentvm.configcentre.centre, agentvm.hosts.aws, agentvm.hosts.local;"
        "print('cryptography' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
