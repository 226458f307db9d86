"""The config centre on the AWS host (moto): values set through the HTTP API handler reach the turn
worker's next turn (another function, another runtime: it reads the table again after
``AVM_CONFIG_CACHE_S``, 0 here), secrets are refused (provider keys stay in SSM there), and a
tenant's values and audit log are its own."""

from __future__ import annotations

import json

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.config import DynamoDbConfigStore
from agentvm.config import Settings
from agentvm.configcentre.centre import ConfigCentre
from agentvm.configcentre.sealing import SecretSealer
from agentvm.hosts.aws import run_sync
from tests.functions.aws_stack import REGION, TABLE, Stack, moto_resources
from tests.security_harness import ManualClock

pytestmark = pytest.mark.aws

CONN = "conn-1"


@pytest.fixture
def stack(monkeypatch, context, push):
    monkeypatch.setenv("AVM_CONFIG_CACHE_S", "0")
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def _turn(stack, token: str, conn: str, request_id: str) -> str:
    stack.connect(conn, headers={"Authorization": f"Bearer {token}"})
    image = stack.request(conn, "image_create", f"img-{request_id}", containerId="c", config={"name": "x"})[
        "record"
    ]
    stack.model.add("ok")
    stack.request(conn, "message_send", request_id, imageId=image["imageId"], content="hi")
    stack.run_turns()
    return stack.model.requests[-1].model


def test_a_put_through_the_http_handler_changes_the_workers_next_turn(stack):
    platform = stack.new_key("platform", "admin")
    acme = stack.new_key("acme", "admin")
    assert _turn(stack, acme, CONN, "r1") == "test-1"
    status, body = stack.http(
        "PUT", "/v1/config/llm.defaultModel", platform, {"scope": "server", "value": "scripted/big"}
    )
    assert status == 200 and body["source"] == "server", body
    assert _turn(stack, acme, CONN, "r2") == "big"

    status, body = stack.http("PUT", "/v1/config", acme, {"values": {"llm.defaultModel": "scripted/acme"}})
    assert status == 200 and body["settings"]["llm.defaultModel"]["source"] == "tenant"
    assert _turn(stack, acme, CONN, "r3") == "acme"
    other = stack.new_key("globex", "admin")
    assert _turn(stack, other, "conn-2", "r4") == "big"
    status, audit = stack.http("GET", "/v1/config/audit", other)
    assert status == 200 and audit == {"changes": []}
    status, audit = stack.http("GET", "/v1/config/audit", acme)
    assert [c["new"] for c in audit["changes"]] == ["scripted/acme"]


def test_secrets_are_refused_on_aws_and_bad_values_name_the_key(stack):
    platform = stack.new_key("platform", "admin")
    status, body = stack.http(
        "PUT",
        "/v1/config",
        platform,
        {"scope": "server", "values": {"llm.anthropic.apiKey": "sk-ant-xyz-123"}},
    )
    assert (
        status == 400 and body["error"]["key"] == "llm.anthropic.apiKey" and "SSM" in body["error"]["message"]
    )
    assert "sk-ant-xyz-123" not in str(body)
    status, body = stack.http(
        "PUT", "/v1/config/turns.deadlineS", platform, {"scope": "server", "value": "soon"}
    )
    assert status == 400 and body["error"]["key"] == "turns.deadlineS"
    status, body = stack.http("GET", "/v1/config?scope=server", platform)
    assert status == 200 and body == {"settings": {}}


def test_a_secret_the_centre_seals_is_ciphertext_in_the_dynamodb_item_and_reads_back(stack):
    """Secrets are refused above (the functions get no sealer); the centre's sealing is host-neutral,
    so were a sealer given here, the table would hold ciphertext only, and the value read back."""
    key = "sk-ant-SEALED-in-dynamodb-0123456789"
    sealer = SecretSealer(lambda: [b"a-server-secret-from-ssm-0123456789abcdef"])
    centre = ConfigCentre(DynamoDbConfigStore(TABLE), Settings(), ManualClock(), cache_s=0, sealer=sealer)
    run_sync(centre.set({"llm.anthropic.apiKey": key}, tenant_id=None, by="k", platform_admin=True))
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    assert any("avm-sealed:v1:" in json.dumps(item) for item in items)
    assert all(key not in json.dumps(item) for item in items)
    fresh = ConfigCentre(DynamoDbConfigStore(TABLE), Settings(), ManualClock(), cache_s=0, sealer=sealer)
    assert run_sync(fresh.resolved(None))["llm.anthropic.apiKey"] == (key, "server")
