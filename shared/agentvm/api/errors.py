"""How the HTTP API answers errors: one shape, ``{"error": {"code": "...", "message": "...", ...}}``,
the status chosen by the error's type (``STATUS``), and the same statuses documented on every route
(``error_responses``, with the shape ``ErrorBody``).

The exception handlers ``create_app`` installs are here too: an ``AgentVMError`` by its status, a
validation error as 400 (never 422), Starlette's HTTP errors (404, 405) in the same shape, and any
other exception as a masked 500 (logged, never sent).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from agentvm.api import examples as doc
from agentvm.api.openapi import error_examples
from agentvm.errors import (
    AgentVMError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    QuotaExceeded,
    StorageQuotaExceeded,
    StorageUnavailable,
    Unauthorized,
)
from agentvm.logs import log_refusal

if TYPE_CHECKING:
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from agentvm.api.body_limit import BodyTooLarge

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


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` for these error statuses, each with the error shape."""
    return {
        status: {"model": ErrorBody, **_ERRORS[status], **error_examples(doc.ERRORS.get(status, []))}
        for status in statuses
    }


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


def _now_ms(request: Request) -> int:
    return request.app.state.runtime.clock.now_ms()


# -- the exception handlers (``create_app`` installs them) ----------------------------------------
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
    return error_response(exc, now_ms=_now_ms(request))


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]]
    return error_response(BadRequest("; ".join(parts) or "invalid request"), now_ms=_now_ms(request))


async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse(
        {"error": {"code": code, "message": str(exc.detail)}},
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def body_too_large(_request: Request, exc: BodyTooLarge) -> JSONResponse:
    raise exc  # BodyLimit answers 413 itself; an exception handler must not turn it into a 500


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("HTTP route failed", exc_info=exc)  # details logged (masked), never sent
    return error_response(AgentVMError("internal error"), now_ms=_now_ms(request))


__all__ = [
    "STATUS",
    "ErrorBody",
    "agentvm_error",
    "body_too_large",
    "error_body",
    "error_response",
    "error_responses",
    "error_status",
    "http_error",
    "internal_error",
    "invalid_request",
]
