"""``avm turns`` and ``avm usage`` against a real ``avm serve`` (a subprocess on loopback, the echo
model): a long turn is listed with the tokens it has streamed so far, cancelled from the command
line and ends interrupted; then its usage is summed, exported to a file and priced."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import UTC, datetime

import pytest

from agentvm.cli.main import main
from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port


@pytest.fixture
def server(tmp_path):
    with avm_serve(tmp_path / "data", free_port(), env=base_env(AVM_ECHO_DELAY_MS="20")) as s:
        yield s


def avm(capsys, server, *argv: str) -> tuple[int, object]:
    code = main([*argv, "--url", server.http, "--key", server.admin_token()])
    out, err = capsys.readouterr()
    if code != 0:
        return code, err
    try:
        return code, json.loads(out)
    except ValueError:
        return code, out


async def test_a_long_turn_is_listed_and_cancelled_from_the_command_line_then_billed(
    server, capsys, tmp_path
):
    long_message = " ".join(f"word{i}" for i in range(300))  # echoed at 20 ms a word: 6 s
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        record = (
            await client.request("image_create", containerId="user-alice", config={"name": "A"}, check=True)
        )["record"]
        await client.request("message_send", imageId=record["imageId"], content=long_message, check=True)
        for _ in range(200):  # until the turn has streamed a little
            code, listed = avm(capsys, server, "turns", "list", "--status", "running")
            if code == 0 and listed["turns"] and listed["turns"][0].get("streamingOutputTokens", 0) >= 3:
                break
            await asyncio.sleep(0.05)
        [turn] = listed["turns"]
        assert (turn["status"], turn["containerId"], turn["model"]) == (
            "running",
            "user-alice",
            "echo/echo-1",
        )

        code, cancelled = avm(capsys, server, "turns", "cancel", turn["turnId"])

        assert code == 0 and cancelled == {
            "cancelled": [{"turnId": turn["turnId"], "status": "running"}],
            "notFound": [],
        }
        events = [e async for e in client.turn_events(timeout=20)]
    assert "interrupted" in [e["type"] for e in events]
    assert avm(capsys, server, "turns", "list") == (0, {"turns": []})
    code, refused = avm(capsys, server, "turns", "cancel", turn["turnId"])
    assert code == 0 and refused == {"cancelled": [], "notFound": [turn["turnId"]]}

    code, summary = avm(capsys, server, "usage", "summary", "--group-by", "container,model")
    [row] = summary["rows"]
    assert (row["containerId"], row["model"], row["turns"]) == ("user-alice", "echo/echo-1", 1)
    assert 3 <= row["outputTokens"] < 300 and row["estimatedRecords"] == 1
    assert row["unpricedTokens"] == row["totalTokens"] and row["charge"] == 0.0  # the echo model is free
    assert row["cacheSavings"] == 0.0
    month = datetime.now(UTC).strftime("%Y-%m")
    out = tmp_path / "usage.csv"
    code, _ = avm(capsys, server, "usage", "export", "--month", month, "--output", str(out))
    lines = list(csv.DictReader(io.StringIO(out.read_text())))
    assert code == 0 and [(x["containerId"], x["outputTokens"]) for x in lines] == [
        ("user-alice", str(row["outputTokens"]))
    ]
    assert lines[0]["cacheSavings"] == "0.000000"
    code, prices = avm(capsys, server, "usage", "prices")
    assert code == 0 and prices["prices"]["anthropic/claude-haiku-4-5"]["output"] == 5.25  # x 1.05
    assert prices["pricesAsOf"].startswith("genai-prices ")
    code, records = avm(capsys, server, "usage", "records", "--container", "user-alice")
    assert code == 0 and [r["cacheSavings"] for r in records["records"]] == [None]  # echo: no price
    assert [s["sessionId"] for s in records["sessions"]] == [r["sessionId"] for r in records["records"]]
    assert records["totals"]["cacheSavings"] == 0.0
    code, error = avm(capsys, server, "usage", "summary", "--group-by", "user")
    assert code == 1 and "invalid_grouping" in error
