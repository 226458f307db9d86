"""The ``LogStore`` port on CloudWatch Logs: ``/v1/logs`` on the AWS host, by Logs Insights.

Every function logs JSON lines (Powertools' format; the core's ``agentvm.*`` lines through it,
tagged with tenant, container, session and turn ids by ``LogContext``) to the stack's one log
group. A page is one Insights query over that group (``logs_query``): a ``tenant_id`` stage of its
own for a tenant (none for a platform admin), one stage per other filter, the level as a list of
names, the EMF metric documents left out (but a log line that carries one, ``turn finished``,
shown: ``emf_metrics.held``), newest first.

Each row the query returns is parsed and checked against the whole query once more (``matches``),
tenant first, before it is shaped into a line: a line reaches a caller only if both the query and
this check say it is theirs. (moto, which the tests run on, does not evaluate Insights filters at
all; the check is what keeps its answers right, and the query string is tested on its own.)

Cursor: the time of the last line of the page and how many lines of that same millisecond were
shown; the next page's query ends at that time and skips those. Default range: the last hour
(each query is billed by the data it scans: $0.005 per GB).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentvm.adapters.aws.cloudwatch.emf_metrics import MARK
from agentvm.adapters.aws.cloudwatch.logs_insights import quoted
from agentvm.observability.logstore import matches, parse_stored, public_line
from agentvm.observability.query import LEVEL_NAMES, LEVELS, decode_cursor, encode_cursor
from agentvm.ports import LogPage, LogQuery

if TYPE_CHECKING:
    from agentvm.adapters.aws.cloudwatch.logs_insights import LogsInsights

HOUR_MS = 3_600_000
MAX_QUERIES = 20


def logs_query(query: LogQuery, *, since_ms: int, until_ms: int, limit: int) -> str:
    """The Insights query of one page. The tenant's stage comes first, and every value is quoted."""
    stages = ["fields @timestamp, @message, @ptr"]
    for field, value in (
        ("tenant_id", query.tenant_id),
        ("container_id", query.container_id),
        ("session_id", query.session_id),
        ("turn_id", query.turn_id),
    ):
        if value is not None:
            stages.append(f"filter {field} = {quoted(value)}")
    # EMF documents are not log lines, unless a log line carries one (`turn finished`: emf_metrics)
    stages.append(f"filter not ispresent({MARK}) or ispresent(message)")
    if query.min_level:
        names = [n for n in LEVEL_NAMES if LEVELS[n] >= query.min_level]
        if "WARNING" in names:
            names.append("WARN")
        stages.append("filter level in [" + ", ".join(quoted(n) for n in names) + "]")
    stages.append(f"filter @timestamp >= {int(since_ms)} and @timestamp <= {int(until_ms)}")
    stages += ["sort @timestamp desc", f"limit {int(limit)}"]
    return "\n| ".join(stages)


class CloudWatchLogStore:
    def __init__(self, insights: LogsInsights, *, now_ms: Any) -> None:
        self.insights = insights
        self._now_ms = now_ms

    async def page(self, query: LogQuery) -> LogPage:
        position = decode_cursor(query.cursor, {"t": int, "n": int})
        until = query.until_ms if query.until_ms is not None else self._now_ms()
        since = query.since_ms if query.since_ms is not None else until - HOUR_MS
        lines: list[dict[str, Any]] = []
        # One query answers a page on AWS (every row it returns matches). Only a store that
        # ignores the query's filters (moto) returns rows the check refuses; then the page is
        # filled by querying on from where the last query stopped (at most MAX_QUERIES).
        for _ in range(MAX_QUERIES):
            found, position, exhausted = await self._scan(
                query, since, until, position, query.limit - len(lines)
            )
            lines += found
            if exhausted or len(lines) >= query.limit:
                break
        next_cursor = None if exhausted or position is None else encode_cursor(position)
        return LogPage(lines, next_cursor)

    async def _scan(
        self, query: LogQuery, since: int, until: int, position: dict[str, int] | None, need: int
    ) -> tuple[list[dict[str, Any]], dict[str, int] | None, bool]:
        """Up to ``need`` lines after ``position``; the position after the last row looked at, and
        whether no row is left after it."""
        skip = 0
        if position is not None:
            until, skip = min(until, position["t"]), position["n"]
        wanted = need + skip + 1
        while True:
            text = logs_query(query, since_ms=since, until_ms=until, limit=wanted)
            rows = await self.insights.run(text, since, until, limit=wanted)
            # rows after ``until`` (a store that ignored the time stage, moto's, whose range is in
            # whole seconds) take room from older ones: ask again with room for them
            later = sum(1 for row in rows if _ts_of_row(row) > until)
            if not later or len(rows) < wanted or wanted >= 10_000:
                break
            wanted = min(10_000, wanted + later)
        scoped = LogQuery(
            tenant_id=query.tenant_id,
            container_id=query.container_id,
            session_id=query.session_id,
            turn_id=query.turn_id,
            min_level=query.min_level,
            since_ms=since,
            until_ms=until,
        )
        tenant_view = query.tenant_id is not None
        rows = sorted(rows, key=_ts_of_row, reverse=True)
        lines: list[dict[str, Any]] = []
        last_ts = None if position is None else position["t"]
        count = 0 if position is None else position["n"]  # rows of last_ts's millisecond passed
        i = 0
        while i < len(rows) and len(lines) < need:
            row, i = rows[i], i + 1
            ts = _ts_of_row(row)
            if ts > until:
                continue  # after the range (only a store that ignored the query returns it)
            if position is not None and ts == position["t"] and skip > 0:
                skip -= 1  # shown on a previous page
                continue
            count = count + 1 if ts == last_ts else 1
            last_ts = ts
            stored = parse_stored(row.get("@message", ""))
            if not isinstance(stored, str) and MARK in stored and "message" not in stored:
                continue  # an EMF metric document alone, never a log line
            line = public_line(stored, line_id=row.get("@ptr", ""), ts_ms=ts, tenant_view=tenant_view)
            if matches(line, scoped):
                lines.append(line)
        exhausted = i >= len(rows) and len(rows) < wanted
        after = None if last_ts is None else {"t": last_ts, "n": count}
        return lines, after, exhausted


def _ts_of_row(row: dict[str, str]) -> int:
    """``@timestamp`` of a result row: Insights gives "2026-01-15 12:00:00.123" (UTC)."""
    value = row.get("@timestamp", "")
    if value.isdigit():
        return int(value)
    try:
        return int(datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        return 0


__all__ = ["CloudWatchLogStore", "logs_query"]
