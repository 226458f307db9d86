"""``avm sessions``: the session centre of a running server, over HTTP (docs/sessions.md).

``export`` writes a session's JSON Lines to a file (or stdout), ``import`` sends one into a
container, ``search`` prints a page of matches (``--all`` follows ``next`` to the end), ``fork``
and ``title`` print the image they made or renamed. Server and key as for the other remote
commands (``--url``/``AVM_URL``, ``--key``/``AVM_API_KEY``, an admin key of the tenant). Answers
are printed as JSON; an error prints ``avm: <code>: <message>`` and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentvm.cli.remote import DEFAULT_URL, call


def add_session_commands(sub: Any) -> None:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help=f"the server (default {DEFAULT_URL}, env AVM_URL)")
    server.add_argument("--key", help="an admin API key of the tenant (env AVM_API_KEY)")
    ses = sub.add_parser("sessions", help="export, import, search, fork and title sessions (/v1/sessions)")
    ses_sub = ses.add_subparsers(dest="sessions_command", required=True)
    exp = ses_sub.add_parser("export", parents=[server], help="a session as JSON Lines")
    exp.add_argument("session_id")
    exp.add_argument("-o", "--output", type=Path, help="write it here (default: stdout)")
    imp = ses_sub.add_parser("import", parents=[server], help="an export into a container (a new image)")
    imp.add_argument("container_id")
    imp.add_argument("file", type=Path, help="an export ('-': stdin)")
    find = ses_sub.add_parser("search", parents=[server], help='messages holding words and "phrases"')
    find.add_argument("query")
    find.add_argument("--container", help="one container (default: the whole tenant)")
    find.add_argument("--limit", type=int, default=20)
    find.add_argument("--cursor", help="next of the previous page")
    find.add_argument("--all", action="store_true", help="follow next to the end")
    fork = ses_sub.add_parser("fork", parents=[server], help="a new image whose history ends at a message")
    fork.add_argument("session_id")
    fork.add_argument("message_id")
    fork.add_argument("--name")
    fork.add_argument("--request-id", help="a retry with it returns the first fork")
    title = ses_sub.add_parser("title", parents=[server], help="set a session's title")
    title.add_argument("session_id")
    title.add_argument("title")


def run_sessions(args: argparse.Namespace) -> int:
    command = args.sessions_command
    if command == "export":
        return _export(args)
    if command == "import":
        return _import(args)
    if command == "search":
        return _search(args)
    sid = _quote(args.session_id)
    if command == "fork":
        body = {"messageId": args.message_id, "name": args.name, "requestId": args.request_id}
        return call(
            args, "POST", f"/v1/sessions/{sid}/fork", {k: v for k, v in body.items() if v is not None}
        )
    return call(args, "PUT", f"/v1/sessions/{sid}/title", {"title": args.title})


def _request(args: argparse.Namespace, method: str, path: str, **kw: Any) -> Any:
    """One request; the response, or None once an error was printed."""
    import httpx

    url = (args.url or os.environ.get("AVM_URL") or DEFAULT_URL).rstrip("/")
    key = args.key or os.environ.get("AVM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.request(
            method, url + path, headers={**headers, **kw.pop("headers", {})}, timeout=60, **kw
        )
    except httpx.HTTPError as exc:
        print(f"avm: cannot reach {url}: {type(exc).__name__}", file=sys.stderr)
        return None
    if response.status_code >= 400:
        try:
            error = response.json().get("error", {})
        except ValueError:
            error = {"code": f"http_{response.status_code}", "message": response.text[:500]}
        print(f"avm: {error.get('code', response.status_code)}: {error.get('message', '')}", file=sys.stderr)
        return None
    return response


def _export(args: argparse.Namespace) -> int:
    response = _request(args, "GET", f"/v1/sessions/{_quote(args.session_id)}/export")
    if response is None:
        return 1
    if args.output is None:
        sys.stdout.buffer.write(response.content)
        sys.stdout.flush()
    else:
        args.output.write_bytes(response.content)
        print(json.dumps({"written": str(args.output), "bytes": len(response.content)}))
    return 0


def _import(args: argparse.Namespace) -> int:
    body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    response = _request(
        args,
        "POST",
        f"/v1/containers/{_quote(args.container_id)}/sessions/import",
        content=body,
        headers={"Content-Type": "application/x-ndjson"},
    )
    if response is None:
        return 1
    print(json.dumps(response.json(), indent=2, ensure_ascii=False))
    return 0


def _search(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"q": args.query, "limit": args.limit}
    if args.container:
        params["containerId"] = args.container
    if args.cursor:
        params["cursor"] = args.cursor
    results: list[Any] = []
    while True:
        response = _request(args, "GET", "/v1/sessions/search", params=params)
        if response is None:
            return 1
        page = response.json()
        results += page["results"]
        if not args.all or page["next"] is None:
            print(json.dumps({"results": results, "next": page["next"]}, indent=2, ensure_ascii=False))
            return 0
        params["cursor"] = page["next"]


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


__all__ = ["add_session_commands", "run_sessions"]
