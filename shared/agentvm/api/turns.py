"""The running turns over HTTP: ``/v1/turns`` lists the turns queued, running or suspended, and
``/v1/turns/cancel`` (or ``/v1/turns/{turnId}/cancel``) stops them (``agentvm.observability.running``
lists them, ``agentvm.turns.interrupt`` stops them as ``agent_interrupt`` does).

Admin keys, the caller's tenant; a platform admin (an admin key of the platform tenant, or anyone in
the open dev mode) may name another tenant with ``tenantId``. A turn of another tenant reads as
one that does not exist: it is not listed, and cancelling it is ``404`` (or listed in ``notFound``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.errors import BadRequest, Forbidden, NotFound
from agentvm.observability.running import LIVE, live_turns, model_of

if TYPE_CHECKING:
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MAX_IDS = 100
MAX_TENANT_ID = 64  # security/apikeys.py, TENANT_RE
MAX_STATUSES = 64  # queued,running,suspended has 24 characters
TurnId = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
_TURN = {
    "turnId": "turn_mk2x9a_q8w7e6r5t4",
    "containerId": "user-alice",
    "imageId": "img_mk2x8z_a1b2c3d4e5",
    "sessionId": "sess_mk2x8z_f6g7h8i9j0",
    "status": "running",
    "model": "anthropic/claude-haiku-4-5",
    "queuedAt": 1767225600000,
    "ageMs": 8400,
    "updatedAt": 1767225600300,
    "tokens": {
        "calls": 1,
        "inputTokens": 612,
        "outputTokens": 20,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    },
    "streamingOutputTokens": 143,
}
_CANCELLED = {"cancelled": [{"turnId": _TURN["turnId"], "status": "running"}], "notFound": []}


class TurnTokensWire(BaseModel):
    calls: int = Field(description="model calls finished (each billed as it ended)")
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int


class LiveTurnWire(BaseModel):
    turnId: str
    containerId: str
    imageId: str
    sessionId: str
    status: Literal["queued", "running", "suspended"]
    model: str | None = Field(description="the model the turn runs (provider/model)")
    queuedAt: int = Field(description="epoch ms")
    ageMs: int = Field(description="since it was queued")
    updatedAt: int = Field(description="when its status last changed (epoch ms)")
    tokens: TurnTokensWire = Field(description="its model calls that finished")
    streamingOutputTokens: int | None = Field(
        default=None, description="the call streaming now, as this server process sees it (local host)"
    )
    waitingFor: list[dict[str, Any]] | None = Field(default=None, description="a suspended turn's tool calls")


class TurnList(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples({"turns": [_TURN]}))

    turns: list[LiveTurnWire] = Field(description="oldest first")


class CancelTurns(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {"turnIds": [_TURN["turnId"]]}, {"containerId": "user-alice"}, {"all": True}
        ),
    )

    turnIds: list[TurnId] | None = Field(default=None, max_length=MAX_IDS, description="these turns")
    containerId: StrictStr | None = Field(
        default=None, min_length=1, max_length=MAX_ID, description="every unfinished turn of a container"
    )
    all: StrictBool = Field(default=False, description="every unfinished turn of the tenant")
    tenantId: StrictStr | None = Field(
        default=None, min_length=1, max_length=MAX_TENANT_ID, description="platform admins: another tenant"
    )


class CancelledTurn(BaseModel):
    turnId: str
    status: str = Field(description="what it was when stopped: queued, running or suspended")


class CancelResult(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_CANCELLED))

    cancelled: list[CancelledTurn]
    notFound: list[str] = Field(description="ids that are no unfinished turn of the tenant")


router = APIRouter(prefix="/turns", tags=["turns"])


def tenant_of(runtime: Runtime, caller: Principal, asked: str | None) -> str:
    principal = admin(caller)
    if asked is None or asked == principal.tenant_id:
        return principal.tenant_id
    if runtime.auth is not None and principal.tenant_id != runtime.platform_tenant:
        raise Forbidden(
            "the turns of other tenants are for platform admins (an admin key of the platform tenant)"
        )
    return asked


def statuses_of(raw: str | None) -> set[str]:
    if raw is None or not raw.strip():
        return set(LIVE)
    asked = {s.strip() for s in raw.split(",")}
    unknown = sorted(asked - LIVE)
    if unknown:
        raise BadRequest(f"status: unknown {', '.join(unknown)}; use queued, running, suspended")
    return asked


@router.get(
    "",
    response_model=None,
    responses={**ok(200, TurnList, {"turns": [_TURN]}, "the unfinished turns"), **error_responses(400, 404)},
)
async def list_turns(
    runtime: RuntimeDep,
    caller: Caller,
    container_id: str | None = Query(
        default=None, alias="containerId", min_length=1, max_length=MAX_ID, description="one container"
    ),
    status: str | None = Query(
        default=None, max_length=MAX_STATUSES, description="comma-separated: queued, running, suspended"
    ),
    tenant_id: str | None = Query(
        default=None,
        alias="tenantId",
        min_length=1,
        max_length=MAX_TENANT_ID,
        description="platform admins: a tenant",
    ),
) -> dict[str, Any]:
    """The turns queued, running or suspended, oldest first: status, model, age and tokens so far.
    ``404`` when this server keeps no such list."""
    tenant = tenant_of(runtime, caller, tenant_id)
    wanted = statuses_of(status)
    now = runtime.clock.now_ms()
    found = await live_turns(runtime, tenant, container_id, wanted)
    return {"turns": [t.to_wire(now, model_of(runtime, t.mark.model)) for t in found]}


@router.post(
    "/cancel",
    response_model=None,
    responses={**ok(200, CancelResult, _CANCELLED, "what was stopped"), **error_responses(400, 404)},
)
async def cancel_turns(runtime: RuntimeDep, caller: Caller, body: CancelTurns) -> dict[str, Any]:
    """Stop turns, as ``agent_interrupt`` does: the given ``turnIds``, every turn of a
    ``containerId``, or ``all`` of the tenant's. A running turn keeps its partial reply and
    ends ``interrupted``; a queued one ends ``interrupted`` without calling the model."""
    chosen = [body.turnIds is not None, body.containerId is not None, body.all]
    if sum(chosen) != 1:
        raise BadRequest("give exactly one of turnIds, containerId or all")
    tenant = tenant_of(runtime, caller, body.tenantId)
    found = await live_turns(runtime, tenant, body.containerId)
    missing: list[str] = []
    if body.turnIds is not None:
        by_id = {t.mark.turn_id: t for t in found}
        missing = [i for i in dict.fromkeys(body.turnIds) if i not in by_id]
        found = [by_id[i] for i in dict.fromkeys(body.turnIds) if i in by_id]
    key_id = admin(caller).key_id
    # Deferred: the turn modules load only when turns are stopped (the HTTP Lambda's cold start).
    from agentvm.turns.interrupt import interrupt_turns

    stopped = await interrupt_turns(
        runtime, tenant, found, reason=f"cancelled by an operator ({key_id or 'open mode'})"
    )
    status = {t.mark.turn_id: t.status for t in found}
    return {"cancelled": [{"turnId": i, "status": status[i]} for i in stopped], "notFound": missing}


@router.post(
    "/{turn_id}/cancel",
    response_model=None,
    responses={
        **ok(200, CancelledTurn, _CANCELLED["cancelled"][0], "the turn stopped"),
        **error_responses(400, 404),
    },
)
async def cancel_turn(
    runtime: RuntimeDep,
    caller: Caller,
    turn_id: str = Path(min_length=1, max_length=MAX_ID),
    tenant_id: str | None = Query(
        default=None,
        alias="tenantId",
        min_length=1,
        max_length=MAX_TENANT_ID,
        description="platform admins: a tenant",
    ),
) -> dict[str, Any]:
    """Stop one turn; ``404`` if it is no unfinished turn of the tenant."""
    tenant = tenant_of(runtime, caller, tenant_id)
    found = [t for t in await live_turns(runtime, tenant) if t.mark.turn_id == turn_id]
    if not found:
        raise NotFound(f"Turn not found (or finished): {turn_id}")
    key_id = admin(caller).key_id
    from agentvm.turns.interrupt import interrupt_turns  # deferred, as above

    await interrupt_turns(
        runtime, tenant, found, reason=f"cancelled by an operator ({key_id or 'open mode'})"
    )
    return {"turnId": turn_id, "status": found[0].status}


__all__ = ["router"]
