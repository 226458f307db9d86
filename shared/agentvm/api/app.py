"""``create_app(runtime)``: the FastAPI application both hosts serve.

Local: ``avm serve`` adds the ``/ws`` WebSocket route and the queue consumer around it.
Lambda: ``functions/http_api`` wraps the same object in Mangum.

Every ``/v1/...`` route needs ``Authorization: Bearer <API key>`` (``/health``, ``/docs`` and
``/openapi.json`` stay open; an unknown path is a 404 with or without a key) and counts against
the key's rate limit. Errors always have one
shape: ``{"error": {"code": "...", "message": "...", ...}}``, the status chosen by the error's type.
Keys, budgets and usage are admin routes, and act on the caller's own tenant only.

``/openapi.json`` tells what the server really answers: each route's error statuses with the
error shape (``ErrorBody``), the bearer scheme on ``/v1``, and no 422 (validation errors are 400).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Security  # noqa: TC002 (FastAPI reads annotations)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictInt
from pydantic.json_schema import SkipJsonSchema
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentvm import __version__
from agentvm.api import examples as doc
from agentvm.api.body_limit import BodyLimit, BodyTooLarge
from agentvm.api.openapi import error_examples, examples, finish_document, ok
from agentvm.errors import (
    AgentVMError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    QuotaExceeded,
    RateLimited,
    StorageQuotaExceeded,
    StorageUnavailable,
    Unauthorized,
)
from agentvm.logs import bind, log_refusal
from agentvm.security.auth import Principal

if TYPE_CHECKING:
    from agentvm.ports import Sandbox
    from agentvm.runtime import Runtime
    from agentvm.security.budgets import Budgets

log = logging.getLogger("agentvm.api")

# Status by error type (the most specific class in the exception's MRO wins).
STATUS: dict[type[AgentVMError], int] = {
    BadRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    QuotaExceeded: 429,
    StorageUnavailable: 503,
    StorageQuotaExceeded: 507,
}
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
}


class Health(BaseModel):
    status: str
    version: str


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str = Field(description="for programs: bad_request, unauthorized, forbidden, not_found, ...")
    message: str = Field(description="for people; never secrets or internals")
    # absent, never null, on other errors (SkipJsonSchema: the schema does not say "or null")
    limit: int | SkipJsonSchema[None] = Field(
        default=None, description="429, and 409 on a tenant's key cap: the limit reached"
    )
    resetAt: int | SkipJsonSchema[None] = Field(default=None, description="429: when it resets (epoch ms)")


class ErrorBody(BaseModel):
    """Every error answer of the HTTP API."""

    error: ErrorDetail


_HEADER = {"schema": {"type": "string"}}
_ERRORS: dict[int, dict[str, Any]] = {
    400: {"description": "Malformed request: invalid JSON, a field of the wrong type or value"},
    401: {
        "description": "No, bad or revoked API key (`unauthorized`)",
        "headers": {"WWW-Authenticate": {**_HEADER, "description": "`Bearer`"}},
    },
    403: {"description": "A valid key that may not do this (`forbidden`): /v1 needs the admin scope"},
    404: {"description": "No such object in the caller's tenant (`not_found`)"},
    409: {
        "description": "Conflicts with what is stored: a published version (`version_exists`), a version "
        "others depend on (`resource_in_use`, with `dependents`), the tenant's active API keys at its "
        "cap (`conflict`, with `limit`)"
    },
    413: {"description": "Body over AVM_MAX_BODY_BYTES, refused before it is read (`payload_too_large`)"},
    429: {
        "description": "Over the key's requests per minute (`rate_limited`, with `limit` and `resetAt`)",
        "headers": {"Retry-After": {**_HEADER, "description": "seconds until the limit resets"}},
    },
    503: {"description": "A query that did not finish in time (`query_timeout`): narrow it and retry"},
    507: {"description": "The tenant's storage quota is used up (`storage_quota_exceeded`: `limit`, `used`)"},
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` for these error statuses, each with the error shape."""
    return {
        status: {"model": ErrorBody, **_ERRORS[status], **error_examples(doc.ERRORS.get(status, []))}
        for status in statuses
    }


# Documents the scheme in the OpenAPI; never refuses anything itself (``authenticate`` decides).
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="avm_<keyId>_<secret>",
    description="An AgentVM API key (SECURITY.md). The /v1 routes need one with the admin scope.",
)


MAX_KEY_RATE_LIMIT = 1_000_000  # requests per minute; above the server's limit is the operator's anyway


class CreateKey(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"scopes": ["client"], "name": "web app", "rate_limit_per_minute": 60}, {}
        ),
    )

    scopes: list[Literal["admin", "client"]] = Field(
        default_factory=lambda: ["client"], min_length=1, max_length=2
    )
    name: str | None = Field(default=None, max_length=200)
    # At least 1 (0 would mean unlimited) and at most the server's limit: only the operator, with
    # `avm keys create --rate-limit`, may lift a key above it. Booleans are not numbers (strict).
    rate_limit_per_minute: StrictInt | None = Field(default=None, ge=1, le=MAX_KEY_RATE_LIMIT)


CONTAINER_ID = Path(min_length=1, max_length=128)  # the gateway's bound on container ids
MAX_ID = 128  # the gateway's bound on ids (containers, images, sessions, turns); API key ids are 12
MAX_WORKSPACE_PATH = 4096  # Linux's PATH_MAX: a longer path names no file of a workspace
MAX_BUDGET_TOKENS = 10**15  # far above any real budget; below 2**53, so every JSON reader keeps it exact


class BudgetLimits(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # booleans are not numbers: `false` is refused, never taken for 0
        json_schema_extra=examples(
            {"daily_tokens": 1000000, "monthly_tokens": 20000000}, {"daily_tokens": None}
        ),
    )

    daily_tokens: StrictInt | None = Field(
        default=None, ge=0, le=MAX_BUDGET_TOKENS
    )  # per UTC day; null: none
    monthly_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)  # per calendar month


def error_body(exc: AgentVMError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, **exc.wire_fields()}}


def error_status(exc: AgentVMError) -> int:
    return next((STATUS[c] for c in type(exc).__mro__ if c in STATUS), 500)


def error_response(exc: AgentVMError, *, now_ms: int) -> JSONResponse:
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, QuotaExceeded):
        headers["Retry-After"] = str(max(1, -(-(exc.reset_at_ms - now_ms) // 1000)))
    return JSONResponse(error_body(exc), status_code=error_status(exc), headers=headers)


async def principal_of(runtime: Runtime, headers: Any, open_tenant: str | None) -> Principal:
    """Who sends this request: its bearer key, or the open dev mode's tenant."""
    if runtime.auth is None:
        if open_tenant is None:
            raise Unauthorized("authentication is not configured on this server")
        return Principal(tenant_id=open_tenant, key_id=None, scopes=frozenset({"admin", "client"}))
    principal = await runtime.auth.from_headers(headers)
    if principal is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <API key>'")
    return principal


def create_app(runtime: Runtime, *, open_tenant: str | None = None, **fastapi_kwargs: object) -> FastAPI:
    """``open_tenant``: without an authenticator, every caller is this tenant (loopback dev mode only)."""
    app = FastAPI(
        title="AgentVM",
        version=__version__,
        description="AI agent runtime. WebSocket: AgentX v1 protocol at /ws (see docs/protocol.md).",
        **fastapi_kwargs,  # type: ignore[arg-type]
    )
    app.state.runtime = runtime
    # Bodies over the limit are refused before they are read, authenticated or not.
    app.add_middleware(BodyLimit, max_bytes=runtime.turns.max_body_bytes)
    from agentvm.api.metrics import RequestMetrics

    app.add_middleware(RequestMetrics, runtime=runtime)  # outermost: counts refusals (413) too

    def now_ms() -> int:
        return runtime.clock.now_ms()

    @app.exception_handler(AgentVMError)
    async def agentvm_error(request: Request, exc: AgentVMError) -> JSONResponse:
        if isinstance(exc, Unauthorized):  # a client mistake or a guess: one rate-limited line
            log_refusal(
                log,
                "HTTP request refused",
                source=request.client.host if request.client else "?",
                level=logging.WARNING,
                status=401,
                path=request.url.path,
            )
        return error_response(exc, now_ms=now_ms())

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]]
        return error_response(BadRequest("; ".join(parts) or "invalid request"), now_ms=now_ms())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(
            {"error": {"code": code, "message": str(exc.detail)}},
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(_request: Request, exc: BodyTooLarge) -> JSONResponse:
        raise exc  # BodyLimit answers 413 itself; an exception handler must not turn it into a 500

    @app.exception_handler(Exception)
    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        log.error("HTTP route failed", exc_info=exc)  # details logged (masked), never sent
        return error_response(AgentVMError("internal error"), now_ms=now_ms())

    async def authenticate(request: Request) -> None:
        """Runs before every ``/v1`` route (unknown paths are plain 404s, as without a key). An
        address past its minute of 401s is answered 429 before its key is read (ratelimit.py)."""
        limiter = runtime.rate_limiter
        source = request.client.host if request.client else "?"
        if limiter is not None:
            try:
                limiter.check_unauthorized(source)
            except RateLimited:
                if runtime.auth is None or not runtime.auth.recently_verified(request.headers):
                    raise
        try:
            principal = await principal_of(runtime, request.headers, open_tenant)
        except Unauthorized:
            if limiter is not None:
                await limiter.hit_unauthorized(source)  # the one past the limit is answered 429
            raise
        bind(tenant_id=principal.tenant_id)  # the request's log lines carry it (/v1/logs)
        if runtime.rate_limiter is not None:
            await runtime.rate_limiter.hit(principal)
        request.state.principal = principal

    # Every /v1 route may answer these; each route adds what else it may (400, 404).
    v1 = APIRouter(
        prefix="/v1",
        dependencies=[Security(bearer_scheme), Depends(authenticate)],
        responses=_errors(401, 403, 413, 429),
    )

    def admin(request: Request) -> Principal:
        principal: Principal = request.state.principal
        if not principal.allows("admin"):
            raise Forbidden("this route needs an API key with the admin scope")
        return principal

    def budgets() -> Budgets:
        if runtime.budgets is None:
            raise BadRequest("budgets are not enabled on this server")
        return runtime.budgets

    @app.get(
        "/health",
        response_model=Health,
        tags=["ops"],
        responses={**ok(200, None, doc.HEALTH, "the server is up"), **_errors(413)},
    )
    async def health() -> Health:
        return Health(status="ok", version=__version__)

    # -- API keys (admin; the caller's tenant only) ------------------------------------------------
    @v1.post(
        "/auth/keys",
        status_code=201,
        tags=["auth"],
        response_model=None,
        responses={**ok(201, "NewKey", doc.NEW_KEY, "the new key and its token"), **_errors(400, 409)},
    )
    async def create_key(request: Request, body: CreateKey) -> dict[str, Any]:
        """Create a key for the caller's tenant. The token is in this response only: store it now."""
        principal = admin(request)
        if runtime.auth is None:
            raise BadRequest("API keys are disabled in the open dev mode")
        ceiling = runtime.rate_limiter.per_minute if runtime.rate_limiter is not None else 0
        if body.rate_limit_per_minute is not None and 0 < ceiling < body.rate_limit_per_minute:
            raise Forbidden(
                f"rate_limit_per_minute above the server's limit ({ceiling}) can only be set by the "
                "operator (avm keys create --rate-limit)"
            )
        from agentvm.security.tenants import refuse_deleted

        await refuse_deleted(runtime, principal.tenant_id)  # a key still cached while it is deleted
        if runtime.tenant_limits is not None:  # keys must not multiply the per-key limits
            await runtime.tenant_limits.check_key_room(runtime.auth.keys, principal.tenant_id)
        record, token = await runtime.auth.keys.create(
            principal.tenant_id, body.scopes, name=body.name, rate_limit_per_minute=body.rate_limit_per_minute
        )
        return {"key": record.to_public(), "token": token}

    @v1.get(
        "/auth/keys",
        tags=["auth"],
        response_model=None,
        responses=ok(200, "KeyList", doc.KEYS, "the tenant's keys, revoked ones included"),
    )
    async def list_keys(request: Request) -> dict[str, Any]:
        principal = admin(request)
        if runtime.auth is None:
            return {"keys": []}
        return {"keys": [k.to_public() for k in await runtime.auth.keys.list(principal.tenant_id)]}

    @v1.delete(
        "/auth/keys/{key_id}",
        tags=["auth"],
        response_model=None,
        responses={**ok(200, "OneKey", doc.REVOKED_KEY, "the revoked key"), **_errors(400, 404)},
    )
    async def revoke_key(
        request: Request, key_id: str = Path(min_length=1, max_length=MAX_ID)
    ) -> dict[str, Any]:
        """Revoke at once in this process; other processes stop accepting it within the cache bound."""
        principal = admin(request)
        record = None
        if runtime.auth is not None:
            record = await runtime.auth.revoke(key_id, tenant_id=principal.tenant_id)
        if record is None:
            raise NotFound(f"API key not found: {key_id}")
        return {"key": record.to_public()}

    # -- budgets and usage (admin; the caller's tenant only) ---------------------------------------
    async def budget_view(tenant_id: str, container_id: str | None) -> dict[str, Any]:
        b = budgets()
        record = await b.store.get_budget(tenant_id, container_id)
        return {
            "daily_tokens": None if record is None else record.dailyTokens,
            "monthly_tokens": None if record is None else record.monthlyTokens,
            "usage": await b.usage(tenant_id, container_id),
        }

    # 400 also when budgets are not enabled on this server
    tenant_budget = {
        **ok(200, "Budget", doc.BUDGET, "the limits and this day's and month's usage"),
        **_errors(400),
    }
    container_budget = {
        **ok(200, "Budget", doc.CONTAINER_BUDGET, "the container's limits and usage"),
        **_errors(400),
    }

    @v1.put("/budgets/tenant", tags=["budgets"], response_model=None, responses=tenant_budget)
    async def put_tenant_budget(request: Request, body: BudgetLimits) -> dict[str, Any]:
        """Token limits (input + output) for the whole tenant; null = no limit."""
        principal = admin(request)
        await budgets().set(
            principal.tenant_id, None, daily_tokens=body.daily_tokens, monthly_tokens=body.monthly_tokens
        )
        return await budget_view(principal.tenant_id, None)

    @v1.get("/budgets/tenant", tags=["budgets"], response_model=None, responses=tenant_budget)
    async def get_tenant_budget(request: Request) -> dict[str, Any]:
        return await budget_view(admin(request).tenant_id, None)

    @v1.put(
        "/budgets/containers/{container_id}",
        tags=["budgets"],
        response_model=None,
        responses=container_budget,
    )
    async def put_container_budget(
        request: Request, body: BudgetLimits, container_id: str = CONTAINER_ID
    ) -> dict[str, Any]:
        """Token limits for one container of the caller's tenant (it need not exist yet)."""
        principal = admin(request)
        await budgets().set(
            principal.tenant_id,
            container_id,
            daily_tokens=body.daily_tokens,
            monthly_tokens=body.monthly_tokens,
        )
        return await budget_view(principal.tenant_id, container_id)

    @v1.get(
        "/budgets/containers/{container_id}",
        tags=["budgets"],
        response_model=None,
        responses=container_budget,
    )
    async def get_container_budget(request: Request, container_id: str = CONTAINER_ID) -> dict[str, Any]:
        return await budget_view(admin(request).tenant_id, container_id)

    @v1.get(
        "/usage",
        tags=["budgets"],
        response_model=None,
        responses={**ok(200, "Usage", doc.USAGE, "the usage records and their totals"), **_errors(400)},
    )
    async def usage(
        request: Request,
        containerId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803
    ) -> dict[str, Any]:
        """The tenant's usage records (one per turn, and one per compaction of a session's history:
        ``kind``), oldest first, and their totals (tokens of both: both are billed). Reads every
        record: for sums by period, end user, model and kind use ``/v1/usage/summary``."""
        principal = admin(request)
        records = await runtime.store.list_usage(principal.tenant_id, containerId)
        input_tokens = sum(r.inputTokens for r in records)
        output_tokens = sum(r.outputTokens for r in records)
        return {
            "records": [r.model_dump() for r in records],
            "totals": {
                "turns": sum(r.kind == "turn" for r in records),
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
                # additive: of inputTokens, read from and written to the provider's prompt cache
                "cacheReadTokens": sum(r.cacheReadTokens for r in records),
                "cacheWriteTokens": sum(r.cacheWriteTokens for r in records),
            },
        }

    # -- workspaces (admin; the caller's tenant only) ------------------------------------------------
    async def workspace_of(principal: Principal, container_id: str) -> Sandbox:
        if await runtime.store.get_container(principal.tenant_id, container_id) is None:
            raise NotFound(f"Container not found: {container_id}")
        if runtime.sandbox is None:
            raise NotFound("this server runs no sandbox, so containers have no workspace")
        return runtime.sandbox

    @v1.get(
        "/containers/{container_id}/workspace",
        tags=["workspaces"],
        response_model=None,
        responses={
            **ok(200, "WorkspaceListing", doc.WORKSPACE, "the directory's entries"),
            **_errors(400, 404),
        },
    )
    async def list_workspace(
        request: Request,
        container_id: str = CONTAINER_ID,
        path: str = Query(default=".", min_length=1, max_length=MAX_WORKSPACE_PATH),
    ) -> dict[str, Any]:
        """The entries of a directory of the container's sandbox workspace (its root by default)."""
        principal = admin(request)
        sandbox = await workspace_of(principal, container_id)
        try:
            entries = await sandbox.list(principal.tenant_id, container_id, path)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return {"path": path, "entries": [{"path": e.path, "kind": e.kind, "size": e.size} for e in entries]}

    @v1.get(
        "/containers/{container_id}/workspace/file",
        tags=["workspaces"],
        response_model=None,
        responses={**ok(200, "WorkspaceFile", doc.WORKSPACE_FILE, "the file's text"), **_errors(400, 404)},
    )
    async def read_workspace_file(
        request: Request,
        container_id: str = CONTAINER_ID,
        path: str = Query(min_length=1, max_length=MAX_WORKSPACE_PATH),
    ) -> dict[str, Any]:
        """A file of the container's workspace as text (UTF-8; at most 1 MiB, ``truncated`` says so)."""
        principal = admin(request)
        sandbox = await workspace_of(principal, container_id)
        limit = 1 << 20
        try:
            data = await sandbox.read(principal.tenant_id, container_id, path, max_bytes=limit + 1)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return {
            "path": path,
            "content": data[:limit].decode("utf-8", "replace"),
            "truncated": len(data) > limit,
        }

    from agentvm.api.images import image_routes
    from agentvm.api.registry import registry_routes
    from agentvm.api.resources import resource_routes

    v1.include_router(resource_routes(runtime, _errors, admin))
    v1.include_router(registry_routes(runtime, _errors, admin))
    v1.include_router(image_routes(runtime, _errors, admin))
    from agentvm.api.configcentre import config_routes

    v1.include_router(config_routes(runtime, _errors, admin))
    from agentvm.api.tenants import tenant_routes

    v1.include_router(tenant_routes(runtime, _errors, admin))
    from agentvm.api.metrics import metrics_routes

    v1.include_router(metrics_routes(runtime, _errors, admin))
    from agentvm.api.logs import log_routes

    v1.include_router(log_routes(runtime, _errors, admin))
    from agentvm.api.usage import usage_routes

    v1.include_router(usage_routes(runtime, _errors, admin))
    from agentvm.api.turns import turn_routes

    v1.include_router(turn_routes(runtime, _errors, admin))
    from agentvm.api.sessions import session_routes

    v1.include_router(session_routes(runtime, _errors, admin))
    app.include_router(v1)
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI documents a 422 on every route with parameters; ours answer validation errors 400."""
        if app.openapi_schema is None:
            schema = default_openapi()  # cached on the app: edited in place, once
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            finish_document(schema)  # answers' schemas, examples as written
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
    return app


__all__ = [
    "STATUS",
    "ErrorBody",
    "bearer_scheme",
    "create_app",
    "error_body",
    "error_response",
    "error_status",
    "principal_of",
]
