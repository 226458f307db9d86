"""A usage report as a file for billing: CSV (one header line, one line per row) or JSON Lines.

The rows are those of ``/v1/usage/summary`` (``observability.usage``), priced
(``observability.pricing``): per period and grouping values, the tokens, the charge (list-price
cost x the markup), what prompt caching saved (``cacheSavings``, at the charged prices) and,
for platform admins, the cost. Every line carries the currency. What the reply cache saved
(``savedInputTokens``, ``savedOutputTokens``, ``replyCacheSavings`` at the charged prices) comes
last, after the currency: columns are only ever appended, so a reader of the older files (by
position) still reads them. Amounts are dollars rounded to micro-dollars (six decimals), written
in plain decimal notation.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any, Literal

from agentvm.observability.pricing import CURRENCY
from agentvm.observability.usage import COLUMNS

if TYPE_CHECKING:
    from collections.abc import Sequence

Format = Literal["csv", "jsonl"]
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
_TOKENS = (
    "records",
    "turns",
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "totalTokens",
    "estimatedRecords",
)
# appended after the currency (columns added later go at the end; existing ones never move)
_REPLY_CACHE = ("savedInputTokens", "savedOutputTokens", "replyCacheSavings")
_MONEY = ("cost", "charge", "cacheSavings", "replyCacheSavings")


def columns(group_by: Sequence[str], *, with_cost: bool) -> list[str]:
    money = ["cost", "charge", "cacheSavings"] if with_cost else ["charge", "cacheSavings"]
    return [
        "period",
        *(COLUMNS[d] for d in group_by),
        *_TOKENS,
        *money,
        "unpricedTokens",
        "currency",
        *_REPLY_CACHE,
    ]


def render(rows: Sequence[dict[str, Any]], group_by: Sequence[str], fmt: Format, *, with_cost: bool) -> str:
    names = columns(group_by, with_cost=with_cost)
    lines = [{n: CURRENCY if n == "currency" else row.get(n) for n in names} for row in rows]
    if fmt == "jsonl":
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for line in lines:
        writer.writerow({k: f"{v:.6f}" if k in _MONEY else v for k, v in line.items()})
    return out.getvalue()


__all__ = ["MEDIA_TYPES", "Format", "columns", "render"]
