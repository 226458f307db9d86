"""UTC hours, days and months as epoch milliseconds, their keys, and the instants clients write.

Usage is bucketed in UTC: an hour is ``[h, h + 1 h)``, a day ``[00:00, 24:00)``, a month its
calendar month. Keys sort like the periods (``2026-01-07T13``, ``2026-01-07``, ``2026-01``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

_INSTANT = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2})(?::(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.\d{1,6})?)?)?(?:Z|[+-]00:?00)?)?)?"
)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def hour_start(ms: int) -> int:
    return ms - ms % HOUR_MS


def day_start(ms: int) -> int:
    return ms - ms % DAY_MS


def month_start(ms: int) -> int:
    return _ms(_dt(ms).replace(day=1, hour=0, minute=0, second=0, microsecond=0))


def next_month(ms: int) -> int:
    """The first millisecond of the month after the one ``ms`` falls in."""
    d = _dt(month_start(ms))
    return _ms(d.replace(year=d.year + (d.month == 12), month=d.month % 12 + 1))


def hour_key(ms: int) -> str:
    return _dt(ms).strftime("%Y-%m-%dT%H")


def day_key(ms: int) -> str:
    return _dt(ms).strftime("%Y-%m-%d")


def month_key(ms: int) -> str:
    return _dt(ms).strftime("%Y-%m")


def iso(ms: int) -> str:
    return _dt(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_instant(text: str) -> int | None:
    """``2026-01``, ``2026-01-07``, ``2026-01-07T13``, ``2026-01-07T13:00[:00]Z`` (UTC) or epoch
    milliseconds, as epoch ms; None if it is none of these (or not a real date)."""
    text = text.strip()
    if text.isdigit() and len(text) >= 10:
        return int(text)
    match = _INSTANT.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    try:
        dt = datetime(
            int(parts["y"]),
            int(parts["mo"]),
            int(parts["d"] or 1),
            int(parts["h"] or 0),
            int(parts["mi"] or 0),
            int(parts["s"] or 0),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    return _ms(dt)


def month_of(text: str) -> tuple[int, int] | None:
    """A billing month ``YYYY-MM`` as ``[first ms, first ms of the next month)``."""
    if not re.fullmatch(r"\d{4}-\d{2}", text.strip()):
        return None
    start = parse_instant(text)
    return None if start is None else (start, next_month(start))


__all__ = [
    "DAY_MS",
    "HOUR_MS",
    "day_key",
    "day_start",
    "hour_key",
    "hour_start",
    "iso",
    "month_key",
    "month_of",
    "month_start",
    "next_month",
    "parse_instant",
]
