"""``avm sessions`` against a real ``avm serve`` (a subprocess on loopback): import an export from a
file, export it back, search it, fork it and title it, and errors reported with their code."""

from __future__ import annotations

import json

import pytest

from agentvm.cli.main import main
from agentvm.security.apikeys import new_token
from tests.functions.aws_stack import load_event
from tests.integration.avm_process import avm_serve, base_env, free_port

_, ADMIN = new_token()


@pytest.fixture
def server(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with avm_serve(data, free_port(), env=base_env(AVM_ADMIN_KEY=ADMIN)) as s:
        yield s


def run(capsys, server, *argv: str) -> tuple[int, str, str]:
    code = main(["sessions", *argv, "--url", server.http, "--key", ADMIN])
    out, err = capsys.readouterr()
    return code, out, err


def test_sessions_are_imported_exported_searched_forked_and_titled_from_the_command_line(
    server, capsys, tmp_path
):
    export = tmp_path / "trip.jsonl"
    export.write_text(load_event("apigw-http-post-sessions-import.json")["body"])
    code, out, _ = run(capsys, server, "import", "user-alice", str(export))
    assert code == 0
    imported = json.loads(out)
    assert imported["created"] and imported["messages"] == 2
    session = imported["record"]["sessionId"]

    back = tmp_path / "back.jsonl"
    code, out, _ = run(capsys, server, "export", session, "-o", str(back))
    assert code == 0 and json.loads(out)["bytes"] == back.stat().st_size
    lines = [json.loads(line) for line in back.read_text().splitlines()]
    assert [r["type"] for r in lines] == ["session", "image", "message", "message", "end"]

    code, out, _ = run(capsys, server, "search", '"alfama district"', "--all")
    [hit] = json.loads(out)["results"]
    assert (hit["sessionId"], hit["role"]) == (session, "assistant")

    first = lines[2]["message"]["id"]
    code, out, _ = run(capsys, server, "fork", session, first, "--name", "Lisbon again")
    assert code == 0 and json.loads(out)["record"]["name"] == "Lisbon again"
    code, out, _ = run(capsys, server, "title", session, "Food in Lisbon")
    assert code == 0 and json.loads(out)["record"]["name"] == "Food in Lisbon"

    code, _, err = run(capsys, server, "search", "alfama OR belem")
    assert code == 1 and err.startswith("avm: invalid_query:")
    code, _, err = run(capsys, server, "fork", session, "msg_nope")
    assert code == 1 and err.startswith("avm: message_not_found:")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(export.read_text().replace('"version":1', '"version":9'))
    code, _, err = run(capsys, server, "import", "user-alice", str(broken))
    assert code == 1 and err.startswith("avm: invalid_import: line 1:")
