"""The local server's own loops (hosts/local_server.py): its scheduler fires a due schedule, its
queue consumer runs the turn, and its webhook sender delivers ``turn.ended`` to a receiver on
loopback, signed; nothing here calls ``fire_due`` or ``deliver_due`` itself."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from standardwebhooks import Webhook

from agentvm.config import Settings
from agentvm.hosts.local import local_runtime
from agentvm.hosts.local_server import create_local_app
from tests.unit.turns.test_webhooks import LaterClock, Receiver


def test_a_scheduled_turn_ends_in_a_signed_webhook(tmp_path):
    receiver = Receiver([])
    settings = Settings(
        data_dir=tmp_path,
        open=True,
        webhooks_allow_private_networks=True,
        schedule_tick_s=0.05,
        webhook_send_s=0.05,
    )
    host = local_runtime(settings)
    clock = LaterClock()
    host.runtime.clock = clock
    try:
        with TestClient(create_local_app(host)) as api:  # the lifespan starts the loops
            session = api.post("/v1/containers/user-alice/sessions", json={"name": "Daily"}).json()
            hook = api.post("/v1/webhooks/endpoints", json={"url": receiver.url, "events": ["turn.ended"]})
            secret = hook.json()["secret"]
            body = {"imageId": session["imageId"], "cron": "* * * * *", "message": "tick"}
            schedule = api.post("/v1/schedules", json=body).json()["schedule"]
            # just past the schedule's next minute, well before the one after (a fixed 61 s after a
            # schedule made in a minute's last second passed two minutes: the later one fired)
            clock.offset_ms = schedule["nextAt"] + 500 - time.time_ns() // 1_000_000
            deadline = time.monotonic() + 30
            while not receiver.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            [run] = api.get(f"/v1/schedules/{schedule['scheduleId']}/runs").json()["runs"]
            assert (run["status"], run["tickAt"]) == ("sent", schedule["nextAt"])
            [(headers, payload)] = receiver.requests
            event = Webhook(secret).verify(payload, headers)
            assert event["type"] == "turn.ended"
            assert (event["data"]["turnId"], event["data"]["status"]) == (run["turnId"], "completed")
            messages = api.get(f"/v1/sessions/{session['sessionId']}/export").text
            assert "tick" in messages and "Echo: tick" in messages
            time.sleep(0.3)  # a few more steps of both loops: nothing fires or sends twice
            assert len(receiver.requests) == 1
            assert len(api.get(f"/v1/schedules/{schedule['scheduleId']}/runs").json()["runs"]) == 1
    finally:
        receiver.server.shutdown()
        host.queue.close()
