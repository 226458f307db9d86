"""Schedules over HTTP (docs/schedules.md): ``/v1/schedules`` (create, list), ``/v1/schedules/{id}``
(get, update: pause and resume too, delete) and ``/v1/schedules/{id}/runs``.

Admin keys only, the caller's tenant only: another tenant's schedule answers exactly like a missing
one (``404``). A schedule's runs spend the tenant's tokens as any turn does, within its own budget.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.errors import NotFound
from agentvm.records import ScheduleRecord
from agentvm.turns.schedules import check_cron, next_tick, schedules_of

MAX_TOKENS = 10**15
SCHEDULE_ID = Path(min_length=1, max_length=MAX_ID)
MAX_SCHEDULES = 100  # per tenant

router = APIRouter(prefix="/schedules", tags=["schedules"])

_SCHEDULE = {
    "scheduleId": "sch_mk2x9a_q8w7e6r5t4",
    "imageId": "img_mk2x8z_a1b2c3d4e5",
    "containerId": "user-alice",
    "cron": "0 9 * * 1-5",
    "timezone": "Europe/Paris",
    "message": "Summarise yesterday's tickets.",
    "sessionPolicy": "same",
    "tokensPerRun": 20000,
    "tokensPerDay": 100000,
    "paused": False,
    "pausedReason": None,
    "nextAt": 1767254400000,
    "createdAt": 1767200000000,
    "updatedAt": 1767200000000,
}
_RUN = {
    "scheduleId": "sch_mk2x9a_q8w7e6r5t4",
    "tickAt": 1767254400000,
    "status": "sent",
    "claimedAt": 1767254400120,
    "imageId": "img_mk2x8z_a1b2c3d4e5",
    "sessionId": "sess_mk2x8z_f6g7h8i9j0",
    "turnId": "turn_mk2x9a_q8w7e6r5t4",
    "reason": None,
    "tokens": 1830,
}


class NewSchedule(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {
                "imageId": "img_mk2x8z_a1b2c3d4e5",
                "cron": "0 9 * * 1-5",
                "timezone": "Europe/Paris",
                "message": "Summarise yesterday's tickets.",
                "tokensPerDay": 100000,
            }
        ),
    )

    imageId: StrictStr = Field(min_length=1, max_length=MAX_ID)  # noqa: N815
    cron: StrictStr = Field(
        min_length=9, max_length=200, description="5 fields: minute hour day month weekday"
    )
    timezone: StrictStr = Field(default="UTC", max_length=64, description="an IANA time zone")
    message: StrictStr = Field(min_length=1, max_length=100_000, description="what each run sends")
    sessionPolicy: Literal["same", "new"] = Field(  # noqa: N815
        default="same", description="same: the image's session; new: a new image (its config) per run"
    )
    tokensPerRun: StrictInt | None = Field(default=None, ge=1, le=MAX_TOKENS)  # noqa: N815
    tokensPerDay: StrictInt | None = Field(default=None, ge=1, le=MAX_TOKENS)  # noqa: N815
    paused: StrictBool = False


class ScheduleChanges(BaseModel):
    """What to change; a field left out stays. ``paused: false`` resumes from the next tick."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=examples({"paused": True}, {"paused": False})
    )

    cron: StrictStr | None = Field(default=None, min_length=9, max_length=200)
    timezone: StrictStr | None = Field(default=None, max_length=64)
    message: StrictStr | None = Field(default=None, min_length=1, max_length=100_000)
    sessionPolicy: Literal["same", "new"] | None = None  # noqa: N815
    tokensPerRun: StrictInt | None = Field(default=None, ge=1, le=MAX_TOKENS)  # noqa: N815
    tokensPerDay: StrictInt | None = Field(default=None, ge=1, le=MAX_TOKENS)  # noqa: N815
    paused: StrictBool | None = None


_CLEARABLE = frozenset({"tokensPerRun", "tokensPerDay"})


def view(schedule: ScheduleRecord) -> dict[str, Any]:
    return schedule.model_dump(exclude={"tenantId", "createdBy"})


_ONE = {**ok(200, None, {"schedule": _SCHEDULE}, "the schedule"), **error_responses(400, 404)}


@router.post(
    "",
    status_code=201,
    response_model=None,
    responses={**ok(201, None, {"schedule": _SCHEDULE}, "the new schedule"), **error_responses(400, 404)},
)
async def create_schedule(runtime: RuntimeDep, caller: Caller, body: NewSchedule) -> dict[str, Any]:
    """Run a turn of one of the tenant's images on a cron schedule (the first run at the next tick)."""
    principal = admin(caller)
    schedules = schedules_of(runtime)
    check_cron(body.cron, body.timezone)
    image = await runtime.store.get_image(principal.tenant_id, body.imageId)
    if image is None:
        raise NotFound(f"image not found: {body.imageId}")
    if len(await schedules.list_schedules(principal.tenant_id)) >= MAX_SCHEDULES:
        from agentvm.errors import BadRequest

        raise BadRequest(f"a tenant has at most {MAX_SCHEDULES} schedules")
    now = runtime.clock.now_ms()
    schedule = ScheduleRecord(
        tenantId=principal.tenant_id,
        scheduleId=runtime.ids.new("sch"),
        imageId=image.imageId,
        containerId=image.containerId,
        cron=body.cron,
        timezone=body.timezone,
        message=body.message,
        sessionPolicy=body.sessionPolicy,
        tokensPerRun=body.tokensPerRun,
        tokensPerDay=body.tokensPerDay,
        paused=body.paused,
        nextAt=next_tick(body.cron, body.timezone, now),
        createdAt=now,
        updatedAt=now,
        createdBy=principal.key_id,
    )
    await schedules.put_schedule(schedule)
    return {"schedule": view(schedule)}


@router.get(
    "",
    response_model=None,
    responses={**ok(200, None, {"schedules": [_SCHEDULE]}, "the schedules"), **error_responses(400)},
)
async def list_schedules(runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    principal = admin(caller)
    found = await schedules_of(runtime).list_schedules(principal.tenant_id)
    return {"schedules": [view(s) for s in found]}


async def _schedule(runtime: RuntimeDep, tenant_id: str, schedule_id: str) -> ScheduleRecord:
    found = await schedules_of(runtime).get_schedule(tenant_id, schedule_id)
    if found is None:
        raise NotFound(f"schedule not found: {schedule_id}")
    return found


@router.get("/{schedule_id}", response_model=None, responses=_ONE)
async def get_schedule(runtime: RuntimeDep, caller: Caller, schedule_id: str = SCHEDULE_ID) -> dict[str, Any]:
    return {"schedule": view(await _schedule(runtime, admin(caller).tenant_id, schedule_id))}


@router.patch("/{schedule_id}", response_model=None, responses=_ONE)
async def update_schedule(
    runtime: RuntimeDep, caller: Caller, body: ScheduleChanges, schedule_id: str = SCHEDULE_ID
) -> dict[str, Any]:
    """Change a schedule; ``paused`` pauses or resumes it (resumed, it runs from the next tick on:
    the ticks while paused are not run)."""
    principal = admin(caller)
    current = await _schedule(runtime, principal.tenant_id, schedule_id)
    # null clears a budget; for the other fields it means "keep"
    changes = {
        k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k in _CLEARABLE
    }
    updated = current.model_copy(update=changes)
    check_cron(updated.cron, updated.timezone)
    now = runtime.clock.now_ms()
    retimed = {"cron", "timezone"} & changes.keys() or (current.paused and not updated.paused)
    updated = updated.model_copy(
        update={
            "updatedAt": now,
            "pausedReason": None if not updated.paused else current.pausedReason,
            "nextAt": next_tick(updated.cron, updated.timezone, now) if retimed else current.nextAt,
        }
    )
    await schedules_of(runtime).put_schedule(updated)
    return {"schedule": view(updated)}


@router.delete("/{schedule_id}", response_model=None, responses=_ONE)
async def delete_schedule(
    runtime: RuntimeDep, caller: Caller, schedule_id: str = SCHEDULE_ID
) -> dict[str, Any]:
    """Delete the schedule and its runs' records (turns it sent stay in their sessions)."""
    principal = admin(caller)
    current = await _schedule(runtime, principal.tenant_id, schedule_id)
    if not await schedules_of(runtime).delete_schedule(principal.tenant_id, schedule_id):
        raise NotFound(f"schedule not found: {schedule_id}")
    return {"schedule": view(current)}


@router.get(
    "/{schedule_id}/runs",
    response_model=None,
    responses={**ok(200, None, {"runs": [_RUN]}, "the runs, newest tick first"), **error_responses(400, 404)},
)
async def list_runs(
    runtime: RuntimeDep,
    caller: Caller,
    schedule_id: str = SCHEDULE_ID,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    principal = admin(caller)
    await _schedule(runtime, principal.tenant_id, schedule_id)
    runs = await schedules_of(runtime).list_runs(principal.tenant_id, schedule_id, limit=limit)
    return {"runs": [r.model_dump(exclude={"tenantId"}) for r in runs]}


__all__ = ["NewSchedule", "ScheduleChanges", "router"]
