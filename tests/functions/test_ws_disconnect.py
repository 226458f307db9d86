"""``$disconnect``: the connection and its subscriptions are forgotten."""

from __future__ import annotations

from agentvm.hosts.aws import run_sync
from functions.ws_disconnect.app import build_handler

CONNECTION = "Q3xYzfGIoAMCJqg="  # the id in events/apigw-ws-*.json


def test_disconnect_removes_the_connection_and_its_subscriptions(rt, connect, load_event, context):
    connect(CONNECTION)
    connect("other-connection")
    run_sync(rt.connections.subscribe(CONNECTION, "sess_1"))
    run_sync(rt.connections.subscribe("other-connection", "sess_1"))

    assert build_handler(rt)(load_event("apigw-ws-disconnect.json"), context) == {"statusCode": 200}

    assert run_sync(rt.connections.get(CONNECTION)) is None
    assert list(run_sync(rt.connections.subscribers("sess_1"))) == ["other-connection"]


def test_disconnect_of_an_unknown_connection_succeeds(rt, load_event, context):
    # $disconnect may arrive for a connection whose $connect failed, or twice.
    assert build_handler(rt)(load_event("apigw-ws-disconnect.json"), context) == {"statusCode": 200}


def test_disconnected_line_carries_the_connections_closed_document(
    rt, connect, load_event, context, capsys, powertools_logs, parse_json_lines
):
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics

    rt.metrics = CloudWatchMetrics()
    connect(CONNECTION)
    build_handler(rt)(load_event("apigw-ws-disconnect.json"), context)

    # one line is both the log line and the EMF document (no document printed on its own)
    assert [x for x in parse_json_lines(capsys.readouterr().out) if "_aws" in x] == []
    (line,) = [x for x in parse_json_lines(powertools_logs.getvalue()) if x["message"] == "disconnected"]
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Metrics"] == [{"Name": "ConnectionsClosed", "Unit": "Count"}]
    assert (line["ConnectionsClosed"], line["avm_metric"], line["connection_id"]) == (
        1,
        "connection",
        CONNECTION,
    )
    assert line["function_request_id"] == context.aws_request_id


def test_without_info_lines_the_connections_closed_document_is_written_alone(
    rt, connect, load_event, context, capsys, powertools_logs, parse_json_lines
):
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics
    from functions.ws_disconnect.app import logger

    rt.metrics = CloudWatchMetrics()
    connect(CONNECTION)
    level = logger.log_level
    logger.setLevel("WARNING")
    try:
        build_handler(rt)(load_event("apigw-ws-disconnect.json"), context)
    finally:
        logger.setLevel(level)
    assert powertools_logs.getvalue() == ""
    (document,) = [x for x in parse_json_lines(capsys.readouterr().out) if "_aws" in x]
    assert document["ConnectionsClosed"] == 1 and "message" not in document
