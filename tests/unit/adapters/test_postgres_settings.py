"""The cluster host's database setting: validated, and its password never shown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentvm.adapters.postgres.database import redacted_url
from agentvm.cli.main import main
from agentvm.config import Settings


def test_the_url_comes_from_the_environment_and_its_repr_is_masked(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AVM_DATABASE_URL", "postgresql://avm:hunter2@db.internal:5432/agentvm")
    settings = Settings(data_dir=tmp_path)
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value().endswith("@db.internal:5432/agentvm")
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings.model_dump())


@pytest.mark.parametrize(
    "url",
    ["mysql://avm:hunter2@db/agentvm", "db.internal:5432", "postgresql:///agentvm?password=hunter2"],
)
def test_a_url_that_is_not_postgres_is_refused_without_echoing_it(url: str, tmp_path) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(data_dir=tmp_path, database_url=url)
    assert "AVM_DATABASE_URL must be postgresql://" in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_a_unix_socket_url_is_accepted(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, database_url="postgresql:///agentvm?host=/run/postgresql")
    assert settings.database_url is not None


def test_the_pool_bounds_must_be_in_order(tmp_path) -> None:
    with pytest.raises(ValidationError, match="MIN_SIZE may not exceed"):
        Settings(data_dir=tmp_path, database_pool_min_size=5, database_pool_max_size=2)
    assert Settings(data_dir=tmp_path).database_pool_max_size == 10


def test_the_log_mask_gets_the_url_and_its_password_as_written_and_decoded(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, database_url="postgresql://avm:p%40ss%3Aword@db/agentvm")
    secrets = set(settings.database_secrets())
    assert secrets == {"postgresql://avm:p%40ss%3Aword@db/agentvm", "p%40ss%3Aword", "p@ss:word"}
    assert Settings(data_dir=tmp_path).database_secrets() == []


def test_redacted_url_keeps_everything_but_the_password() -> None:
    assert redacted_url("postgresql://avm:hunter2@db:5432/agentvm?sslmode=require") == (
        "postgresql://avm:***@db:5432/agentvm?sslmode=require"
    )
    assert redacted_url("postgresql://avm@db/agentvm") == "postgresql://avm@db/agentvm"
    assert redacted_url("postgresql:///agentvm?host=/tmp&password=hunter2") == (
        "postgresql:///agentvm?host=/tmp&password=***"
    )


def test_avm_serve_refuses_a_bad_database_url_without_printing_it(tmp_path, capsys) -> None:
    code = main(["serve", "--data-dir", str(tmp_path), "--database-url", "mysql://avm:hunter2@db/x"])
    err = capsys.readouterr().err
    assert code == 2
    assert "AVM_DATABASE_URL must be postgresql://" in err
    assert "hunter2" not in err


def test_no_turns_needs_a_database_url(tmp_path, capsys) -> None:
    code = main(["serve", "--data-dir", str(tmp_path), "--open", "--no-turns"])
    assert code == 2
    assert "AVM_RUN_TURNS=false needs AVM_DATABASE_URL" in capsys.readouterr().err


def test_workers_are_refused_with_a_database_url(tmp_path, capsys) -> None:
    url = "postgresql://avm:hunter2@127.0.0.1:1/agentvm"
    code = main(["serve", "--data-dir", str(tmp_path), "--open", "--workers", "2", "--database-url", url])
    err = capsys.readouterr().err
    assert code == 2 and "run more nodes" in err and "hunter2" not in err
