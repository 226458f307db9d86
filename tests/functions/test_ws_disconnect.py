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
