"""The AWS composition root: ``aws_runtime``, provider keys from SSM, ``LambdaEntry``, ``run_sync``."""

from __future__ import annotations

import asyncio
import json
import logging

import boto3
import botocore.endpoint
import pytest
from moto import mock_aws

from agentvm.adapters.aws.apigw_push import ApiGatewayPush
from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.sqs_queue import SqsTurnQueue
from agentvm.config import Settings
from agentvm.errors import BadRequest
from agentvm.hosts.aws import LambdaEntry, NotConfigured, SsmKeysModelResolver, aws_runtime, run_sync
from agentvm.records import TurnJob
from functions.http_api import app as http_api
from functions.turn_worker import app as turn_worker
from functions.ws_authorizer import app as ws_authorizer
from functions.ws_connect import app as ws_connect
from functions.ws_default import app as ws_default
from functions.ws_disconnect import app as ws_disconnect

pytestmark = pytest.mark.aws

SECRET = "sk-ant-api03-do-not-log-me-0123456789"
PARAMETER = "/agentvm/test/provider-keys"
AWS_SETTINGS = {
    "table_name": "agentvm-test",
    "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/agentvm-turns.fifo",
    "ws_endpoint": "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod",
}


def _settings(**overrides: object) -> Settings:
    return Settings(**{**AWS_SETTINGS, **overrides})


@pytest.fixture
def no_network(monkeypatch):
    """Every botocore request fails: what runs under this fixture made none."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network I/O")

    monkeypatch.setattr(botocore.endpoint.Endpoint, "_send", refuse)


def test_aws_runtime_wires_the_aws_adapters_without_network_io(no_network):
    rt = aws_runtime(_settings(provider_keys_parameter=PARAMETER, cancel_poll_ms=250, flush_ms=100))
    assert isinstance(rt.store, DynamoDbStore)
    assert isinstance(rt.connections, DynamoDbConnections)
    assert isinstance(rt.queue, SqsTurnQueue) and rt.queue.queue_url == AWS_SETTINGS["queue_url"]
    assert isinstance(rt.push, ApiGatewayPush) and rt.push.endpoint_url == AWS_SETTINGS["ws_endpoint"]
    assert isinstance(rt.models, SsmKeysModelResolver)
    # the worker looks for interrupt marks (set by another Lambda) between flushes
    assert (rt.turns.cancel_poll_s, rt.turns.flush_s) == (0.25, 0.1)
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    # the keys are read on first use only (through Powertools Parameters, which wraps the error)
    with pytest.raises(GetParameterError, match="network I/O"):
        rt.models.resolve(None)


def test_missing_required_setting_names_the_variable_to_set():
    with pytest.raises(RuntimeError, match="AVM_QUEUE_URL, AVM_TABLE_NAME"):
        aws_runtime(Settings(ws_endpoint=AWS_SETTINGS["ws_endpoint"]), require=("queue_url", "ws_endpoint"))


def test_port_of_a_setting_the_function_was_not_given_fails_loudly(no_network):
    rt = aws_runtime(Settings(table_name="agentvm-test"))  # what $connect gets
    assert isinstance(rt.queue, NotConfigured) and isinstance(rt.push, NotConfigured)
    job = TurnJob(
        turnId="turn_1",
        tenantId="t",
        containerId="c",
        imageId="i",
        sessionId="s",
        agentId="a",
        userMessageId="m",
        requestId="r",
        enqueuedAt=0,
    )
    with pytest.raises(RuntimeError, match="AVM_QUEUE_URL"):
        run_sync(rt.queue.enqueue(job))
    with pytest.raises(RuntimeError, match="AVM_WS_ENDPOINT"):
        run_sync(rt.push.send("conn", "{}"))


class CountingSsm:
    def __init__(self, client: object) -> None:
        self.client = client
        self.calls = 0

    def get_parameter(self, **kwargs: object) -> dict:
        self.calls += 1
        return self.client.get_parameter(**kwargs)


@pytest.fixture
def ssm():
    with mock_aws():
        client = boto3.client("ssm", region_name="us-east-1")
        yield client


def _put(ssm, value: str) -> CountingSsm:
    ssm.put_parameter(Name=PARAMETER, Value=value, Type="SecureString")
    return CountingSsm(ssm)


def test_provider_keys_are_read_once_when_a_model_is_first_resolved(ssm):
    counting = _put(ssm, json.dumps({"ANTHROPIC_API_KEY": SECRET, "UNKNOWN_THING": "x"}))
    resolver = SsmKeysModelResolver(_settings(provider_keys_parameter=PARAMETER), ssm_client=counting)
    assert counting.calls == 0
    _, name, ref = resolver.resolve(None)  # the default follows the configured key
    assert (name, ref) == ("claude-haiku-4-5", "anthropic/claude-haiku-4-5")
    resolver.resolve("echo/echo-1")
    assert counting.calls == 1
    with pytest.raises(BadRequest, match="not configured"):  # no OpenAI key in the parameter
        resolver.resolve("openai/gpt-4o-mini")


def test_a_rotated_provider_key_is_used_after_the_ttl_without_a_redeploy(ssm):
    counting = _put(ssm, json.dumps({"ANTHROPIC_API_KEY": SECRET}))
    cached = SsmKeysModelResolver(_settings(provider_keys_parameter=PARAMETER), ssm_client=counting)
    fresh = SsmKeysModelResolver(
        _settings(provider_keys_parameter=PARAMETER, provider_keys_ttl_s=0), ssm_client=counting
    )
    before = [r.resolve("anthropic/claude-haiku-4-5")[0] for r in (cached, fresh)]
    ssm.put_parameter(
        Name=PARAMETER,
        Value=json.dumps({"ANTHROPIC_API_KEY": SECRET + "-rotated"}),
        Type="SecureString",
        Overwrite=True,
    )
    calls = counting.calls
    # within the TTL (300 s): the cached value, no SSM read, the same client
    assert cached.resolve("anthropic/claude-haiku-4-5")[0] is before[0]
    # past it (here: a TTL of 0): read again, the new key seen, the clients rebuilt with it
    after = fresh.resolve("anthropic/claude-haiku-4-5")[0]
    assert counting.calls == calls + 1
    assert after is not before[1]
    key = fresh._loaded()._settings.anthropic_api_key
    assert key is not None and key.get_secret_value() == SECRET + "-rotated"
    # the same value read again: nothing rebuilt
    assert fresh.resolve("anthropic/claude-haiku-4-5")[0] is after


def test_without_a_keys_parameter_only_keyless_providers_resolve(ssm):
    resolver = SsmKeysModelResolver(_settings(), ssm_client=CountingSsm(ssm))
    assert resolver.resolve(None)[2] == "echo/echo-1"
    with pytest.raises(BadRequest):
        resolver.resolve("anthropic/claude-haiku-4-5")


def test_provider_key_values_are_never_logged(ssm, caplog):
    counting = _put(ssm, json.dumps({"ANTHROPIC_API_KEY": SECRET, "NOT_A_SETTING": SECRET}))
    with caplog.at_level(logging.DEBUG, logger="agentvm"):
        SsmKeysModelResolver(_settings(provider_keys_parameter=PARAMETER), ssm_client=counting).resolve(None)
    # Ours only: botocore's own DEBUG lines print response bodies, the decrypted value included
    # (the Lambda runtime's root logger stays at WARNING).
    ours = [r for r in caplog.records if r.name.startswith("agentvm")]
    text = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in ours)
    assert "ANTHROPIC_API_KEY" in text and "NOT_A_SETTING" in text  # names, for operators
    assert SECRET not in text


@pytest.mark.parametrize("value", [SECRET, json.dumps([SECRET]), json.dumps({"ANTHROPIC_API_KEY": [SECRET]})])
def test_unusable_parameter_errors_do_not_quote_it(ssm, value):
    resolver = SsmKeysModelResolver(_settings(provider_keys_parameter=PARAMETER), ssm_client=_put(ssm, value))
    with pytest.raises(RuntimeError) as raised:
        resolver.resolve(None)
    assert SECRET not in str(raised.value) and raised.value.__cause__ is None


# -- security: API keys, budgets and rate limits on the table; the server secret from SSM ----------

AUTH_PARAMETER = "/agentvm/test/auth-secret"
AUTH_SECRET = "aws-runtime-test-server-secret-0123456789abcdef"
OLD_SECRET = "aws-runtime-test-previous-secret-0123456789abcd"


def _put_secret(ssm, value: dict | str) -> CountingSsm:
    ssm.put_parameter(
        Name=AUTH_PARAMETER, Value=value if isinstance(value, str) else json.dumps(value), Type="SecureString"
    )
    return CountingSsm(ssm)


def test_aws_runtime_attaches_security_on_the_table_without_reading_the_secret(no_network):
    from agentvm.adapters.aws.dynamodb.budgets import DynamoDbBudgetStore
    from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
    from agentvm.adapters.aws.dynamodb.keys import DynamoDbKeyStore
    from agentvm.security.setup import LazyServerSecrets

    rt = aws_runtime(
        _settings(
            auth_secret_parameter=AUTH_PARAMETER, key_cache_s=12, rate_limit_per_minute=7, rate_lease_max=3
        )
    )
    assert rt.auth is not None and rt.budgets is not None and rt.rate_limiter is not None
    assert isinstance(rt.auth.keys.store, DynamoDbKeyStore) and rt.auth.cache_s == 12
    assert isinstance(rt.budgets.store, DynamoDbBudgetStore)
    assert isinstance(rt.budgets._counters, DynamoDbCounters) and rt.rate_limiter.per_minute == 7
    assert rt.rate_limiter.lease_max == 3
    assert isinstance(rt.auth.keys.secrets, LazyServerSecrets)
    with pytest.raises(AssertionError, match="network I/O"):  # the secret is read on first use only
        rt.auth.keys.secrets.hash("avm_x")


@pytest.mark.parametrize("app", [ws_connect, ws_disconnect])
def test_functions_that_never_verify_tokens_fail_closed_if_they_ever_did(app, no_network):
    # No AVM_AUTH_SECRET_PARAMETER ($connect, $disconnect): still an authenticator, so
    # never an unauthenticated mode; it refuses to check a token, naming the variable to set.
    rt = aws_runtime(_settings(), require=app.REQUIRED_SETTINGS)
    assert rt.auth is not None
    with pytest.raises(RuntimeError, match="AVM_AUTH_SECRET_PARAMETER"):
        run_sync(rt.auth.keys.create("acme", ["client"]))


def test_functions_that_verify_tokens_or_seal_require_the_secret_parameter():
    # the turn worker seals the ids of MCP tasks its turns wait on (turns/mcp_tasks.py)
    for app in (ws_authorizer, ws_default, http_api, turn_worker):
        with pytest.raises(RuntimeError, match="AVM_AUTH_SECRET_PARAMETER"):
            aws_runtime(_settings(), require=app.REQUIRED_SETTINGS)


def test_the_server_secret_is_read_once_on_first_use(ssm):
    from agentvm.hosts.aws import aws_security
    from agentvm.runtime import SystemClock

    counting = _put_secret(ssm, {"AVM_AUTH_SECRET": AUTH_SECRET})
    settings = _settings(auth_secret_parameter=AUTH_PARAMETER)
    DynamoDbStore(settings.table_name).create_table(wait=True)
    auth = aws_security(settings, SystemClock(), ssm_client=counting).auth
    assert auth is not None and counting.calls == 0
    _, token = run_sync(auth.keys.create("acme", ["client"]))
    principal = run_sync(auth.authenticate(token))
    assert (principal.tenant_id, counting.calls) == ("acme", 1)

    # Another function (same parameter, so the same secret) verifies the same token.
    other = aws_security(settings, SystemClock(), ssm_client=counting).auth
    assert run_sync(other.authenticate(token)).key_id == principal.key_id and counting.calls == 2


def test_keys_survive_a_rotation_through_the_parameter(ssm):
    from agentvm.errors import Unauthorized
    from agentvm.hosts.aws import aws_security
    from agentvm.runtime import SystemClock

    def put(value: dict) -> None:
        ssm.put_parameter(Name=AUTH_PARAMETER, Value=json.dumps(value), Type="SecureString", Overwrite=True)

    def auth():  # a function's authenticator after a deploy (a fresh read of the parameter)
        return aws_security(settings, SystemClock(), ssm_client=ssm).auth

    settings = _settings(auth_secret_parameter=AUTH_PARAMETER, key_cache_s=0)
    DynamoDbStore(settings.table_name).create_table(wait=True)
    put({"AVM_AUTH_SECRET": OLD_SECRET})
    used, used_token = run_sync(auth().keys.create("acme", ["client"]))
    _, unused_token = run_sync(auth().keys.create("acme", ["client"]))

    put({"AVM_AUTH_SECRET": AUTH_SECRET, "AVM_AUTH_SECRET_PREVIOUS": OLD_SECRET})  # rotating
    rotating = auth()
    assert run_sync(rotating.authenticate(used_token)).key_id == used.keyId  # re-hashed on this use
    assert run_sync(rotating.keys.store.get_key(used.keyId)).secretId == rotating.keys.secrets.current_id

    put({"AVM_AUTH_SECRET": AUTH_SECRET})  # rotation over
    rotated = auth()
    assert run_sync(rotated.authenticate(used_token)).key_id == used.keyId
    with pytest.raises(Unauthorized):  # not used while rotating: still hashed under the old secret
        run_sync(rotated.authenticate(unused_token))


@pytest.mark.parametrize(
    "value",
    [
        AUTH_SECRET,  # not JSON
        json.dumps([AUTH_SECRET]),
        json.dumps({"AVM_AUTH_SECRET": [AUTH_SECRET]}),
        json.dumps({"AVM_AUTH_SECRET_PREVIOUS": AUTH_SECRET}),  # no current secret
        json.dumps({"AVM_AUTH_SECRET": AUTH_SECRET[:20]}),  # too short
    ],
)
def test_unusable_secret_parameter_fails_closed_without_quoting_it(ssm, value, caplog):
    from agentvm.hosts.aws import ssm_server_secrets

    _put_secret(ssm, value)
    with (
        caplog.at_level(logging.DEBUG, logger="agentvm"),
        pytest.raises((RuntimeError, ValueError)) as raised,
    ):
        ssm_server_secrets(AUTH_PARAMETER, ssm_client=ssm)
    assert AUTH_SECRET[:20] not in str(raised.value) and raised.value.__cause__ is None
    assert AUTH_SECRET[:20] not in caplog.text


def test_the_server_secret_is_never_logged(ssm, caplog):
    from agentvm.hosts.aws import ssm_server_secrets

    _put_secret(
        ssm, {"AVM_AUTH_SECRET": AUTH_SECRET, "AVM_AUTH_SECRET_PREVIOUS": OLD_SECRET, "EXTRA": AUTH_SECRET}
    )
    with caplog.at_level(logging.DEBUG, logger="agentvm"):
        secrets = ssm_server_secrets(AUTH_PARAMETER, ssm_client=ssm)
    ours = [r for r in caplog.records if r.name.startswith("agentvm")]
    text = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in ours)
    assert "AVM_AUTH_SECRET" in text and "EXTRA" in text  # names, for operators
    assert AUTH_SECRET not in text and OLD_SECRET not in text
    assert AUTH_SECRET not in repr(secrets) and secrets.previous_id is not None


def test_lambda_entry_builds_from_the_environment_once(monkeypatch, load_event, context):
    with mock_aws():
        DynamoDbStore("agentvm-entry").create_table(wait=True)
        monkeypatch.setenv("AVM_TABLE_NAME", "agentvm-entry")
        builds = []

        def build(rt):
            builds.append(rt)
            return ws_connect.build_handler(rt)

        entry = LambdaEntry(build, require=ws_connect.REQUIRED_SETTINGS)
        event = load_event("apigw-ws-connect-authorizer.json")
        assert entry(event, context) == {"statusCode": 200}
        assert entry(event, context) == {"statusCode": 200}
        assert len(builds) == 1  # the second invocation reused the runtime and its clients
        info = run_sync(DynamoDbConnections("agentvm-entry").get(event["requestContext"]["connectionId"]))
        assert info is not None and (info.tenant_id, info.key_id) == ("tenant-acme", "k7q2m9x4a1b3")


def test_lambda_lines_leave_out_what_cloudwatch_stores_and_keep_the_request_ids(
    monkeypatch, load_event, context, powertools_logs, parse_json_lines
):
    with mock_aws():
        DynamoDbStore("agentvm-entry").create_table(wait=True)
        monkeypatch.setenv("AVM_TABLE_NAME", "agentvm-entry")
        entry = LambdaEntry(
            ws_connect.build_handler, require=ws_connect.REQUIRED_SETTINGS, logger=ws_connect.logger
        )
        event = load_event("apigw-ws-connect-authorizer.json")
        assert entry(event, context) == {"statusCode": 200}
        ws_connect.logger.warning("a warning", extra={"_aws": {"Timestamp": 1}})
        ws_connect.logger.info("a plain line")
    connected, warning, plain = parse_json_lines(powertools_logs.getvalue())[-3:]
    assert plain["message"] == "a plain line" and not {"service", "location", "timestamp"} & set(plain)
    assert connected["message"] == "connected" and warning["message"] == "a warning"
    # the log stream names the function; the event has its own timestamp; REPORT has the memory
    for line in (connected, warning):
        assert not {"timestamp", "cold_start", "function_name", "function_arn", "function_memory_size"} & set(
            line
        )
    # what an operator correlates: Lambda's REPORT line, API Gateway's request
    assert connected["function_request_id"] == context.aws_request_id
    assert connected["correlation_id"] == event["requestContext"]["requestId"]
    assert (connected["level"], connected["connection_id"], connected["tenant_id"]) == (
        "INFO",
        "Q3xYzfGIoAMCJqg=",
        "tenant-acme",
    )
    assert "location" not in connected
    # the service stays only on a line that carries an EMF document (it is the metrics' dimension)
    assert connected["ConnectionsOpened"] == 1 and "service" in connected
    # a warning keeps its code location; a line carrying an EMF document keeps its dimension
    assert warning["location"].startswith("test_lambda_lines_") and "service" in warning


def test_lambda_entry_builds_in_lambdas_init_phase(monkeypatch):
    with mock_aws():
        monkeypatch.setenv("AVM_TABLE_NAME", "agentvm-entry")
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentvm-WsConnectFunction-Q1w2E3r4")
        builds = []
        LambdaEntry(builds.append, require=ws_connect.REQUIRED_SETTINGS)  # the module import
        assert len(builds) == 1  # before any event: init work stays off the first request


def test_lambda_entry_without_its_settings_fails_at_the_first_invocation(monkeypatch, load_event, context):
    monkeypatch.delenv("AVM_TABLE_NAME", raising=False)
    entry = LambdaEntry(ws_connect.build_handler, require=ws_connect.REQUIRED_SETTINGS)  # importing is fine
    with pytest.raises(RuntimeError, match="AVM_TABLE_NAME"):
        entry(load_event("apigw-ws-connect.json"), context)


def test_run_sync_reuses_one_open_loop_across_invocations():
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first, second = run_sync(current()), run_sync(current())
    assert first is second and not first.is_closed()
