"""``avm serve --database-url`` when PostgreSQL cannot be reached: exit code 2, the URL named
without its password (the pool waits its connect timeout, 10 s, before giving up)."""

from __future__ import annotations

import socket

from agentvm.cli.main import main


def test_an_unreachable_database_stops_avm_serve_naming_the_url_without_its_password(
    tmp_path, capsys
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://avm:hunter2@127.0.0.1:{port}/agentvm"
    code = main(["serve", "--data-dir", str(tmp_path), "--open", "--database-url", url])
    err = capsys.readouterr().err
    assert code == 2
    assert f"avm:***@127.0.0.1:{port}/agentvm" in err and "not reachable" in err
    assert "hunter2" not in err
