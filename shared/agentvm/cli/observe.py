"""``avm usage`` and ``avm turns``: a running server's usage and billing routes and its running
turns, over HTTP (docs/usage.md).

Like the other remote commands (``cli.remote``): ``--url`` (env ``AVM_URL``) and ``--key`` (env
``AVM_API_KEY``, an admin key; a platform admin's to name other tenants). JSON answers are printed
as JSON; ``export`` writes the file's text as the server sent it (to ``--output`` or stdout).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from agentvm.cli.remote import DEFAULT_URL, call


def add_observe_commands(sub: Any) -> None:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help=f"the server (default {DEFAULT_URL}, env AVM_URL)")
    server.add_argument("--key", help="an admin API key (env AVM_API_KEY)")
    query = argparse.ArgumentParser(add_help=False)
    query.add_argument("--period", choices=["hour", "day", "month", "range"], help="default: range")
    query.add_argument("--group-by", help="comma-separated: tenant, container, image, model, kind")
    query.add_argument("--from", dest="start", help="UTC date or time, inclusive (default: this month)")
    query.add_argument("--to", dest="end", help="UTC date or time, exclusive (default: end of today)")
    query.add_argument("--month", help="a billing month, YYYY-MM (instead of --from/--to)")
    query.add_argument("--container", help="one container (end user)")
    query.add_argument("--tenant", help="platform admins: a tenant, or '*' for every tenant")

    usage = sub.add_parser("usage", help="usage and billing of a running server (/v1/usage)")
    usage_sub = usage.add_subparsers(dest="usage_command", required=True)
    usage_sub.add_parser("summary", parents=[server, query], help="token sums (and charges) by grouping")
    export = usage_sub.add_parser(
        "export", parents=[server, query], help="a billing period as CSV or JSON Lines"
    )
    export.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    export.add_argument("--output", type=Path, help="write the file here (default: stdout)")
    usage_sub.add_parser("prices", parents=[server], help="the price per model and the markup")
    records = usage_sub.add_parser(
        "records",
        parents=[server],
        help="the usage records, with what caching and the reply cache saved per turn and session",
    )
    records.add_argument("--container", help="one container (end user)")

    turns = sub.add_parser("turns", help="the turns queued, running or suspended (/v1/turns)")
    turns_sub = turns.add_subparsers(dest="turns_command", required=True)
    ls = turns_sub.add_parser("list", parents=[server], help="status, model, age and tokens so far")
    ls.add_argument("--container", help="one container (end user)")
    ls.add_argument("--status", help="comma-separated: queued, running, suspended")
    ls.add_argument("--tenant", help="platform admins: another tenant")
    stop = turns_sub.add_parser("cancel", parents=[server], help="stop turns (as agent_interrupt does)")
    which = stop.add_mutually_exclusive_group(required=True)
    which.add_argument("turn_ids", nargs="*", default=[], metavar="TURN_ID", help="these turns")
    which.add_argument("--container", help="every unfinished turn of a container")
    which.add_argument("--all", action="store_true", help="every unfinished turn of the tenant")
    stop.add_argument("--tenant", help="platform admins: another tenant")


def _query(args: argparse.Namespace) -> dict[str, str]:
    values = {
        "period": args.period,
        "groupBy": args.group_by,
        "from": args.start,
        "to": args.end,
        "month": args.month,
        "containerId": args.container,
        "tenantId": args.tenant,
    }
    return {k: v for k, v in values.items() if v is not None}


def run_observe(args: argparse.Namespace) -> int:
    if args.command == "turns":
        return _turns(args)
    command = args.usage_command
    if command == "prices":
        return call(args, "GET", "/v1/usage/prices")
    if command == "records":
        mine = {"containerId": args.container} if args.container else {}
        return call(args, "GET", "/v1/usage" + ("?" + urlencode(mine) if mine else ""))
    params = _query(args)
    if command == "summary":
        return call(args, "GET", "/v1/usage/summary?" + urlencode(params))
    params["format"] = args.format
    return _download(args, "/v1/usage/export?" + urlencode(params), args.output)


def _turns(args: argparse.Namespace) -> int:
    if args.turns_command == "list":
        values = {"containerId": args.container, "status": args.status, "tenantId": args.tenant}
        params = {k: v for k, v in values.items() if v is not None}
        return call(args, "GET", "/v1/turns" + (f"?{urlencode(params)}" if params else ""))
    body: dict[str, Any]
    if args.all:
        body = {"all": True}
    elif args.container:
        body = {"containerId": args.container}
    elif args.turn_ids:
        body = {"turnIds": args.turn_ids}
    else:
        print("avm: give TURN_IDs, --container or --all", file=sys.stderr)
        return 2
    if args.tenant:
        body["tenantId"] = args.tenant
    return call(args, "POST", "/v1/turns/cancel", body)


def _download(args: argparse.Namespace, path: str, output: Path | None) -> int:
    """A file the server sends: written to ``output`` (or stdout) as it came; errors as ``call``'s."""
    import httpx

    url = (args.url or os.environ.get("AVM_URL") or DEFAULT_URL).rstrip("/")
    key = args.key or os.environ.get("AVM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(url + path, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        print(f"avm: cannot reach {url}: {type(exc).__name__}", file=sys.stderr)
        return 1
    if response.status_code >= 400:
        try:
            error = response.json().get("error", {})
        except ValueError:
            error = {"code": f"http_{response.status_code}", "message": response.text[:500]}
        print(f"avm: {error.get('code')}: {error.get('message')}", file=sys.stderr)
        return 1
    if output is None:
        sys.stdout.write(response.text)
    else:
        output.write_text(response.text)
        print(f"wrote {output} ({len(response.text.splitlines())} lines)", file=sys.stderr)
    return 0


__all__ = ["add_observe_commands", "run_observe"]
