"""``/v1/logs`` and ``/v1/metrics`` through the Lambda HTTP handler on moto: the functions' lines
(the core's log lines and the EMF metric lines, shipped into the log group as Lambda ships
stdout: ``tests/moto_logs.py``) read back with Logs Insights, each tenant's scoped to itself.

moto runs ``StartQuery``/``GetQueryResults`` but evaluates no Insights command but ``fields``,
``sort`` and ``limit``: the log route's own check of every row (tenant first) is what scopes its
answer here, and the metrics' ``stats`` come back empty (zeros); the queries themselves are
checked as strings (scoped by the tenant's own stage). The local twins:
``tests/unit/observability/test_logs.py``
and ``tests/unit/observability/test_metrics.py``."""

from __future__ import annotations

import json

import pytest

from agentvm.logs import add_log_handler
from tests.functions.aws_stack import LOG_GROUP, Stack, moto_resources
from tests.functions.conftest import json_lines
from tests.moto_logs import MotoLogShipper

pytestmark = pytest.mark.aws


@pytest.fixture
def stack(monkeypatch, context, push):
    import logging

    with moto_resources(monkeypatch) as resources:
        shipper = MotoLogShipper(LOG_GROUP)
        add_log_handler(shipper)  # the core's lines, as the functions' Powertools handler ships them
        root = logging.getLogger()
        # setLevel, not ``root.level =``: it clears the loggers' cached isEnabledFor answers (a
        # logger asked at WARNING by an earlier test of this process would go on refusing INFO)
        level = root.level
        root.setLevel(logging.INFO)
        try:
            stack = Stack(resources, context, push)
            stack.shipper = shipper
            yield stack
        finally:
            root.removeHandler(shipper)
            root.setLevel(level)


def a_turn(stack: Stack, tenant: str, token: str) -> str:
    conn = f"conn-{tenant}"
    stack.connect(conn, headers={"Authorization": f"Bearer {token}"})
    config = {"name": tenant, "tools": [{"type": "builtin", "name": "calculator"}]}
    image = stack.request(conn, "image_create", "r1", containerId=f"{tenant}-box", config=config)["record"]
    from agentvm.adapters.llm.scripted import Calls

    stack.model.add(Calls(("calculator", {"expression": "6*7"})), "42.")
    stack.request(conn, "message_send", "r2", imageId=image["imageId"], content="6 times 7?")
    stack.run_turns()
    return image["sessionId"]


def ship_stdout(stack: Stack, capsys) -> int:
    """The EMF lines the functions printed, into the log group (Lambda does this with stdout)."""
    lines = [line for line in json_lines(capsys.readouterr().out) if "_aws" in line]
    for line in lines:
        stack.shipper.ship(json.dumps(line), line["_aws"]["Timestamp"])
    return len(lines)


def test_a_tenant_reads_its_own_log_lines_only_through_the_http_handler(stack, capsys):
    tokens = {t: stack.new_key(t, "admin") for t in ("tenant-a", "tenant-b", "platform")}
    a_session = a_turn(stack, "tenant-a", tokens["tenant-a"])
    b_session = a_turn(stack, "tenant-b", tokens["tenant-b"])
    assert ship_stdout(stack, capsys) > 0  # EMF lines sit in the same group: never log lines

    status, page = stack.http("GET", "/v1/logs?limit=500", tokens["tenant-a"])
    assert status == 200, page
    assert page["lines"] and {line["tenantId"] for line in page["lines"]} == {"tenant-a"}
    text = json.dumps(page)
    assert "tenant-b" not in text and b_session not in text and "avm_metric" not in text
    assert any(line["sessionId"] == a_session and line["msg"] == "tool call" for line in page["lines"])
    queries = stack.runtimes["http_api"].logs.insights.queries
    assert '| filter tenant_id = "tenant-a"' in queries[-1]

    status, everything = stack.http("GET", "/v1/logs?limit=500", tokens["platform"])
    assert status == 200 and {"tenant-a", "tenant-b"} <= {line["tenantId"] for line in everything["lines"]}
    assert "tenant_id" not in stack.runtimes["http_api"].logs.insights.queries[-1]

    # pages: one line each, newest first, every one of A's lines once
    seen, cursor = [], None
    while True:
        path = "/v1/logs?limit=1" + (f"&cursor={cursor}" if cursor else "")
        status, one = stack.http("GET", path, tokens["tenant-a"])
        assert status == 200, one
        seen += one["lines"]
        cursor = one["next"]
        if cursor is None:
            break
    assert [line["id"] for line in seen] == [line["id"] for line in page["lines"]][: len(seen)]
    assert len(seen) == len(page["lines"])

    for query, status_code, code in (
        ("level=chatty", 400, "invalid_level"),
        ("cursor=eyJiIjoxfQ", 400, "invalid_cursor"),  # the local host's cursor
        ("since=2026-01-02&until=2026-01-01", 400, "invalid_time_range"),
        ("tenant=tenant-b", 403, "forbidden"),
    ):
        status, refused = stack.http("GET", f"/v1/logs?{query}", tokens["tenant-a"])
        assert (status, refused["error"]["code"]) == (status_code, code), query


def test_metrics_are_read_back_for_the_callers_tenant_only(stack, capsys):
    tokens = {t: stack.new_key(t, "admin") for t in ("tenant-a", "tenant-b", "platform")}
    a_turn(stack, "tenant-a", tokens["tenant-a"])
    ship_stdout(stack, capsys)

    status, view = stack.http("GET", "/v1/metrics?since=0&until=4102444800000", tokens["tenant-b"])
    assert status == 400 and view["error"]["code"] == "invalid_time_range"  # longer than 14 days
    status, view = stack.http("GET", "/v1/metrics", tokens["tenant-b"])
    assert status == 200, view
    assert (view["host"], view["scope"], view["tenantId"]) == ("aws", "tenant", "tenant-b")
    assert view["until"] - view["since"] == 3_600_000  # the last hour by default
    queries = stack.runtimes["http_api"].metrics.insights.queries[-3:]
    assert len(queries) == 3 and all('\n| filter tenant_id = "tenant-b"\n' in q for q in queries)
    assert view["queue"] == {"depth": None, "oldestAgeS": None, "deadLetters": None}  # platform figures
    assert "tenant-a" not in json.dumps(view)

    status, platform = stack.http("GET", "/v1/metrics", tokens["platform"])
    assert status == 200 and platform["scope"] == "platform"
    assert platform["queue"]["depth"] == 0 and platform["queue"]["deadLetters"] == 0  # SQS on moto
    status, refused = stack.http("GET", "/v1/metrics?format=prometheus", tokens["platform"])
    assert (status, refused["error"]["code"]) == (400, "unsupported_format")
    status, refused = stack.http("GET", "/v1/metrics?tenant=tenant-a", tokens["tenant-b"])
    assert (status, refused["error"]["code"]) == (403, "forbidden")
