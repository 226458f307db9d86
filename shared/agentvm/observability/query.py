"""What a caller may ask ``/v1/metrics`` and ``/v1/logs`` for: a time range, a log level, a page
cursor; each parsed here once, each refused with its own stable error code.

- Times are epoch milliseconds or ISO 8601 (``2026-01-15T12:00:00Z``; no zone = UTC). ``since``
  must be before ``until``, neither more than 5 minutes in the future, and the range at most
  ``MAX_RANGE_DAYS`` long: ``invalid_time_range``.
- A level is a name (``debug``, ``info``, ``warning``/``warn``, ``error``, ``critical``, any case):
  the lines at that level and above. Anything else: ``invalid_level``.
- A cursor is what the previous page's ``next`` said, opaque to the caller (base64url JSON). A
  cursor that does not decode, or decodes to the wrong shape: ``invalid_cursor``. A cursor only
  says where a page starts: the caller's filters (its tenant first) apply to every page.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentvm.errors import InvalidCursor, InvalidLevel, InvalidTimeRange

MAX_RANGE_DAYS = 14
FUTURE_SLACK_MS = 5 * 60_000
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "WARN": 30, "ERROR": 40, "CRITICAL": 50, "FATAL": 50}
LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, slots=True)
class TimeRange:
    since_ms: int
    until_ms: int


def parse_time(value: str, name: str) -> int:
    """``value`` (epoch ms, or ISO 8601) as epoch milliseconds."""
    text = value.strip()
    if text.lstrip("-").isdigit():
        ms = int(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidTimeRange(
                f"{name}: {value[:40]!r} is not a time (epoch milliseconds, or ISO 8601 such as "
                "2026-01-15T12:00:00Z)"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        ms = int(parsed.timestamp() * 1000)
    if ms < 0:
        raise InvalidTimeRange(f"{name}: a time before 1970 ({ms})")
    return ms


def time_range(since: str | None, until: str | None, *, now_ms: int, default_span_ms: int) -> TimeRange:
    """The range asked for: ``until`` defaults to now, ``since`` to ``default_span_ms`` before it."""
    end = now_ms if until is None else parse_time(until, "until")
    start = end - default_span_ms if since is None else parse_time(since, "since")
    if start >= end:
        raise InvalidTimeRange(f"since ({start}) must be before until ({end})")
    if start > now_ms + FUTURE_SLACK_MS:
        raise InvalidTimeRange(f"since ({start}) is in the future")
    if end - start > MAX_RANGE_DAYS * 86_400_000:
        raise InvalidTimeRange(f"the range is longer than {MAX_RANGE_DAYS} days: narrow it")
    return TimeRange(start, min(end, now_ms + FUTURE_SLACK_MS))


def parse_level(value: str | None) -> int:
    """The lowest level number a caller asked for (0: every line)."""
    if value is None:
        return 0
    number = LEVELS.get(value.strip().upper())
    if number is None:
        names = ", ".join(n.lower() for n in LEVEL_NAMES)
        raise InvalidLevel(f"level: {value[:20]!r} is not a level ({names})")
    return number


def level_name(number: int) -> str:
    """The name of a level number (custom levels: the next standard one below)."""
    for name in reversed(LEVEL_NAMES):
        if number >= LEVELS[name]:
            return name
    return "NOTSET"


def encode_cursor(position: dict[str, Any]) -> str:
    raw = json.dumps(position, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, fields: dict[str, type]) -> dict[str, Any] | None:
    """The position a cursor holds (None: the first page); its fields must have these types."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor("cursor: not a cursor this route gave (use the previous page's next)") from None
    if (
        not isinstance(position, dict)
        or set(position) != set(fields)
        or any(type(position[k]) is not t for k, t in fields.items())
        or any(isinstance(v, int) and v < 0 for v in position.values())
    ):
        raise InvalidCursor("cursor: not a cursor this route gave (use the previous page's next)")
    return position


__all__ = [
    "LEVELS",
    "LEVEL_NAMES",
    "MAX_RANGE_DAYS",
    "TimeRange",
    "decode_cursor",
    "encode_cursor",
    "level_name",
    "parse_level",
    "parse_time",
    "time_range",
]
