"""A hostile client cannot flood the log or read a token in it (security review, findings 6 and 9c):
refusal lines are limited per source with a bounded table, every line is cut at a length, uvicorn's
lines about client mistakes are one INFO line without a traceback, and a frame log cut short keeps
no part of a token's secret."""

from __future__ import annotations

import contextvars
import json
import logging

import pytest
from websockets.frames import Frame, Opcode

from agentvm import logs
from agentvm.logs import MAX_MSG_CHARS, JsonFormatter, RefusalLimit, SecretMask, UvicornClientErrors

KEY_ID = "k3y1dabcdefg"
SECRET = "Q7xZp2LmN9vR4tYw8sKd1HfJ6gBc3XeA0uVi5oPqT-_"  # 43 characters, like a real one
TOKEN = f"avm_{KEY_ID}_{SECRET}"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_refusal_lines_are_limited_per_source_and_the_suppressed_ones_are_counted_once_the_window_ends(
    caplog,
):
    clock = Clock()
    limit = RefusalLimit(3, clock=clock)
    assert [limit.admit("10.0.0.1") for _ in range(5)] == [True, True, True, False, False]
    assert limit.admit("10.0.0.2")  # another source has its own window
    clock.now += 59
    assert not limit.admit("10.0.0.1")
    caplog.set_level(logging.INFO, logger="agentvm.logs")
    clock.now += 1  # the first window ends: reported with the next line of any source
    assert limit.admit("10.0.0.2")
    [summary] = [r for r in caplog.records if r.name == "agentvm.logs"]
    assert (summary.source, summary.suppressed, summary.levelname) == ("10.0.0.1", 3, "WARNING")
    assert "3 refusal lines" in summary.getMessage()
    assert limit.admit("10.0.0.1")  # a new window


def test_the_tracked_sources_are_capped_and_the_sources_beyond_share_one_window():
    limit = RefusalLimit(2, max_sources=3, clock=Clock())
    for source in ("a", "b", "c"):
        assert limit.admit(source)
    # a flood of new sources (addresses) shares one window: it cannot buy 2 lines per address
    assert [limit.admit(f"new-{i}") for i in range(100)] == [True, True] + [False] * 98
    assert len(limit._windows) == 4


def test_a_limit_of_0_logs_every_refusal():
    limit = RefusalLimit(0, clock=Clock())
    assert all(limit.admit("a") for _ in range(100))


def test_log_refusal_writes_one_short_line_and_then_nothing_for_that_source(monkeypatch, caplog):
    monkeypatch.setattr(logs, "refusals", RefusalLimit(2, clock=Clock()))
    caplog.set_level(logging.INFO)
    for _ in range(5):
        logs.log_refusal(logging.getLogger("t"), "frame refused", source="10.0.0.9", reason="x" * 10_000)
    lines = [r for r in caplog.records if r.name == "t"]
    assert len(lines) == 2 and all(r.source == "10.0.0.9" and not r.exc_info for r in lines)
    assert len(lines[0].reason) < 400  # a reason may quote what the client sent: cut


def test_every_log_line_is_cut_at_a_bounded_length():
    try:
        raise ValueError("y" * 100_000)
    except ValueError as exc:
        record = logging.LogRecord("t", logging.ERROR, "", 0, "m" * 50_000, None, (ValueError, exc, None))
    record.field = "f" * 50_000
    line = JsonFormatter().format(record)
    out = json.loads(line)
    assert out["msg"].startswith("m" * MAX_MSG_CHARS) and out["msg"].endswith("[cut: 50000 chars]")
    assert len(out["field"]) < MAX_MSG_CHARS + 100
    assert out["exc"].startswith("[cut: ") and out["exc"].rstrip().endswith("y")  # its end is kept
    assert len(line) < 30_000


def _uvicorn_record(msg: str, level: int = logging.INFO, args: tuple = (), exc: bool = False):
    exc_info = None
    if exc:
        try:
            b"\xff".decode()
        except UnicodeDecodeError as e:
            exc_info = (UnicodeDecodeError, e, e.__traceback__)
    return logging.LogRecord("uvicorn.error", level, "", 0, msg, args, exc_info)


def test_uvicorn_client_mistakes_are_one_info_line_without_a_traceback(monkeypatch):
    monkeypatch.setattr(logs, "refusals", RefusalLimit(2, clock=Clock()))
    f = UvicornClientErrors()
    record = _uvicorn_record("Invalid UTF-8 sequence received from client.", logging.ERROR, exc=True)
    assert f.filter(record)
    assert (record.levelname, record.exc_info, record.exc_text) == ("INFO", None, None)
    assert f.filter(_uvicorn_record("Invalid UTF-8 sequence received from client.", logging.ERROR))
    assert not f.filter(_uvicorn_record("Invalid UTF-8 sequence received from client.", logging.ERROR))
    assert f.filter(_uvicorn_record("Invalid HTTP request received.", logging.WARNING))  # its own limit
    # anything else passes untouched, ERRORs included
    other = _uvicorn_record("Exception in ASGI application\n", logging.ERROR, exc=True)
    assert f.filter(other) and other.levelname == "ERROR" and other.exc_info


def test_uvicorn_per_connection_lines_are_rate_limited_like_refusals(monkeypatch):
    """Issue 25: uvicorn wrote its INFO lines for every WebSocket with no limit."""
    monkeypatch.setattr(logs, "refusals", RefusalLimit(2, clock=Clock()))
    f = UvicornClientErrors()
    for msg, args in (
        ('%s - "WebSocket %s" [accepted]', ("127.0.0.1:5", "/ws")),
        ("connection open", ()),
        ("connection closed", ()),
    ):
        assert [f.filter(_uvicorn_record(msg, logging.INFO, args)) for _ in range(5)] == [True] * 2 + [
            False
        ] * 3


def test_uvicorn_lines_about_an_upgrade_the_app_refused_are_dropped_in_that_connection_only():
    f = UvicornClientErrors()
    denial = [
        ('%s - "WebSocket %s" %d', ("127.0.0.1:5", "/ws?token=***", 401)),
        ("connection rejected (%d %s)", (401, "Unauthorized")),
        ("ASGI callable returned without completing handshake.", ()),  # uvicorn PR #3138
    ]

    def refused_connection() -> list[bool]:
        logs.upgrade_refused.set(True)
        return [f.filter(_uvicorn_record(msg, logging.INFO, args)) for msg, args in denial]

    assert contextvars.copy_context().run(refused_connection) == [False, False, False]
    # another connection's task: the accepted-connection line and a real handshake error stay
    assert f.filter(_uvicorn_record('%s - "WebSocket %s" %d', logging.INFO, ("127.0.0.1:6", "/ws", 101)))
    assert f.filter(_uvicorn_record("ASGI callable returned without completing handshake.", logging.ERROR))


FRAME_LAYOUTS = [
    '{"type":"auth","headers":{"Authorization":"Bearer %s"}}',  # what AgentX clients send
    '{"type": "auth", "headers": {"Authorization": "Bearer %s"}}',
    '{"type":"auth","data":{"headers":{"Authorization":"Bearer %s"}}}',
    '{"type":"auth","headers":{"authorization":"%s"}}',
    '{"headers":{"Authorization":"Bearer %s"},"type":"auth"}',
    '{"headers":{"X-Some-Long-Header-Name":"value","Authorization":"Bearer %s"},"type":"auth"}',
]


@pytest.mark.parametrize("layout", FRAME_LAYOUTS)
def test_a_frame_log_cut_short_keeps_no_part_of_a_token_secret(layout):
    """The websockets frame log keeps a frame's first 48 and last 24 characters: wherever the cut
    falls in the token (padding moves it), no 6 characters of the secret survive the mask."""
    mask = SecretMask([])
    windows = {SECRET[i : i + 6] for i in range(len(SECRET) - 5)}
    for pad in range(0, 60):
        payload = layout.replace('"type"', f'"pad":"{"p" * pad}","type"', 1) % TOKEN
        line = mask._mask(f"< {Frame(Opcode.TEXT, payload.encode())}")
        leaked = [w for w in windows if w in line]
        assert not leaked, (pad, line)


def test_a_token_cut_short_keeps_at_most_its_key_id():
    mask = SecretMask([])._mask
    assert mask(f"Bearer {TOKEN[:22]}... [cut]") == f"Bearer avm_{KEY_ID}_*** [cut]"
    assert mask(f"x {TOKEN[:9]}...{SECRET[-20:]}'") == "x avm_k3y1d***'"
    assert mask(f"key {TOKEN}") == f"key avm_{KEY_ID}_***"
    assert (
        mask("tests/integration/avm_process.py, avm_serve") == "tests/integration/avm_process.py, avm_serve"
    )
