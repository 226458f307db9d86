"""``GET /v1/logs``: recent structured log lines, newest first, a page at a time.

Admin keys only. A tenant's admin gets its own tenant's lines only; a platform admin (an admin key
of the platform tenant, or the open dev mode) every line, the platform-internal ones (no tenant)
included, or one tenant's with ``?tenant=``. Filters: ``containerId``, ``sessionId``, ``turnId``,
``level`` (that level and above), ``since``/``until`` (epoch ms or ISO 8601); ``limit`` 1-500
(default 100), ``cursor`` the previous page's ``next``. Stable errors: ``invalid_level``,
``invalid_cursor``, ``invalid_time_range`` (400), ``forbidden`` (403: a tenant named by a caller
who may not), ``query_timeout`` (503, AWS: narrow the range). How each host keeps its lines:
``observability/logstore.py`` and docs/observability.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.metrics import MAX_TIME, scope_of
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.api.tenants import MAX_TENANT_ID
from agentvm.errors import NotFound
from agentvm.observability.logstore import DEFAULT_LIMIT, MAX_LIMIT
from agentvm.observability.query import parse_level, parse_time, time_range
from agentvm.ports import LogQuery

HOUR_MS = 3_600_000
MAX_LEVEL = 32  # a level's name (blanks around it are allowed): anything longer is no level
MAX_CURSOR = 400  # a cursor this route gave is base64url JSON of two numbers, far shorter
_LINE = {
    "id": "4182",
    "ts": 1767225600123,
    "level": "INFO",
    "logger": "agentvm.tools",
    "msg": "tool call",
    "tenantId": "acme",
    "containerId": "user-alice",
    "sessionId": "sess_mjw1x2y3_0k4m5n6p7q",
    "turnId": "turn_mjw1x2y4_0k4m5n6p7r",
    "fields": {"tool": "calculator", "status": "ok", "duration_ms": 3},
}


class LogLine(BaseModel):
    id: str = Field(description="opaque; unique within the host's store")
    ts: int | None = Field(description="epoch milliseconds")
    level: str = Field(description="DEBUG, INFO, WARNING, ERROR or CRITICAL")
    logger: str | None
    msg: str
    tenantId: str | None = Field(description="null: a platform-internal line (platform admins only)")
    containerId: str | None
    sessionId: str | None
    turnId: str | None
    fields: dict[str, Any] = Field(description="the line's other fields (masked)")


class LogLines(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples({"lines": [_LINE], "next": None}))

    lines: list[LogLine]
    next: str | None = Field(description="the cursor of the next (older) page; null on the last")


router = APIRouter(tags=["observability"])


@router.get(
    "/logs",
    response_model=None,
    responses={
        **ok(200, LogLines, {"lines": [_LINE], "next": None}, "a page of lines, newest first"),
        **error_responses(400, 404, 503),
    },
)
async def logs(
    runtime: RuntimeDep,
    caller: Caller,
    tenant: str | None = Query(
        default=None,
        min_length=1,
        max_length=MAX_TENANT_ID,
        description="platform admins: one tenant's lines",
    ),
    containerId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803 (the protocol's names)
    sessionId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803
    turnId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803
    level: str | None = Query(
        default=None, max_length=MAX_LEVEL, description="this level and above: debug ... critical"
    ),
    since: str | None = Query(
        default=None, max_length=MAX_TIME, description="epoch ms or ISO 8601 (AWS default: an hour ago)"
    ),
    until: str | None = Query(
        default=None, max_length=MAX_TIME, description="epoch ms or ISO 8601 (default: now)"
    ),
    limit: int = Query(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str | None = Query(
        default=None, max_length=MAX_CURSOR, description="``next`` of the previous page"
    ),
) -> dict[str, Any]:
    """Recent log lines of the caller's tenant (platform admins: every line, or one tenant's),
    secrets masked, filtered by container, session, turn, level and time."""
    principal = admin(caller)
    scope = scope_of(runtime, principal, tenant)
    min_level = parse_level(level)
    now = runtime.clock.now_ms()
    start: int | None = None
    end: int | None = None
    if since is None:  # every line kept (the AWS host: the last hour), up to ``until``
        end = None if until is None else parse_time(until, "until")
    else:
        window = time_range(since, until, now_ms=now, default_span_ms=HOUR_MS)
        start, end = window.since_ms, window.until_ms
    if runtime.logs is None:
        raise NotFound("this server keeps no log lines (AVM_LOG_STORE_MAX_BYTES=0, or no AVM_LOG_GROUP)")
    page = await runtime.logs.page(
        LogQuery(
            tenant_id=scope,
            container_id=containerId,
            session_id=sessionId,
            turn_id=turnId,
            min_level=min_level,
            since_ms=start,
            until_ms=end,
            limit=limit,
            cursor=cursor,
        )
    )
    return {"lines": page.lines, "next": page.next}


__all__ = ["LogLines", "router"]
