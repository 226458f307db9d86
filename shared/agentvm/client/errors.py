"""What the SDK raises. Failures of the server's own are answers, not exceptions, until a typed
method (or ``request(..., check=True)``) turns them into ``RequestFailed``."""

from __future__ import annotations

from typing import Any


class AgentVMClientError(Exception):
    """Base of every error the SDK raises."""


class RequestFailed(AgentVMClientError):
    """The server answered a request with an error (``data.error``, ``data.code``)."""

    def __init__(self, type_: str, data: dict[str, Any]) -> None:
        super().__init__(f"{type_}: {data.get('error')}")
        self.type = type_
        self.data = data
        self.code: str = str(data.get("code") or "unknown_error")
        self.message: str = str(data.get("error") or "")


class ConnectionLost(AgentVMClientError):
    """The connection dropped and could not be opened again (or was closed), or it dropped while
    a request that is not safe to send twice waited for its answer (it may or may not have been
    applied: look before retrying)."""


class AuthenticationFailed(ConnectionLost):
    """The server refused the API key when the WebSocket was opened (HTTP 401 or 403)."""


__all__ = ["AgentVMClientError", "AuthenticationFailed", "ConnectionLost", "RequestFailed"]
