"""Webhooks on the local host (turns/webhooks.py, docs/webhooks.md): a real HTTP receiver on
loopback, turns run by the echo model, signatures verified with the ``standardwebhooks`` package
(independently of the signing code), retries, the outbox across a restart, replays."""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from standardwebhooks import Webhook

from agentvm.api.app import create_app
from agentvm.config import Settings
from agentvm.hosts.local import LocalHost, local_runtime
from agentvm.images import ImageConfig, create
from agentvm.turns.submit import Sender, send_message
from agentvm.turns.webhooks import BACKOFF_BASE_S, deliver_due
from agentvm.turns.worker import process_turn
from tests.webhook_receiver import Receiver

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([500])  # the first delivery fails
    yield r
    r.close()


class LaterClock:
    """The real time plus an offset the test moves (signatures are checked against the real time)."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic(self) -> float:
        return time.monotonic() + self.offset_ms / 1000


def host_at(tmp_path: Path, clock: LaterClock) -> LocalHost:
    host = local_runtime(Settings(data_dir=tmp_path, open=True, webhooks_allow_private_networks=True))
    host.runtime.clock = clock
    return host


async def a_turn(host: LocalHost, text: str = "hello") -> str:
    rt = host.runtime
    image = await create(rt, "local", "user-alice", ImageConfig(), admin=True, by=None, notices=[])
    sent = await send_message(rt, "local", image, text, request_id=text, sender=Sender("c1"), notices=[])
    await host.queue.drain(lambda job: process_turn(rt, job))
    return sent.turn_id


async def test_each_event_reaches_the_endpoint_once_signed_after_a_retry(tmp_path, receiver, caplog):
    caplog.set_level(logging.DEBUG)
    clock = LaterClock()
    host = host_at(tmp_path, clock)
    rt = host.runtime
    app = create_app(rt, open_tenant="local")
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as api,
        httpx.AsyncClient() as client,
    ):
        made = await api.post("/v1/webhooks/endpoints", json={"url": receiver.url, "events": ["turn.ended"]})
        assert made.status_code == 201, made.text
        secret, endpoint = made.json()["secret"], made.json()["endpoint"]
        assert secret.startswith("whsec_")
        eid = endpoint["endpointId"]
        assert secret not in (await api.get(f"/v1/webhooks/endpoints/{eid}")).text
        assert secret not in (await api.get("/v1/webhooks/endpoints")).text

        turn_id = await a_turn(host)
        assert await deliver_due(rt, client, allow_private=True) == 1  # answered 500
        [delivery] = (await api.get(f"/v1/webhooks/endpoints/{eid}/deliveries")).json()["deliveries"]
        assert (delivery["status"], delivery["attempts"], delivery["lastStatusCode"]) == ("pending", 1, 500)
        assert await deliver_due(rt, client, allow_private=True) == 0  # not before its backoff
        clock.offset_ms += int(BACKOFF_BASE_S * 1000) + 1
        assert await deliver_due(rt, client, allow_private=True) == 1
        assert await deliver_due(rt, client, allow_private=True) == 0
        [delivery] = (await api.get(f"/v1/webhooks/endpoints/{eid}/deliveries")).json()["deliveries"]
        assert (delivery["status"], delivery["attempts"], delivery["lastStatusCode"]) == ("delivered", 2, 200)

        assert len(receiver.requests) == 2
        ids = {headers["webhook-id"] for headers, _ in receiver.requests}
        assert ids == {delivery["deliveryId"]}  # the retry is the same message
        for headers, body in receiver.requests:
            event = Webhook(secret).verify(body, headers)  # raises on a bad signature or timestamp
            assert event["type"] == "turn.ended" and event["data"]["turnId"] == turn_id
            assert event["data"]["status"] == "completed"
        with pytest.raises(Exception, match="signature"):
            Webhook(secret).verify(receiver.requests[0][1] + b" ", receiver.requests[0][0])

        # the same event recorded again (a redelivered job) makes no second delivery
        from agentvm.turns.webhooks import record_event

        data = json.loads(receiver.requests[0][1])["data"]
        assert await record_event(rt, "local", "turn.ended", f"{turn_id}.completed.1", data) == 0

        # a replay sends it once more, with the same webhook-id
        replayed = await api.post(f"/v1/webhooks/deliveries/{delivery['deliveryId']}/replay")
        assert replayed.json()["delivery"]["status"] == "pending"
        assert await deliver_due(rt, client, allow_private=True) == 1
        assert len(receiver.requests) == 3 and receiver.requests[2][0]["webhook-id"] == delivery["deliveryId"]
        assert (await api.post("/v1/webhooks/deliveries/msg_missing/replay")).status_code == 404

    # the secret is sealed at rest and in no log line
    assert secret not in caplog.text
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("agentvm.db*"))
    assert secret.encode() not in stored and secret.removeprefix("whsec_").encode() not in stored
    host.queue.close()


async def test_the_outbox_outlives_the_process(tmp_path, receiver):
    receiver.statuses.clear()
    clock = LaterClock()
    host = host_at(tmp_path, clock)
    app = create_app(host.runtime, open_tenant="local")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as api:
        made = await api.post(
            "/v1/webhooks/endpoints", json={"url": receiver.url, "events": ["turn.ended", "turn.failed"]}
        )
        secret = made.json()["secret"]
    await a_turn(host)  # recorded, never sent: the process "dies" here
    host.queue.close()

    restarted = host_at(tmp_path, clock)
    async with httpx.AsyncClient() as client:
        assert await deliver_due(restarted.runtime, client, allow_private=True) == 1
        assert await deliver_due(restarted.runtime, client, allow_private=True) == 0
    [(headers, body)] = receiver.requests
    assert Webhook(secret).verify(body, headers)["type"] == "turn.ended"
    restarted.queue.close()


async def test_urls_that_are_not_http_or_reach_private_addresses_are_refused(tmp_path):
    host = local_runtime(Settings(data_dir=tmp_path, open=True))
    app = create_app(host.runtime, open_tenant="local")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as api:
        for url in (
            "ftp://example.com/hook",
            "file:///etc/passwd",
            "http://127.0.0.1:9/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://user:pw@example.com/hook",
        ):
            refused = await api.post("/v1/webhooks/endpoints", json={"url": url, "events": ["turn.ended"]})
            assert refused.status_code == 400, (url, refused.text)
        bad_event = await api.post(
            "/v1/webhooks/endpoints", json={"url": "https://example.com/h", "events": ["everything"]}
        )
        assert bad_event.status_code == 400
    host.queue.close()
