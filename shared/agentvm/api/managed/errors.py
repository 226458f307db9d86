"""Errors in the Managed Agents API's own shape, so the ``anthropic`` SDK raises its own exception
types: ``{"type": "error", "error": {"type": "not_found_error", "message": ...}}`` with the status
that type stands for (``AuthenticationError`` for 401, ``NotFoundError`` for 404, ...).

``AnthropicRoute`` is the route class of the ``/anthropic`` router: whatever a handler (or its
dependencies, authentication and validation included) raises is answered in that shape there, so
the rest of the app keeps AgentVM's own error shape (``api/errors.py``). What is not served is a
``501`` with ``x-should-retry: false``, the header both official SDKs obey before their own policy
(which retries every 5xx).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentvm.api.errors import error_status
from agentvm.errors import AgentVMError, RateLimited

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from fastapi import Request, Response

log = logging.getLogger("agentvm.api.managed")

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    501: "api_error",
    503: "overloaded_error",
    507: "invalid_request_error",
}


class NotServed(AgentVMError):
    """A part of the Managed Agents API AgentVM does not serve (docs/managed-agents.md)."""

    code = "not_served"


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def answer(exc: Exception) -> JSONResponse:
    """The error response for what a handler raised."""
    if isinstance(exc, NotServed):  # the SDKs retry a 5xx unless told not to: a retry gets the same
        return error_response(501, exc.message, {"x-should-retry": "false"})
    if isinstance(exc, AgentVMError):
        status = error_status(exc)
        headers = {"Retry-After": "60"} if isinstance(exc, RateLimited) else None
        return error_response(status, exc.message, headers)
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(400, f"{where}: {first.get('msg', 'invalid request')}")
    if isinstance(exc, StarletteHTTPException):
        return error_response(exc.status_code, str(exc.detail))
    log.exception("managed agents route failed")
    return error_response(500, "internal error (logged on the server)")


class AnthropicRoute(APIRoute):
    """A route whose errors are answered in the Managed Agents API's error shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every error: the SDK reads this shape only
                return answer(exc)

        return route


def error_body_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "type": {"const": "error"},
            "error": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    }


__all__ = ["ERROR_TYPES", "AnthropicRoute", "NotServed", "answer", "error_body_schema", "error_response"]
