"""A provider key set through the config centre of a real ``avm serve`` (with ``avm config set``)
is in no file of the data dir, not one byte of it, ``-wal`` and logs included; ``avm config get``
shows it masked; and after a restart the server still has it (it opens what it sealed). An older
version's plaintext value is sealed at the first start (configcentre/sealing.py)."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from agentvm.cli.main import main
from agentvm.security.apikeys import new_token
from tests.integration.avm_process import avm_serve, base_env, free_port

if TYPE_CHECKING:
    from pathlib import Path

_, ADMIN = new_token()
PROVIDER_KEY = "sk-ant-AT-REST-do-not-store-0123456789abcdef"


def cli(capsys, server, *argv: str) -> dict:
    code = main([*argv, "--url", server.http, "--key", ADMIN])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def files_holding(data_dir: Path, needle: str) -> list[str]:
    return [
        str(path.relative_to(data_dir))
        for path in sorted(data_dir.rglob("*"))
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


def test_a_provider_key_set_through_the_config_centre_is_in_no_file_of_the_data_dir(tmp_path, capsys):
    data = tmp_path / "data"
    env = base_env(AVM_ADMIN_KEY=ADMIN, AVM_PLATFORM_TENANT="default")
    with avm_serve(data, free_port(), env=env) as server:
        argv = ("config", "set", "llm.anthropic.apiKey", PROVIDER_KEY, "--scope", "server")
        entry = cli(capsys, server, *argv)
        assert (entry["value"], entry["source"]) == ("********", "server")
        shown = cli(capsys, server, "config", "get", "llm.anthropic.apiKey")
        assert (shown["value"], shown["secret"]) == ("********", True)
        assert files_holding(data, PROVIDER_KEY) == []  # while running: -wal, -shm, logs.db
    assert files_holding(data, PROVIDER_KEY) == []  # after the last checkpoint
    assert PROVIDER_KEY not in server.output()

    with avm_serve(data, free_port(), env=env) as again:  # it opens what it sealed
        shown = cli(capsys, again, "config", "get", "llm.anthropic.apiKey")
        assert (shown["value"], shown["source"]) == ("********", "server")


def test_an_older_versions_plaintext_key_is_sealed_at_the_first_start(tmp_path, capsys):
    data = tmp_path / "data"
    env = base_env(AVM_ADMIN_KEY=ADMIN, AVM_PLATFORM_TENANT="default")
    with avm_serve(data, free_port(), env=env):
        pass
    record = {"scope": "server", "values": {"llm.openai.apiKey": PROVIDER_KEY}, "version": 1, "updatedAt": 1}
    with sqlite3.connect(data / "agentvm.db") as db:  # as a version before sealing stored it
        insert = "INSERT INTO config_values (scope, version, record) VALUES ('server', 1, ?)"
        db.execute(insert, (json.dumps(record),))
    with avm_serve(data, free_port(), env=env) as server:
        shown = cli(capsys, server, "config", "get", "llm.openai.apiKey")
        assert (shown["value"], shown["source"]) == ("********", "server")
        log = server.output()
    with sqlite3.connect(data / "agentvm.db") as db:
        [(stored,)] = db.execute("SELECT record FROM config_values WHERE scope = 'server'").fetchall()
    assert PROVIDER_KEY not in stored and "avm-sealed:v1:" in stored
    assert "sealed secret settings an older version stored in plaintext" in log
    assert PROVIDER_KEY not in log
