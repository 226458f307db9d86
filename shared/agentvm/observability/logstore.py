"""``/v1/logs``: recent structured log lines, filtered and paginated, each host's ``LogStore``.

Hosts: the local host keeps the lines itself (``adapters/local/sqlite/logs.py``: a size-capped
SQLite file in the data dir, oldest lines dropped first); the AWS host asks CloudWatch Logs
Insights for them (``adapters/aws/cloudwatch/logs.py``). Both answer the same ``LogQuery`` with
the same line shape (``public_line``), newest first, a page at a time.

Isolation: a tenant's query is always scoped to its tenant (``LogQuery.tenant_id``): it gets the
lines carrying its ``tenant_id`` only, never another tenant's nor a platform-internal line (one
with no tenant); platform admins see every line, or one tenant's. A tenant's view of its own lines
also leaves out the platform's internals (``INTERNAL_FIELDS``: tracebacks, Lambda's function
ARN with the account id, code locations); a failure keeps its exception's type. A line that
carries an EMF document (AWS: ``turn finished``, ``connected``, ``disconnected``:
``adapters/aws/emf_metrics.held``) is shown without the metrics' machinery (``METRIC_FIELDS``).

Secrets: the lines were masked when written (``logs.SecretMask``); the API-key, ``token=`` and
``Authorization`` patterns are masked once more as they are read (``logs.mask_text``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentvm.logs import mask_text
from agentvm.observability.query import LEVELS, decode_cursor, encode_cursor, level_name
from agentvm.ports.observability import DEFAULT_LOG_LIMIT, LogPage

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentvm.ports import LogQuery

MAX_LIMIT = 500
DEFAULT_LIMIT = DEFAULT_LOG_LIMIT
# Fields of a stored line that are the platform's business, not a tenant's.
INTERNAL_FIELDS = frozenset(
    {
        "exc",
        "exception",
        "stack_trace",
        "location",
        "function_arn",
        "function_name",
        "function_memory_size",
        "function_request_id",
        "xray_trace_id",
        "cold_start",
        "sampling_rate",
        "service",
    }
)
# Fields of a line that carries an EMF document (AWS: `turn finished`) that are the metrics'
# machinery, not the line's: the directive and the document's mark.
METRIC_FIELDS = frozenset({"_aws", "avm_metric"})
# Fields mapped onto the line's own keys (the local JSON format's, and Powertools').
_OWN = frozenset(
    {
        "ts",
        "timestamp",
        "level",
        "logger",
        "msg",
        "message",
        "tenant_id",
        "container_id",
        "session_id",
        "turn_id",
    }
)


def public_line(
    raw: Mapping[str, Any] | str, *, line_id: str, ts_ms: int | None, tenant_view: bool
) -> dict[str, Any]:
    """A stored line (our JSON, Powertools' JSON, or plain text) as ``/v1/logs`` answers it."""
    if isinstance(raw, str):
        return {
            "id": line_id,
            "ts": ts_ms,
            "level": "INFO",
            "logger": None,
            "msg": mask_text(raw.strip()),
            "tenantId": None,
            "containerId": None,
            "sessionId": None,
            "turnId": None,
            "fields": {},
        }
    level = str(raw.get("level") or "INFO").upper()
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _OWN or key in METRIC_FIELDS or (tenant_view and key in INTERNAL_FIELDS):
            continue
        fields[key] = mask_text(value) if isinstance(value, str) else value
    if tenant_view and ("exc" in raw or "exception" in raw):
        fields["error"] = raw.get("exception_name") or _exception_type(
            str(raw.get("exc") or raw.get("exception"))
        )
    return {
        "id": line_id,
        "ts": ts_ms if ts_ms is not None else _ts_of(raw),
        "level": level_name(LEVELS.get(level, 20)),
        "logger": raw.get("logger"),
        "msg": mask_text(str(raw.get("msg", raw.get("message", "")))),
        "tenantId": raw.get("tenant_id"),
        "containerId": raw.get("container_id"),
        "sessionId": raw.get("session_id"),
        "turnId": raw.get("turn_id"),
        "fields": fields,
    }


def matches(line: Mapping[str, Any], query: LogQuery) -> bool:
    """Whether a public line answers ``query`` (the AWS host re-checks every row it is given)."""
    if query.tenant_id is not None and line.get("tenantId") != query.tenant_id:
        return False
    for key, wanted in (
        ("containerId", query.container_id),
        ("sessionId", query.session_id),
        ("turnId", query.turn_id),
    ):
        if wanted is not None and line.get(key) != wanted:
            return False
    if query.min_level and LEVELS.get(str(line.get("level")), 0) < query.min_level:
        return False
    ts = line.get("ts")
    if query.since_ms is not None and (ts is None or ts < query.since_ms):
        return False
    return not (query.until_ms is not None and (ts is None or ts > query.until_ms))


def parse_stored(text: str) -> Mapping[str, Any] | str:
    """A stored line as JSON when it is a JSON object, else the text itself (Lambda's own lines)."""
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        if isinstance(parsed, dict):
            return parsed
    return text


def _ts_of(raw: Mapping[str, Any]) -> int | None:
    ts = raw.get("ts")
    if isinstance(ts, int | float):
        return int(ts * 1000)
    stamp = raw.get("timestamp")
    if isinstance(stamp, str):  # Powertools: "2026-01-15 12:00:00,123+0000"
        try:
            return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f%z").timestamp() * 1000)
        except ValueError:
            return None
    return None


def _exception_type(text: str) -> str:
    """The exception's type from a traceback's last line ("ValueError: ..." -> "ValueError")."""
    last = text.strip().splitlines()[-1] if text.strip() else ""
    return last.split(":", 1)[0].strip()[:100] or "error"


def page_select(query: LogQuery, placeholder: str) -> tuple[str, tuple[str | int, ...]]:
    """The SQL stores' page query on ``log_lines`` (``id, ts, line``; newest first, one row more
    than the page to tell whether another follows) and its arguments; ``placeholder`` is the
    driver's (``?`` for sqlite3, ``%s`` for psycopg)."""
    position = decode_cursor(query.cursor, {"b": int})
    where: list[str] = []
    args: list[str | int] = []
    for condition, bound in (
        ("tenant_id =", query.tenant_id),
        ("container_id =", query.container_id),
        ("session_id =", query.session_id),
        ("turn_id =", query.turn_id),
        ("level >=", query.min_level or None),
        ("ts >=", query.since_ms),
        ("ts <=", query.until_ms),
        ("id <", None if position is None else position["b"]),
    ):
        if bound is not None:
            where.append(f"{condition} {placeholder}")
            args.append(bound)
    sql = "SELECT id, ts, line FROM log_lines"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return f"{sql} ORDER BY id DESC LIMIT {placeholder}", (*args, query.limit + 1)


def page_of(rows: Sequence[Sequence[Any]], query: LogQuery) -> LogPage:
    """The page answering ``query`` from ``page_select``'s rows."""
    tenant_view = query.tenant_id is not None
    lines = [
        public_line(parse_stored(line), line_id=str(row_id), ts_ms=ts, tenant_view=tenant_view)
        for row_id, ts, line in rows[: query.limit]
    ]
    more = len(rows) > query.limit
    return LogPage(lines, encode_cursor({"b": rows[query.limit - 1][0]}) if more else None)


__all__ = [
    "DEFAULT_LIMIT",
    "INTERNAL_FIELDS",
    "MAX_LIMIT",
    "METRIC_FIELDS",
    "matches",
    "page_of",
    "page_select",
    "parse_stored",
    "public_line",
]
