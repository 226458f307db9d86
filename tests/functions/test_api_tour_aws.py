"""Every route of the HTTP API on the AWS host: the tour of ``tests/api_tour.py`` through the real
Lambda handlers on moto (HTTP API handler, WebSocket ``$default``, the turn worker), on DynamoDB,
with workspaces read from S3. Each answer has a documented status, the top-level keys of one of
the documented examples and fits the documented schema, as on the local host
(``tests/unit/api/test_openapi_truth.py``)."""

from __future__ import annotations

import boto3
import pytest

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces
from agentvm.hosts.aws import run_sync
from tests.api_tour import CONTAINER, TENANT, WORKSPACE_FILE, Http, Ws, check_answer, next_step, tour
from tests.functions.aws_stack import REGION, Stack, moto_resources

pytestmark = pytest.mark.aws

BUCKET = "agentvm-tour-workspaces"
CONN = "conn-tour"


@pytest.fixture
def stack(monkeypatch, context, push, tmp_path):
    with moto_resources(monkeypatch) as resources:
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        monkeypatch.setenv("AVM_WORKSPACE_BUCKET", BUCKET)  # the HTTP API reads workspaces there
        local = LocalSandbox(tmp_path / "ws", isolate=False)  # what the sandbox worker pushes
        run_sync(local.write(TENANT, CONTAINER, *WORKSPACE_FILE))
        run_sync(S3Workspaces(BUCKET).push(TENANT, CONTAINER, local.workspace(TENANT, CONTAINER), {}))
        yield Stack(resources, context, push)


def test_every_route_answers_through_the_lambda_handlers_as_documented(stack):
    tokens = {
        "admin": stack.new_key(TENANT, "admin", name="ops"),
        "platform": stack.new_key("platform", "admin"),
    }
    stack.connect(CONN, headers={"Authorization": f"Bearer {tokens['admin']}"})
    status, schema = stack.http("GET", "/openapi.json")
    assert status == 200
    toured: set[tuple[str, str]] = set()
    requests = iter(range(1, 1000))
    steps, answer = tour(), None
    while (step := next_step(steps, answer)) is not None:
        if isinstance(step, Http):
            status, answer = stack.http(
                step.method.upper(), step.url or step.route, tokens[step.caller], step.body
            )
            check_answer(schema, step, status, answer)
            toured.add((step.method, step.route))
        elif isinstance(step, Ws):
            answer = stack.request(CONN, step.type, f"tour-{next(requests)}", **step.data)
            assert "error" not in answer, (step, answer)
        else:
            stack.model.add(step.reply)
            stack.run_turns()
            answer = None
    every = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    assert len(toured) >= 44 and toured <= every
