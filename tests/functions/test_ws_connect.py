"""``$connect``: the connection is registered under the tenant and key API Gateway's authorizer named."""

from __future__ import annotations

from agentvm.hosts.aws import run_sync
from agentvm.ports import ConnectionInfo
from functions.ws_connect.app import build_handler


def test_connect_without_authorizer_context_registers_an_unauthenticated_connection(rt, load_event, context):
    # The authorizer allowed an upgrade without credentials: no tenant (there is no default one)
    # until the client sends an `auth` frame.
    event = load_event("apigw-ws-connect.json")
    assert build_handler(rt)(event, context) == {"statusCode": 200}
    info = run_sync(rt.connections.get("Q3xYzfGIoAMCJqg="))
    assert info == ConnectionInfo(
        "Q3xYzfGIoAMCJqg=", None, event["requestContext"]["connectedAt"], key_id=None
    )


def test_connect_takes_the_tenant_and_key_from_the_authorizer_context(rt, load_event, context):
    event = load_event("apigw-ws-connect-authorizer.json")
    build_handler(rt)(event, context)
    info = run_sync(rt.connections.get("Q3xYzfGIoAMCJqg="))
    assert info is not None and (info.tenant_id, info.key_id) == ("tenant-acme", "k7q2m9x4a1b3")
    assert info.connected_at == event["requestContext"]["connectedAt"]


def test_connect_never_posts_to_the_connection(rt, push, load_event, context):
    # API Gateway answers 410 to a post made before $connect returns.
    build_handler(rt)(load_event("apigw-ws-connect.json"), context)
    assert push.posts == []


def test_connect_logs_with_connection_and_request_ids(
    rt, load_event, context, powertools_logs, parse_json_lines
):
    event = load_event("apigw-ws-connect-authorizer.json")
    build_handler(rt)(event, context)
    (line,) = [x for x in parse_json_lines(powertools_logs.getvalue()) if x["message"] == "connected"]
    assert line["connection_id"] == "Q3xYzfGIoAMCJqg="
    assert line["correlation_id"] == event["requestContext"]["requestId"]
    assert (line["tenant_id"], line["key_id"], line["authenticated"]) == ("tenant-acme", "k7q2m9x4a1b3", True)
    assert line["function_request_id"] == context.aws_request_id


def test_connect_records_batched_frames_when_the_upgrade_asks_for_them(rt, load_event, context):
    # `?frames=batch` (streaming/batching.py): recorded by the one write $connect makes anyway.
    event = load_event("apigw-ws-connect-batch.json")
    assert build_handler(rt)(event, context) == {"statusCode": 200}
    info = run_sync(rt.connections.get("Q3xYzfGIoAMCJqg="))
    assert info is not None and info.batch is True
    plain = load_event("apigw-ws-connect-authorizer.json")
    plain["requestContext"]["connectionId"] = "other"
    build_handler(rt)(plain, context)
    assert run_sync(rt.connections.get("other")).batch is False  # type: ignore[union-attr]


def test_connect_refuses_an_unknown_frames_mode_and_registers_nothing(rt, load_event, context):
    event = load_event("apigw-ws-connect-batch.json")
    event["queryStringParameters"] = {"frames": "everything"}
    assert build_handler(rt)(event, context) == {"statusCode": 400}
    assert run_sync(rt.connections.get("Q3xYzfGIoAMCJqg=")) is None


def test_connected_line_carries_the_connections_opened_document(
    rt, load_event, context, capsys, powertools_logs, parse_json_lines
):
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics

    rt.metrics = CloudWatchMetrics()
    build_handler(rt)(load_event("apigw-ws-connect-authorizer.json"), context)

    assert [x for x in parse_json_lines(capsys.readouterr().out) if "_aws" in x] == []  # none alone
    (line,) = [x for x in parse_json_lines(powertools_logs.getvalue()) if x["message"] == "connected"]
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Metrics"] == [{"Name": "ConnectionsOpened", "Unit": "Count"}]
    assert (line["ConnectionsOpened"], line["tenant_id"], line["authenticated"]) == (1, "tenant-acme", True)


def test_connect_records_the_cadence_the_upgrade_asks_for(rt, load_event, context):
    # `?frames=batch&cadence=economy` (streaming/batch_cadence.py): kept with the connection
    event = load_event("apigw-ws-connect-batch.json")
    event["queryStringParameters"] = {**event["queryStringParameters"], "cadence": "economy"}
    assert build_handler(rt)(event, context) == {"statusCode": 200}
    info = run_sync(rt.connections.get("Q3xYzfGIoAMCJqg="))
    assert info is not None and (info.batch, info.cadence) == (True, "economy")
    unbatched = load_event("apigw-ws-connect-authorizer.json")
    unbatched["requestContext"]["connectionId"] = "other"
    unbatched["queryStringParameters"] = {"cadence": "economy"}  # a cadence without frames=batch
    assert build_handler(rt)(unbatched, context) == {"statusCode": 400}
    assert run_sync(rt.connections.get("other")) is None
