"""``ApiGatewayPush``: posts on moto's ``@connections`` API; error handling through botocore's Stubber.

moto accepts a post to any connection id and never answers 410, so ``GoneException`` and
``LimitExceededException`` are produced with ``botocore.stub.Stubber`` on a real client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends
from moto.core import DEFAULT_ACCOUNT_ID

from agentvm.adapters.aws.apigw_push import BILLING_UNIT_BYTES, ApiGatewayPush
from agentvm.errors import ConnectionGone

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.aws

REGION = "us-east-1"
ENDPOINT = f"https://abc123.execute-api.{REGION}.amazonaws.com/prod"


@pytest.fixture
def posted() -> Iterator[dict[str, Any]]:
    """moto's connections, by id: each holds the concatenation of the bytes posted to it."""
    with mock_aws():
        yield apigatewaymanagementapi_backends[DEFAULT_ACCOUNT_ID][REGION].connections


@pytest.fixture
def stubbed() -> Iterator[tuple[ApiGatewayPush, Stubber]]:
    client = boto3.client("apigatewaymanagementapi", endpoint_url=ENDPOINT, region_name=REGION)
    with Stubber(client) as stubber:
        yield ApiGatewayPush(ENDPOINT, client=client, backoff_s=0.0), stubber
        stubber.assert_no_pending_responses()


def post_params(connection_id: str, payload: str) -> dict[str, Any]:
    return {"ConnectionId": connection_id, "Data": payload.encode()}


async def test_send_posts_the_utf8_payload_to_the_connection(posted: dict[str, Any]) -> None:
    push = ApiGatewayPush(ENDPOINT)

    await push.send("conn-1", '{"type":"text_delta","data":{"text":"héllo ✓"}}')
    await push.send("conn-2", "{}")

    assert posted["conn-1"].data == '{"type":"text_delta","data":{"text":"héllo ✓"}}'.encode()
    assert posted["conn-2"].data == b"{}"


async def test_posts_and_billed_32kb_units_are_counted(posted: dict[str, Any]) -> None:
    push = ApiGatewayPush(ENDPOINT)

    await push.send("conn-1", "x")  # 1 unit
    await push.send("conn-1", "y" * BILLING_UNIT_BYTES)  # exactly 32 KB: 1 unit
    await push.send("conn-1", "z" * (BILLING_UNIT_BYTES * 2 + 1))  # just over 64 KB: 3 units

    assert push.posts == 3
    assert push.billed_messages == 5


async def test_a_gone_connection_raises_connection_gone(stubbed: tuple[ApiGatewayPush, Stubber]) -> None:
    push, stubber = stubbed
    stubber.add_client_error(
        "post_to_connection",
        service_error_code="GoneException",
        http_status_code=410,
        expected_params=post_params("conn-1", "{}"),
    )

    with pytest.raises(ConnectionGone) as raised:
        await push.send("conn-1", "{}")

    assert isinstance(raised.value.__cause__, ClientError)
    assert push.posts == 0
    assert push.billed_messages == 0


async def test_limit_exceeded_is_retried_until_the_post_goes_through(
    stubbed: tuple[ApiGatewayPush, Stubber],
) -> None:
    push, stubber = stubbed
    for _ in range(2):
        stubber.add_client_error(
            "post_to_connection", service_error_code="LimitExceededException", http_status_code=429
        )
    stubber.add_response("post_to_connection", {}, post_params("conn-1", "{}"))

    await push.send("conn-1", "{}")

    assert push.posts == 1  # the two throttled attempts delivered nothing


async def test_limit_exceeded_on_every_attempt_propagates_after_three_posts(
    stubbed: tuple[ApiGatewayPush, Stubber],
) -> None:
    push, stubber = stubbed
    for _ in range(3):
        stubber.add_client_error(
            "post_to_connection", service_error_code="LimitExceededException", http_status_code=429
        )

    with pytest.raises(ClientError) as raised:
        await push.send("conn-1", "{}")

    assert raised.value.response["Error"]["Code"] == "LimitExceededException"
    assert push.posts == 0


async def test_other_errors_propagate_without_a_retry(stubbed: tuple[ApiGatewayPush, Stubber]) -> None:
    push, stubber = stubbed
    stubber.add_client_error(
        "post_to_connection", service_error_code="PayloadTooLargeException", http_status_code=413
    )

    with pytest.raises(ClientError) as raised:
        await push.send("conn-1", "{}")

    assert raised.value.response["Error"]["Code"] == "PayloadTooLargeException"
