"""The headline figures of a BENCHMARKS.md, and the previous run's side by side with the new one's.

``run_all`` reads the BENCHMARKS.md it is about to replace, takes the same figures from both with
the same parser (markdown tables found under their section headings, columns found by name), and
writes them old vs new. A figure a file does not have (a benchmark added since, a section whose
layout changed) is shown as "—", never guessed.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def sections(md: str) -> dict[str, str]:
    """``## heading`` -> the text under it (up to the next ``## ``)."""
    out: dict[str, str] = {}
    for block in re.split(r"^## ", md, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        out[heading.strip()] = body
    return out


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table in ``text``: its rows as {header: cell}, cells stripped of ``**``."""
    found: list[list[dict[str, str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\|[\s:|-]+\|?$", lines[i + 1].strip()):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                rows.append(dict(zip(header, cells, strict=False)))
                i += 1
            found.append(rows)
        else:
            i += 1
    return found


def _cells(line: str) -> list[str]:
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


def _section(md: str, prefix: str) -> str:
    return next((body for heading, body in sections(md).items() if heading.startswith(prefix)), "")


def _number(cell: str | None) -> float | None:
    if not cell:
        return None
    match = _NUMBER.search(cell)
    return float(match.group().replace(",", "")) if match else None


def headline(md: str) -> dict[str, float | None]:
    """The figures compared from run to run (None where the file does not have one)."""
    out: dict[str, float | None] = {}
    aws = tables(_section(md, "AWS cost per standard turn"))
    total = next((r for t in aws[:1] for r in t if r.get("component") == "total"), {})
    out["AWS $ per million standard turns, idle"] = _number(total.get("idle: $/M turns"))
    out["AWS $ per million standard turns, under load"] = _number(total.get("load: $/M turns"))
    local = [
        r
        for t in tables(_section(md, "Local latency and concurrency"))
        for r in t
        if "inter_delta_lag_ms_p99" in r
        and r.get("reported", "yes") != "no"  # a repeated run that was not the median one
        and r.get("mode", "burst") == "burst"
        and r.get("workers", "1") == "1"
    ]
    for row in local:
        n = row.get("clients", "?")
        for key, label in (
            ("first_delta_added_ms_p50", "first-delta added latency p50, ms"),
            ("first_delta_added_ms_p99", "first-delta added latency p99, ms"),
            ("inter_delta_lag_ms_p99", "inter-delta lag p99, ms"),
            ("rss_per_idle_connection_kb", "RSS per idle connection, KB"),
            ("server_cpu_ms_per_turn", "server CPU per turn, ms"),
        ):
            out[f"local, {n} clients (all at once): {label}"] = _number(row.get(key))
    for row in (r for t in tables(_section(md, "Local latency and concurrency")) for r in t):
        if (
            row.get("mode") == "steady"
            and row.get("workers", "1") == "1"
            and "inter_delta_lag_ms_p99" in row
            and row.get("reported", "yes") != "no"
        ):
            n = row.get("clients", "?")
            out[f"local, {n} streams steady: inter-delta lag p99, ms"] = _number(
                row["inter_delta_lag_ms_p99"]
            )
    for row in (r for t in tables(_section(md, "Peer side by side")) for r in t):
        ratio = row.get("latency ratio (LangGraph / AgentVM)")
        if ratio is not None:
            out[f"LangGraph / AgentVM added latency, {row.get('clients', '?')} clients"] = _number(ratio)
    steps = next((r for t in tables(_section(md, "Runtime overhead per tool step")) for r in t), None)
    for t in tables(_section(md, "Runtime overhead per tool step")):
        steps = next((r for r in t if r.get("turn") == "added per tool step"), steps)
    out["runtime overhead per tool step, ms"] = _number((steps or {}).get("median wall time"))
    history = [r for t in tables(_section(md, "History scaling")) for r in t]
    out["turn overhead, 10,000 vs 10 history messages (x)"] = (
        _number(history[-1].get("ratio_vs_smallest")) if history else None
    )
    search = [r for t in tables(_section(md, "Session search")) for r in t]
    warm = next((r for r in search if r.get("search", "").startswith("phrase (1 hit), warm")), {})
    out["session search, SQLite, warm phrase, ms"] = _number(warm.get("latency ms"))
    return out


def comparison(previous: str, current: str) -> str:
    """A markdown table: each headline figure, previously and now."""
    old, new = headline(previous), headline(current)
    rows = ["| figure | previous run | this run | change |", "|---|---:|---:|---:|"]
    for name in dict.fromkeys([*new, *old]):
        a, b = old.get(name), new.get(name)
        if a is None and b is None:
            continue
        change = f"{b / a:.2f}x" if a and b is not None else "—"
        rows.append(f"| {name} | {_fmt(a)} | {_fmt(b)} | {change} |")
    return "\n".join(rows) + "\n"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


__all__ = ["comparison", "headline", "sections", "tables"]
