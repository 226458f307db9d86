"""``scripts/create_admin_key.py`` and ``avm keys|budgets --table``: managing a deployed stack's keys
from an operator's machine, with the functions' own wiring, on moto."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from agentvm.cli.main import main
from agentvm.hosts.aws import event_loop
from tests.functions.aws_stack import AUTH_SECRET, AUTH_SECRET_PARAMETER, TABLE, Stack, moto_resources

pytestmark = pytest.mark.aws

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "create_admin_key.py"


def _script():
    spec = importlib.util.spec_from_file_location("create_admin_key", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def avm(argv: list[str]) -> int:
    """The CLI, in this process. Its ``asyncio.run`` leaves the thread without a current loop; the
    handlers' (Mangum looks it up) is put back, as it is in a Lambda, where no CLI ever runs."""
    try:
        return main(argv)
    finally:
        asyncio.set_event_loop(event_loop())


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def test_the_script_prints_an_admin_token_once_that_the_stack_accepts(stack, monkeypatch, capsys):
    # An operator's shell may hold a local AVM_AUTH_SECRET: it must not be the one that hashes.
    monkeypatch.setenv("AVM_AUTH_SECRET", "a-local-dev-secret-that-is-not-the-stacks-0123")
    args = ["--table", TABLE, "--tenant", "acme", "--secret-parameter", AUTH_SECRET_PARAMETER]
    try:
        code = _script().main([*args, "--region", "us-east-1"])
    finally:
        asyncio.set_event_loop(event_loop())  # as in avm() below
    out, err = capsys.readouterr()
    assert code == 0
    token = out.strip()
    assert token.startswith("avm_") and out.count(token) == 1 and token not in err
    assert "tenant 'acme'" in err and "admin" in err and AUTH_SECRET not in out + err

    status, body = stack.http("GET", "/v1/auth/keys", token)  # the HTTP API function accepts it
    assert status == 200
    [key] = body["keys"]
    assert (key["tenantId"], key["scopes"], key["keyId"]) == ("acme", ["admin"], token.split("_")[1])
    answer = stack.authorize(headers={"Authorization": f"Bearer {token}"})  # so does the authorizer
    assert answer["context"] == {"tenantId": "acme", "keyId": key["keyId"]}


def test_the_cli_lists_and_revokes_keys_and_sets_budgets_on_the_stack(stack, capsys):
    token = stack.new_key("acme", "client")
    key_id = token.split("_")[1]
    on_stack = ["--table", TABLE, "--secret-parameter", AUTH_SECRET_PARAMETER]

    assert avm(["keys", "list", "--tenant", "acme", "--json", *on_stack]) == 0
    [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert listed["keyId"] == key_id and "secretHash" not in listed

    assert avm(["keys", "revoke", key_id, *on_stack]) == 0
    assert stack.authorize(query={"token": token})["policyDocument"]["Statement"][0]["Effect"] == "Deny"

    assert avm(["budgets", "set", "--tenant", "acme", "--daily", "1000", *on_stack]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["tenant"], shown["dailyTokens"], shown["monthlyTokens"]) == ("acme", 1000, None)
    status, body = stack.http("GET", "/v1/budgets/tenant", stack.new_key("acme", "admin"))
    assert status == 200 and body["dailyTokens"] == 1000


def test_a_missing_secret_parameter_is_reported_without_a_traceback(stack, capsys):
    code = avm(["keys", "create", "--tenant", "acme", "--table", TABLE, "--secret-parameter", "/no/such"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("avm: ") and "ParameterNotFound" in err and "Traceback" not in err
