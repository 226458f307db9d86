"""template.yaml and the code agree: environment, permissions, queue timing, layer contents."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.keys import key_pk
from agentvm.config import Settings
from agentvm.hosts.aws import LambdaEntry

ROOT = Path(__file__).resolve().parents[2]

# Variables the template may set that are not Settings fields: read by Powertools itself.
POWERTOOLS_VARIABLES = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"}
# Functions whose runtime resolves models: the worker runs turns; ws_default checks an image's
# model when one is named (image_create / image_update); the HTTP API embeds knowledge (publish, search).
MODEL_USERS = {
    "ws_default",
    "turn_worker",
    "http_api",
    "schedule_sweeper",
}  # the HTTP API: knowledge embeddings
# (the schedule sweeper: a run with sessionPolicy "new" makes an image, which checks its model)
# Functions that verify API tokens, so read the server secret: the $connect authorizer, ws_default
# (`auth` frames) and the HTTP API (bearer tokens). $connect, $disconnect and the worker never do.
AUTH_USERS = {"ws_authorizer", "ws_default", "http_api"}
# ...and the webhook sender, which opens the endpoints' signing secrets, sealed under a key derived
# from the server secret (docs/webhooks.md, "Secrets").
# the turn worker and the wait sweeper seal and open the ids of MCP tasks turns wait on (docs/mcp.md)
SECRET_READERS = AUTH_USERS | {"webhook_sender", "turn_worker", "wait_sweeper"}
FUNCTIONS = [
    "ws_authorizer",
    "ws_connect",
    "ws_disconnect",
    "ws_default",
    "http_api",
    "turn_worker",
    "wait_sweeper",
    "schedule_sweeper",
    "sandbox_worker",
    "webhook_sender",
]


def _environment(template: dict[str, Any], fn: dict[str, Any]) -> dict[str, Any]:
    variables = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    variables.update(fn["Properties"].get("Environment", {}).get("Variables", {}))
    return variables


def _statements(fn: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for p in fn["Properties"].get("Policies", []) if "Statement" in p for s in p["Statement"]]


def _policy_templates(fn: dict[str, Any]) -> set[str]:
    return {key for p in fn["Properties"].get("Policies", []) for key in p if key.endswith("Policy")}


def _setting(variable: str) -> str | None:
    field = variable.removeprefix("AVM_").lower()
    return field if variable.startswith("AVM_") and field in Settings.model_fields else None


def test_template_declares_every_function(functions):
    assert set(functions) == set(FUNCTIONS)
    for name, fn in functions.items():
        assert (ROOT / fn["Properties"]["CodeUri"] / "app.py").is_file()
        assert fn["Properties"]["Handler"] == "app.lambda_handler"
        assert isinstance(importlib.import_module(f"functions.{name}.app").lambda_handler, LambdaEntry)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_environment_variable_is_a_setting_or_a_powertools_variable(template, functions, name):
    for variable in _environment(template, functions[name]):
        assert _setting(variable) or variable in POWERTOOLS_VARIABLES, (
            f"{name}: {variable} is read by nothing"
        )
        secret_like = "KEY" in variable or "SECRET" in variable
        assert not secret_like or variable.endswith("_PARAMETER"), "secrets never go in the template"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_value_the_template_gives_from_a_parameter_default_or_a_literal_parses_as_its_setting(
    template, functions, name
):
    parameters = template.get("Parameters", {})
    given: dict[str, Any] = {}
    for variable, value in _environment(template, functions[name]).items():
        field = _setting(variable)
        ref = value.get("Ref") if isinstance(value, dict) else None
        if field is None or (ref is not None and ref not in parameters):
            continue  # a Powertools variable, or a resource's name or ARN (known only when deployed)
        if ref is not None:
            if "Default" not in parameters[ref]:
                continue
            value = parameters[ref]["Default"]
        if isinstance(value, (str, int, float, bool)):
            given[field] = str(value)
    Settings.model_validate(given)  # e.g. a millisecond setting given a parameter that is not a number


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_cold_start_measurement_gives_each_function_settings_that_parse(name):
    spec = importlib.util.spec_from_file_location("measure_imports", ROOT / "scripts" / "measure_imports.py")
    assert spec is not None and spec.loader is not None
    measure_imports = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure_imports)
    env = measure_imports.lambda_environment(name)
    Settings.model_validate({_setting(k): v for k, v in env.items() if _setting(k)})


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_setting_a_function_requires_is_given_to_it(template, functions, name):
    required = importlib.import_module(f"functions.{name}.app").REQUIRED_SETTINGS
    given = {_setting(v) for v in _environment(template, functions[name])}
    assert set(required) <= given
    if name in MODEL_USERS:
        assert {"default_model", "provider_keys_parameter"} <= given
    else:  # only the functions that resolve models may read the provider keys
        assert "provider_keys_parameter" not in given
    # the functions that verify tokens cannot start without the secret's parameter; no other gets it
    assert (
        ("auth_secret_parameter" in given)
        == ("auth_secret_parameter" in required)
        == (name in SECRET_READERS)
    )


def test_only_functions_that_post_may_manage_connections(template, functions):
    for name, fn in functions.items():
        posts = "AVM_WS_ENDPOINT" in _environment(template, fn)
        grants = [s for s in _statements(fn) if s["Action"] == "execute-api:ManageConnections"]
        assert bool(grants) == posts, name
        for grant in grants:
            arn, variables = grant["Resource"]["Fn::Sub"]
            assert arn.endswith("/${Stage}/POST/@connections/*"), "POST to connections only, one stage"
            assert variables["Stage"] == {"Fn::FindInMap": ["WebSocket", "Stage", "Name"]}
    assert {n for n, fn in functions.items() if "AVM_WS_ENDPOINT" in _environment(template, fn)} == {
        "ws_default",
        "turn_worker",
        "wait_sweeper",  # an MCP task's progress while its turn waits
    }


def test_only_the_functions_that_enqueue_may_send_to_a_queue(template, functions):
    # The turn queue: ws_default (turns, and continuations after an answer), http_api (/mcp tool
    # calls' turns), the sweeper and the sandbox worker (continuations), the schedule sweeper
    # (schedules' runs). The sandbox queue: the turn worker (jobs).
    senders = {
        "TurnQueue": {"ws_default", "http_api", "wait_sweeper", "sandbox_worker", "schedule_sweeper"},
        "SandboxQueue": {"turn_worker"},
    }
    variables = {"TurnQueue": "AVM_QUEUE_URL", "SandboxQueue": "AVM_SANDBOX_QUEUE_URL"}
    for name, fn in functions.items():
        sends = {
            p["SQSSendMessagePolicy"]["QueueName"]["Fn::GetAtt"][0]
            for p in fn["Properties"].get("Policies", [])
            if "SQSSendMessagePolicy" in p
        }
        environment = _environment(template, fn)
        for queue, allowed in senders.items():
            assert (queue in sends) == (variables[queue] in environment) == (name in allowed), (name, queue)
        # the authorizer reads API keys only (test_the_authorizer_reads_api_key_items_only)
        assert ("DynamoDBCrudPolicy" in _policy_templates(fn)) == (name != "ws_authorizer"), name


def test_provider_keys_are_readable_only_by_the_model_users(template, functions):
    for name, fn in functions.items():
        conditional = [
            p["Fn::If"] for p in fn["Properties"].get("Policies", []) if isinstance(p, dict) and "Fn::If" in p
        ]
        reads_keys = [c for c in conditional if c[1] == {"Ref": "ProviderKeysReadPolicy"}]
        assert bool(reads_keys) == (name in MODEL_USERS), name
    policy = template["Resources"]["ProviderKeysReadPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    actions = {s["Action"] for s in policy}
    assert actions == {"ssm:GetParameter", "kms:Decrypt"}
    decrypt = next(s for s in policy if s["Action"] == "kms:Decrypt")
    assert "kms:EncryptionContext:PARAMETER_ARN" in decrypt["Condition"]["StringEquals"]


def test_the_auth_secret_is_readable_only_by_the_functions_that_verify_tokens_or_open_secrets(
    template, functions
):
    for name, fn in functions.items():
        reads = {"Ref": "AuthSecretReadPolicy"} in fn["Properties"].get("Policies", [])
        assert reads == (name in SECRET_READERS), name
        variable = _environment(template, fn).get("AVM_AUTH_SECRET_PARAMETER")
        assert variable == ({"Ref": "AuthSecretParameterName"} if name in SECRET_READERS else None), name
    policy = template["Resources"]["AuthSecretReadPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert {s["Action"] for s in policy} == {"ssm:GetParameter", "kms:Decrypt"}
    (read,) = [s for s in policy if s["Action"] == "ssm:GetParameter"]
    assert read["Resource"]["Fn::Sub"].endswith(":parameter${AuthSecretParameterName}")  # that one only
    decrypt = next(s for s in policy if s["Action"] == "kms:Decrypt")
    context = decrypt["Condition"]["StringEquals"]["kms:EncryptionContext:PARAMETER_ARN"]
    assert context["Fn::Sub"].endswith(":parameter${AuthSecretParameterName}")
    parameter = template["Parameters"]["AuthSecretParameterName"]
    assert parameter["Type"] == "String" and re.fullmatch(parameter["AllowedPattern"], "/agentvm/auth-secret")
    assert not re.fullmatch(parameter["AllowedPattern"], ""), "the secret is not optional"


def test_the_authorizer_reads_api_key_items_only(functions):
    (statement,) = _statements(functions["ws_authorizer"])
    # GetItem to verify; PutItem to re-hash a key under a rotated secret. Nothing else, and only
    # items whose partition key is an API key's.
    assert sorted(statement["Action"]) == ["dynamodb:GetItem", "dynamodb:PutItem"]
    assert statement["Resource"] == {"Fn::GetAtt": ["Table", "Arn"]}
    assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*"]}}
    assert key_pk("k0000000000a").startswith("APIKEY#")  # the partition key the store uses


def test_connect_route_is_guarded_by_the_api_key_authorizer(template):
    resources = template["Resources"]
    route = resources["ConnectRoute"]["Properties"]
    assert route["AuthorizationType"] == "CUSTOM" and route["AuthorizerId"] == {"Ref": "ConnectAuthorizer"}
    authorizer = resources["ConnectAuthorizer"]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert "${WsAuthorizerFunction.Arn}" in authorizer["AuthorizerUri"]["Fn::Sub"]
    # No identity sources: API Gateway would refuse credential-less (browser) upgrades by itself,
    # before they could send an `auth` frame.
    assert "IdentitySource" not in authorizer
    permission = next(
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Ref": "WsAuthorizerFunction"}
    )
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["SourceArn"]["Fn::Sub"].endswith("${WebSocketApi}/authorizers/${ConnectAuthorizer}")
    # only $connect can carry an authorizer; the other routes are reached by connected sockets only
    for name in ("DisconnectRoute", "DefaultRoute"):
        assert resources[name]["Properties"].get("AuthorizationType", "NONE") == "NONE"


def test_the_stage_deploys_a_snapshot_taken_after_every_route_and_the_authorizer(template):
    resources = template["Resources"]
    deployment = resources["WebSocketStage"]["Properties"]["DeploymentId"]["Ref"]
    routes = {n for n, r in resources.items() if r["Type"] == "AWS::ApiGatewayV2::Route"}
    authorizers = {n for n, r in resources.items() if r["Type"] == "AWS::ApiGatewayV2::Authorizer"}
    assert set(resources[deployment]["DependsOn"]) == routes | authorizers


def test_service_name_makes_the_powertools_logger_the_cores_parent(template):
    # hosts.aws.LambdaEntry relies on it: the core logs through agentvm.* stdlib loggers.
    assert template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "agentvm"


def test_worker_batches_and_reports_partial_failures(template, functions):
    worker = functions["turn_worker"]["Properties"]
    sqs = next(e for e in worker["Events"].values() if e["Type"] == "SQS")["Properties"]
    assert sqs["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 < sqs["BatchSize"] <= 10  # FIFO's maximum
    assert "POWERTOOLS_METRICS_NAMESPACE" in template["Globals"]["Function"]["Environment"]["Variables"]
    queue = template["Resources"]["TurnQueue"]["Properties"]
    # Lambda's guidance for SQS sources: visibility timeout >= 6x the function timeout.
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    assert queue["FifoQueue"] is True
    dlq = template["Resources"][queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]]
    assert dlq["Properties"]["FifoQueue"] is True


def test_table_matches_the_fixed_schema(template):
    table = template["Resources"]["Table"]["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]] == [
        ("pk", "HASH"),
        ("sk", "RANGE"),
    ]
    # gsi1, and the sparse gsi2 of usage records by hour (dynamodb_usage): as create_table builds them
    assert [gsi["IndexName"] for gsi in table["GlobalSecondaryIndexes"]] == ["gsi1", "gsi2"]
    for gsi in table["GlobalSecondaryIndexes"]:
        name = gsi["IndexName"]
        assert gsi["Projection"] == {"ProjectionType": "ALL"}
        assert [(k["AttributeName"], k["KeyType"]) for k in gsi["KeySchema"]] == [
            (f"{name}pk", "HASH"),
            (f"{name}sk", "RANGE"),
        ]
    assert {a["AttributeName"] for a in table["AttributeDefinitions"]} == {
        "pk",
        "sk",
        "gsi1pk",
        "gsi1sk",
        "gsi2pk",
        "gsi2sk",
    }
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def _requirements() -> dict[str, str]:
    lines = (ROOT / "layers/deps/requirements.txt").read_text().splitlines()
    pins = [line.split("#")[0].strip() for line in lines]
    return dict(pin.split("==") for pin in pins if pin)


def test_deps_layer_pins_the_versions_the_tests_run_against():
    pins = _requirements()
    for package, version in pins.items():
        assert importlib.metadata.version(package) == version, (
            f"bump {package} in layers/deps/requirements.txt"
        )
    assert not {"uvicorn", "websockets", "pytest", "moto"} & set(pins), "local-only packages in the layer"


def _locked() -> dict[str, tuple[str, int]]:
    """requirements.lock as {package: (version, number of hashes)}."""
    locked: dict[str, tuple[str, int]] = {}
    package = ""
    for line in (ROOT / "layers/deps/requirements.lock").read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line):
            package = match[1].lower()
            locked[package] = (match[2], 0)
        elif line.strip().startswith("--hash=sha256:"):
            version, hashes = locked[package]
            locked[package] = (version, hashes + 1)
    return locked


def test_deps_layer_lock_holds_every_pin_at_its_version_with_hashes():
    locked = _locked()
    for package, version in _requirements().items():
        assert locked.get(package.lower(), ("missing", 0))[0] == version, (
            f"{package} {version} in requirements.txt: regenerate layers/deps/requirements.lock (its header)"
        )
    assert all(hashes for _, hashes in locked.values()), "a locked package without a hash"
    assert len(locked) > len(_requirements())  # the transitive packages are locked too


def test_the_test_venv_runs_the_layers_locked_versions():
    """./dev installs the lock as constraints: every locked package the venv has is that version."""
    differ = {}
    for package, (version, _) in _locked().items():
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
        if installed != version:
            differ[package] = (version, installed)
    assert not differ, f"locked vs installed (run ./dev to reinstall): {differ}"


def test_deps_layer_has_what_the_handlers_import():
    pins = set(_requirements())
    needed = {"pydantic", "pydantic-settings", "fastapi", "mangum", "pynamodb", "aws-lambda-powertools"}
    assert needed <= pins
    # Provider SDKs too: the worker imports them lazily, when an image first uses the provider.
    assert {"anthropic", "openai"} <= pins
    # The HTTP API's /a2a (api/a2a.py) imports the A2A SDK on its first request.
    assert "a2a-sdk" in pins


def test_layers_are_built_by_make_with_compiled_bytecode(template):
    for name in ("DepsLayer", "AgentvmLayer"):
        layer = template["Resources"][name]
        assert layer["Metadata"]["BuildMethod"] == "makefile"
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
        folder = ROOT / layer["Metadata"].get("ContextPath", layer["Properties"]["ContentUri"])
        makefile = (folder / "Makefile").read_text()
        assert re.search(rf"^build-{name}:", makefile, re.MULTILINE)
        # Lambda's code is read-only: without .pyc files every cold start compiles every import.
        assert "compileall" in makefile and "unchecked-hash" in makefile
    deps = (ROOT / template["Resources"]["DepsLayer"]["Properties"]["ContentUri"] / "Makefile").read_text()
    assert "manylinux2014_aarch64" in deps and "--only-binary=:all:" in deps
    agentvm = template["Resources"]["AgentvmLayer"]["Properties"]["ContentUri"]
    assert (ROOT / agentvm / "agentvm" / "__init__.py").is_file()


def test_the_turn_deadline_the_worker_timeout_and_the_queue_visibility_agree(template, functions):
    worker = functions["turn_worker"]["Properties"]
    queue = template["Resources"]["TurnQueue"]["Properties"]
    deadline = float(worker["Environment"]["Variables"]["AVM_TURN_DEADLINE_S"])
    # The turn stops itself with time left to persist and send its end before Lambda kills it,
    # and SQS does not hand the job to another worker while this one may still run it.
    assert 0 < deadline <= worker["Timeout"] - 30
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]


def test_only_the_functions_that_record_or_replay_webhook_deliveries_may_wake_the_sender(template, functions):
    # the turn worker records turns' events, the HTTP API replays deliveries (docs/webhooks.md)
    wakers = {"turn_worker", "http_api"}
    for name, fn in functions.items():
        invokes = [
            p["LambdaInvokePolicy"] for p in fn["Properties"].get("Policies", []) if "LambdaInvokePolicy" in p
        ]
        variable = _environment(template, fn).get("AVM_WEBHOOK_SENDER_FUNCTION")
        assert bool(invokes) == (variable is not None) == (name in wakers), name
        for policy in invokes:
            assert policy == {"FunctionName": {"Ref": "WebhookSenderFunction"}}, "the sender only"
        assert variable in (None, {"Ref": "WebhookSenderFunction"}), name
    sender = functions["webhook_sender"]["Properties"]
    assert "VpcConfig" not in sender, "the sender reaches receivers on the internet: no VPC"
    schedule = sender["Events"]["EveryMinute"]
    assert schedule["Type"] == "ScheduleV2"
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 minute)"


EMBEDDERS = {"http_api", "turn_worker"}  # knowledge publish and search; the worker's knowledge tool


def _conditional_statements(fn: dict[str, Any], condition: str) -> list[dict[str, Any]]:
    out = []
    for policy in fn["Properties"].get("Policies", []):
        branch = policy.get("Fn::If") if isinstance(policy, dict) else None
        if branch and branch[0] == condition:
            assert branch[2] == {"Ref": "AWS::NoValue"}, "without the condition: no statement at all"
            out.extend(branch[1]["Statement"])
    return out


@pytest.mark.parametrize("name", FUNCTIONS)
def test_bedrock_invoke_model_is_granted_only_with_bedrock_access_and_only_on_the_embeddings_model(
    template, functions, name
):
    assert template["Parameters"]["BedrockAccess"]["Default"] == "Disabled"
    assert template["Conditions"]["BedrockEmbeddings"] == {
        "Fn::Equals": [{"Ref": "BedrockAccess"}, "Enabled"]
    }
    fn = functions[name]
    assert not any("bedrock" in str(s.get("Action", "")) for s in _statements(fn)), "never unconditional"
    statements = _conditional_statements(fn, "BedrockEmbeddings")
    if name not in EMBEDDERS:
        assert statements == []
        return
    assert statements == [
        {
            "Effect": "Allow",
            "Action": "bedrock:InvokeModel",
            "Resource": {
                "Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${EmbeddingsModel}"
            },
        }
    ]
    model = _environment(template, fn)["AVM_EMBEDDINGS_MODEL"]["Fn::If"]
    assert model == ["BedrockEmbeddings", {"Fn::Sub": "bedrock/${EmbeddingsModel}"}, {"Ref": "AWS::NoValue"}]
    default = template["Parameters"]["EmbeddingsModel"]["Default"]
    Settings.model_validate({"embeddings_model": f"bedrock/{default}"})


@pytest.mark.parametrize("name", sorted(EMBEDDERS))
def test_with_bedrock_access_the_embedders_build_a_bedrock_embedder_in_their_own_region(
    template, functions, name
):
    """What a deployed function sees with BedrockAccess=Enabled: the template's variables under the
    condition, plus the AWS_REGION every Lambda has; no AVM_BEDROCK_REGION (chat on Bedrock stays off)."""
    from agentvm.adapters.embeddings.bedrock import BedrockEmbedder
    from agentvm.adapters.embeddings.choice import embedder_for

    environment = _environment(template, functions[name])
    assert "AVM_BEDROCK_REGION" not in environment
    default = template["Parameters"]["EmbeddingsModel"]["Default"]
    settings = Settings.model_validate({"embeddings_model": f"bedrock/{default}", "AWS_REGION": "eu-west-3"})
    assert settings.bedrock_region is None
    embedder = embedder_for(settings)
    assert isinstance(embedder, BedrockEmbedder)
    assert embedder._client.meta.region_name == "eu-west-3"  # the boto3 client it calls


def test_the_public_url_parameter_reaches_only_the_http_api_and_only_when_set(template, functions):
    """Behind a custom domain the MCP OAuth redirect URI must name it (docs/mcp.md, "OAuth"); unset,
    the variable is absent, so the request's own base URL is used."""
    import re

    parameter = template["Parameters"]["PublicUrl"]
    assert parameter["Default"] == ""
    assert template["Conditions"]["HasPublicUrl"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "PublicUrl"}, ""]}]}
    for name, fn in functions.items():
        variable = _environment(template, fn).get("AVM_PUBLIC_URL")
        if name != "http_api":
            assert variable is None, name
            continue
        assert variable == {"Fn::If": ["HasPublicUrl", {"Ref": "PublicUrl"}, {"Ref": "AWS::NoValue"}]}
    for allowed in ("https://agents.example.com", "https://agents.example.com:8443/base/"):
        assert re.fullmatch(parameter["AllowedPattern"], allowed)
        assert Settings.model_validate({"public_url": allowed}).public_url == allowed
    for refused in ("http://agents.example.com", "https://agents.example.com/a b", "javascript:alert(1)"):
        assert not re.fullmatch(parameter["AllowedPattern"], refused)
