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


class _StallingEndpoint:
    """A loopback stand-in for the ``@connections`` API: posts to ``stalled`` never get an answer,
    posts to any other connection get 200. A real boto3 client talks to it over HTTP."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.release = threading.Event()
        self.delivered: list[str] = []
        self.stalled_attempts = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length", 0)))
                connection_id = self.path.rsplit("/", 1)[-1]
                if connection_id == "stalled":
                    outer.stalled_attempts += 1
                    outer.release.wait(30)
                    return
                outer.delivered.append(connection_id)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/prod"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


async def test_a_connection_whose_posts_hang_costs_one_timeout_then_is_skipped(monkeypatch) -> None:
    from agentvm.adapters.aws.apigw_push import ConnectionStalled
    from agentvm.adapters.local.memory_connections import InMemoryConnections
    from agentvm.ports import ConnectionInfo
    from agentvm.streaming.fanout import Fanout

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    endpoint = _StallingEndpoint()
    try:
        push = ApiGatewayPush(endpoint.url, read_timeout_s=0.3, connect_timeout_s=0.3)
        connections = InMemoryConnections()
        for conn in ("stalled", "healthy"):
            await connections.register(ConnectionInfo(conn, "acme", 0))
            await connections.subscribe(conn, "sess_1")
        fanout = Fanout(connections, push)

        for n in range(11):  # a turn's frames
            await fanout.publish("sess_1", [f"frame {n}"])

        assert endpoint.delivered == ["healthy"] * 11  # the healthy subscriber got every frame
        # The first frame's post timed out (with botocore's one retry); later frames skipped the
        # stalled connection instead of waiting out the timeout again.
        assert endpoint.stalled_attempts == 2
        with pytest.raises(ConnectionStalled):
            await push.send("stalled", "x")
        assert await connections.subscribers("sess_1") == ["stalled", "healthy"]  # not pruned: it may resume
    finally:
        endpoint.close()
