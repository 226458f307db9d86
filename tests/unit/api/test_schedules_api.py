"""``/v1/schedules`` (api/schedules.py): create, list, get, pause and resume, delete, runs."""

from __future__ import annotations

import httpx

from agentvm.api.app import create_app
from agentvm.images import ImageConfig, create
from agentvm.turns.schedules import fire_due
from tests.harness import Harness
from tests.security_harness import JAN_15_2026_NOON_MS, ManualClock


async def test_a_schedule_is_made_paused_resumed_listed_and_deleted(tmp_path):
    h = Harness(tmp_path)
    clock = ManualClock(JAN_15_2026_NOON_MS)  # 12:00 UTC
    h.rt.clock = clock
    image = await create(
        h.rt, "local", "user-alice", ImageConfig(name="Daily"), admin=True, by=None, notices=[]
    )
    transport = httpx.ASGITransport(app=create_app(h.rt, open_tenant="local"))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        body = {"imageId": image.imageId, "cron": "30 * * * *", "message": "check", "tokensPerDay": 500}
        made = await http.post("/v1/schedules", json=body)
        assert made.status_code == 201, made.text
        schedule = made.json()["schedule"]
        assert schedule["nextAt"] == JAN_15_2026_NOON_MS + 30 * 60_000
        assert (schedule["containerId"], schedule["sessionPolicy"], schedule["paused"]) == (
            "user-alice",
            "same",
            False,
        )
        assert "tenantId" not in schedule and "createdBy" not in schedule
        sid = schedule["scheduleId"]
        assert (await http.get("/v1/schedules")).json() == {"schedules": [schedule]}
        assert (await http.get(f"/v1/schedules/{sid}")).json() == {"schedule": schedule}

        paused = (await http.patch(f"/v1/schedules/{sid}", json={"paused": True})).json()["schedule"]
        assert paused["paused"] is True
        kept = (await http.patch(f"/v1/schedules/{sid}", json={"paused": None, "tokensPerDay": None})).json()
        assert (kept["schedule"]["paused"], kept["schedule"]["tokensPerDay"]) == (True, None)
        clock.ms += 3 * 3600_000  # 15:00: three ticks pass while paused
        assert await fire_due(h.rt) == 0
        resumed = (await http.patch(f"/v1/schedules/{sid}", json={"paused": False})).json()["schedule"]
        assert resumed["nextAt"] == JAN_15_2026_NOON_MS + 3 * 3600_000 + 30 * 60_000  # 15:30, not 12:30
        clock.ms += 30 * 60_000
        assert await fire_due(h.rt) == 1
        [run] = (await http.get(f"/v1/schedules/{sid}/runs")).json()["runs"]
        assert (run["tickAt"], run["status"], run["imageId"]) == (resumed["nextAt"], "sent", image.imageId)

        retimed = (await http.patch(f"/v1/schedules/{sid}", json={"cron": "0 9 * * *"})).json()["schedule"]
        assert retimed["cron"] == "0 9 * * *" and retimed["nextAt"] == JAN_15_2026_NOON_MS + 21 * 3600_000

        deleted = await http.delete(f"/v1/schedules/{sid}")
        assert deleted.status_code == 200
        assert (await http.get(f"/v1/schedules/{sid}")).status_code == 404
        assert (await http.get(f"/v1/schedules/{sid}/runs")).status_code == 404
        assert (await http.get("/v1/schedules")).json() == {"schedules": []}


async def test_bad_schedules_are_refused(tmp_path):
    h = Harness(tmp_path)
    image = await create(h.rt, "local", "user-alice", ImageConfig(), admin=True, by=None, notices=[])
    transport = httpx.ASGITransport(app=create_app(h.rt, open_tenant="local"))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        good = {"imageId": image.imageId, "cron": "0 9 * * *", "message": "hi"}
        for change, code in (
            ({"cron": "every day at 9"}, 400),
            ({"cron": "0 9 * * * *"}, 400),  # six fields (seconds): one tick a minute at most
            ({"timezone": "Mars/Olympus"}, 400),
            ({"imageId": "img_missing"}, 404),
            ({"sessionPolicy": "sometimes"}, 400),
            ({"tokensPerDay": 0}, 400),
        ):
            refused = await http.post("/v1/schedules", json={**good, **change})
            assert refused.status_code == code, (change, refused.text)
        sid = (await http.post("/v1/schedules", json=good)).json()["schedule"]["scheduleId"]
        assert (await http.patch(f"/v1/schedules/{sid}", json={"timezone": "Nowhere/X"})).status_code == 400
    h.rt.schedules = None
    transport = httpx.ASGITransport(app=create_app(h.rt, open_tenant="local"))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        off = await http.get("/v1/schedules")
        assert off.status_code == 400 and "not enabled" in off.json()["error"]["message"]
