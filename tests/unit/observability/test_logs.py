"""``/v1/logs`` on the local host: the lines the process logs, kept in a size-capped SQLite store,
tagged with their tenant, container, session and turn; a tenant reads its own lines only (never
another tenant's or a platform-internal one), secrets masked; filters, pages and bad input."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.local.sqlite.logs import SqliteLogStore
from agentvm.api.app import create_app
from agentvm.logs import add_log_handler, bind, unbind
from agentvm.ports import LogQuery
from tests.security_harness import ManualClock, keyed_client, new_key, secure
from tests.tools import FakeTool, FixedToolSources

log = logging.getLogger("agentvm.test")


@pytest.fixture
def store(tmp_path):
    store = SqliteLogStore(tmp_path / "logs.db")
    handler = store.handler()
    add_log_handler(handler)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    yield store
    root.removeHandler(handler)
    root.setLevel(level)
    store.close()


@pytest.fixture
async def world(harness, store):
    secure(harness, ManualClock())
    harness.rt.logs = store
    tokens = {t: await new_key(harness.rt, t, "admin") for t in ("tenant-a", "tenant-b", "platform")}
    return harness, tokens


def http(h, token: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(h.rt))
    return httpx.AsyncClient(
        transport=transport, base_url="http://avm", headers={"Authorization": f"Bearer {token}"}
    )


async def every_line(h, token: str, query: str = "") -> list[dict]:
    """Every page of ``/v1/logs?<query>``, one line per page (the cursor walks them all)."""
    h.rt.logs.flush()
    lines: list[dict] = []
    cursor = None
    async with http(h, token) as client:
        while True:
            url = f"/v1/logs?limit=1{'&' + query if query else ''}" + (f"&cursor={cursor}" if cursor else "")
            page = (await client.get(url)).json()
            lines += page["lines"]
            cursor = page["next"]
            if cursor is None:
                return lines


async def run_tool_turn(h, token: str, container: str) -> str:
    c = await keyed_client(h, token)
    config = {"name": container, "tools": [{"type": "builtin", "name": "calculator"}]}
    img = (await c.request("image_create", containerId=container, config=config))["record"]
    h.model.add(Calls(("get_weather", {"city": "Paris"})), "Sunny.")
    await c.request("message_send", imageId=img["imageId"], content="weather?")
    await h.run_turns()
    (turn,) = {f["context"]["turnId"] for f in c.frames if f.get("type") == "conversation_end"}
    return turn


async def test_a_tenant_reads_its_own_lines_only_and_a_platform_admin_reads_all(world):
    h, tokens = world
    h.rt.tools = FixedToolSources(FakeTool("get_weather"))
    turn_a = await run_tool_turn(h, tokens["tenant-a"], "alice")
    turn_b = await run_tool_turn(h, tokens["tenant-b"], "bob")
    log.warning("the platform's own business")  # no tenant bound: platform-internal
    secret = tokens["tenant-a"]
    ids = bind(tenant_id="tenant-a", container_id="alice")
    try:
        log.info("a key slipped into a line: %s", secret)
        try:
            raise ValueError("boom in /srv/agentvm/internal.py")
        except ValueError:
            log.exception("something failed")
    finally:
        unbind(ids)

    a_lines = await every_line(h, tokens["tenant-a"])
    assert a_lines and {line["tenantId"] for line in a_lines} == {"tenant-a"}
    assert {line["turnId"] for line in a_lines if line["msg"] == "tool call"} == {turn_a}
    text = json.dumps(a_lines)
    assert "tenant-b" not in text and turn_b not in text and "platform's own" not in text
    # the key's secret part is masked (split at most twice: the secret part may itself start with "_")
    assert secret not in text and secret.split("_", 2)[2] not in text
    failed = next(line for line in a_lines if line["msg"] == "something failed")
    assert failed["level"] == "ERROR" and failed["fields"]["error"] == "ValueError"
    assert "internal.py" not in text and "Traceback" not in text  # no platform internals for tenants
    tool = next(line for line in a_lines if line["msg"] == "tool call")
    assert (tool["containerId"], tool["fields"]["tool"]) == ("alice", "get_weather")
    ids_newest_first = [int(line["id"]) for line in a_lines]
    assert ids_newest_first == sorted(ids_newest_first, reverse=True)  # no line twice, none skipped

    b_lines = await every_line(h, tokens["tenant-b"])
    assert {line["tenantId"] for line in b_lines} == {"tenant-b"} and "tenant-a" not in json.dumps(b_lines)

    everything = await every_line(h, tokens["platform"])
    tenants = {line["tenantId"] for line in everything}
    assert {"tenant-a", "tenant-b", None} <= tenants
    platform_failed = next(line for line in everything if line["msg"] == "something failed")
    assert "Traceback" in platform_failed["fields"]["exc"]  # platform admins see the traceback
    assert {line["tenantId"] for line in await every_line(h, tokens["platform"], "tenant=tenant-b")} == {
        "tenant-b"
    }


async def test_filters_by_container_session_turn_level_and_time(world):
    h, tokens = world
    h.rt.tools = FixedToolSources(FakeTool("get_weather"))
    turn = await run_tool_turn(h, tokens["tenant-a"], "alice")
    await run_tool_turn(h, tokens["tenant-a"], "carol")
    ids = bind(tenant_id="tenant-a", container_id="alice")
    log.warning("alice warned")
    unbind(ids)

    by_turn = await every_line(h, tokens["tenant-a"], f"turnId={turn}")
    assert by_turn and all(line["turnId"] == turn for line in by_turn)
    session = by_turn[0]["sessionId"]
    assert all(
        line["sessionId"] == session
        for line in await every_line(h, tokens["tenant-a"], f"sessionId={session}")
    )
    alice = await every_line(h, tokens["tenant-a"], "containerId=alice")
    assert {line["containerId"] for line in alice} == {"alice"} and len(alice) > 1
    warnings = await every_line(h, tokens["tenant-a"], "level=WARNING")
    assert [line["msg"] for line in warnings] == ["alice warned"]
    newest = max(line["ts"] for line in alice)
    assert await every_line(h, tokens["tenant-a"], f"since={newest + 60_000}&until={newest + 120_000}") == []
    assert await every_line(h, tokens["tenant-a"], "until=0") == []
    # a tenant's filter on another tenant's ids finds nothing
    assert await every_line(h, tokens["tenant-b"], f"turnId={turn}") == []


async def test_bad_log_queries_get_stable_codes(world):
    h, tokens = world
    async with http(h, tokens["tenant-a"]) as client:
        for query, status, code in (
            ("level=loud", 400, "invalid_level"),
            ("cursor=not-a-cursor", 400, "invalid_cursor"),
            ("cursor=eyJiIjogLTF9", 400, "invalid_cursor"),  # {"b": -1}
            ("cursor=eyJ0IjoxLCJuIjowfQ", 400, "invalid_cursor"),  # another host's cursor
            ("since=2026-01-02&until=2026-01-01", 400, "invalid_time_range"),
            ("since=yesterday", 400, "invalid_time_range"),
            ("since=2025-01-01&until=2026-01-01", 400, "invalid_time_range"),  # longer than 14 days
            ("limit=0", 400, "bad_request"),
            ("limit=501", 400, "bad_request"),
            ("tenant=tenant-b", 403, "forbidden"),
            ("tenant=tenant-nobody", 403, "forbidden"),
        ):
            r = await client.get(f"/v1/logs?{query}")
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), query
        ok = await client.get("/v1/logs?level=warn&since=2026-01-15T11:00:00Z&until=1768478400000")
        assert ok.status_code == 200, ok.text
    h.rt.logs = None
    async with http(h, tokens["tenant-a"]) as client:
        r = await client.get("/v1/logs")
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")


async def test_the_store_keeps_its_size_under_the_cap_dropping_the_oldest_lines(tmp_path):
    store = SqliteLogStore(tmp_path / "logs.db", max_bytes=4000)
    handler = store.handler()
    add_log_handler(handler)
    logger = logging.getLogger("agentvm.test.cap")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for i in range(200):
            logger.info("line %03d %s", i, "x" * 40)
        store.flush()
        page = await store.page(LogQuery(tenant_id=None, limit=500))
    finally:
        logger.removeHandler(handler)
        store.close()
    kept = [int(line["msg"].split()[1]) for line in page.lines]
    total = sum(len(json.dumps(line)) for line in page.lines)
    assert 0 < len(kept) < 200 and kept[0] == 199  # the newest is kept
    assert kept == list(range(199, 199 - len(kept), -1))  # and only a contiguous newest run of them
    assert total < 2 * 4000 and store.dropped == 0
    reopened = SqliteLogStore(tmp_path / "logs.db", max_bytes=4000)  # the cap holds across restarts
    assert (await reopened.page(LogQuery(tenant_id=None, limit=1))).lines[0]["msg"].startswith("line 199")
    reopened.close()


def test_the_aws_log_query_scopes_a_tenant_in_a_stage_of_its_own():
    from agentvm.adapters.aws.cloudwatch.logs import logs_query

    query = LogQuery(tenant_id="acme", container_id='x" or tenant_id != "', turn_id="turn_1", min_level=30)
    stages = logs_query(query, since_ms=1000, until_ms=2000, limit=11).split("\n| ")
    assert stages == [
        "fields @timestamp, @message, @ptr",
        'filter tenant_id = "acme"',
        'filter container_id = "x\\" or tenant_id != \\""',  # quoted: it cannot widen anything
        'filter turn_id = "turn_1"',
        "filter not ispresent(avm_metric) or ispresent(message)",  # a line carrying EMF is a line
        'filter level in ["WARNING", "ERROR", "CRITICAL", "WARN"]',
        "filter @timestamp >= 1000 and @timestamp <= 2000",
        "sort @timestamp desc",
        "limit 11",
    ]
    platform = logs_query(LogQuery(tenant_id=None), since_ms=0, until_ms=1, limit=2)
    assert "tenant_id" not in platform and "level" not in platform


async def test_avm_serve_keeps_its_lines_in_the_data_dir(tmp_path):
    from agentvm.config import Settings
    from agentvm.hosts.local import local_runtime
    from agentvm.hosts.local_server import _keep_log_lines

    host = local_runtime(Settings(data_dir=tmp_path))
    store = host.runtime.logs
    assert isinstance(store, SqliteLogStore) and store.path == str(tmp_path / "logs.db")
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    root.setLevel(logging.INFO)
    try:
        _keep_log_lines(host)
        ids = bind(tenant_id="acme", turn_id="turn_9")
        log.info("served")
        unbind(ids)
        store.flush()
        page = await store.page(LogQuery(tenant_id="acme"))
    finally:
        for handler in set(root.handlers) - set(before):
            root.removeHandler(handler)
        root.setLevel(level)
        store.close()
        host.queue.close()
    assert [(line["msg"], line["turnId"]) for line in page.lines] == [("served", "turn_9")]


# -- stderr's format: readable at a terminal, JSON elsewhere (AVM_LOG_FORMAT) ------------------------


class _Stderr:
    def __init__(self, tty: bool) -> None:
        self.lines: list[str] = []
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(
    ("log_format", "tty", "expect_json"),
    [("auto", True, False), ("auto", False, True), ("json", True, True), ("text", False, False)],
)
def test_stderr_lines_are_text_at_a_terminal_and_json_elsewhere(monkeypatch, log_format, tty, expect_json):
    from agentvm.logs import configure_logging

    secret = "sk-test-" + "s" * 24
    stderr = _Stderr(tty)
    monkeypatch.setattr("sys.stderr", stderr)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("INFO", secrets=[secret], log_format=log_format)
        logging.getLogger("agentvm.test").info("key %s used", secret, extra={"tenant": "t1", "n": 3})
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    line = "".join(stderr.lines).strip()
    assert secret not in line  # masked in both formats
    if expect_json:
        record = json.loads(line)
        assert (record["logger"], record["tenant"], record["n"]) == ("agentvm.test", "t1", 3)
    else:
        assert not line.startswith("{")
        assert "INFO" in line and "agentvm.test: key" in line and "tenant=t1" in line and "n=3" in line
