"""Whose work a log line is about: tenant, container, session and turn ids on every line.

The core binds the ids where it learns them (``bind``: a turn binds all four, a WebSocket frame or
an HTTP request its caller's tenant), as task-local context variables, and ``LogContext``, a
filter on the log handlers (``logs.configure_logging`` locally, the Powertools handler on Lambda),
copies them onto each record as ``tenant_id``, ``container_id``, ``session_id`` and ``turn_id``.
``/v1/logs`` filters on exactly these fields: a line without ``tenant_id`` is platform-internal
and shown to platform admins only.

``bind`` returns a token; ``unbind(token)`` restores what was bound before, so a request's or a
turn's ids never leak onto the next one handled by the same task (a Lambda invocation's loop).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

FIELDS = ("tenant_id", "container_id", "session_id", "turn_id")
_ids: ContextVar[dict[str, str] | None] = ContextVar("log_ids", default=None)


def bind(**ids: str | None) -> Any:
    """Add these ids (``tenant_id=...``) to what this task's log lines carry; None leaves an id
    as it was. Returns the token for ``unbind``."""
    current = dict(_ids.get() or {})
    current.update({k: v for k, v in ids.items() if v is not None and k in FIELDS})
    return _ids.set(current)


def unbind(token: Any) -> None:
    _ids.reset(token)


def bound() -> dict[str, str]:
    """The ids this task's log lines carry now."""
    return dict(_ids.get() or {})


class LogContext(logging.Filter):
    """Copies the bound ids onto each record of AgentVM's own loggers (``agentvm.*``; fields a
    caller passed in ``extra`` win). Other libraries' lines stay platform-internal, even when
    logged while a tenant's work runs: what they say is the platform's business."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get()
        if ids and (record.name == "agentvm" or record.name.startswith("agentvm.")):
            for key, value in ids.items():
                if key not in record.__dict__:
                    record.__dict__[key] = value
        return True


__all__ = ["FIELDS", "LogContext", "bind", "bound", "unbind"]
