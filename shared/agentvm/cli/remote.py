"""``avm resources``, ``avm config``, ``avm tenants``: a running server's management routes, over HTTP.

Unlike ``avm keys`` and ``avm budgets`` (which act on the data dir or a stack's table directly),
these talk to a server, local or deployed, with an API key: ``--url`` (env ``AVM_URL``, default
``http://127.0.0.1:8080``) and ``--key`` (env ``AVM_API_KEY``). Answers are printed as JSON; an
error prints ``avm: <code>: <message>`` and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

DEFAULT_URL = "http://127.0.0.1:8080"


def add_remote_commands(sub: Any) -> None:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help=f"the server (default {DEFAULT_URL}, env AVM_URL)")
    server.add_argument("--key", help="an admin API key of the tenant (env AVM_API_KEY)")

    res = sub.add_parser("resources", help="the resource centre of a running server (/v1/resources)")
    res_sub = res.add_subparsers(dest="resources_command", required=True)
    ls = res_sub.add_parser("list", parents=[server], help="discover resources")
    ls.add_argument("--kind", help="prompt, tool, sandbox, agent or knowledge")
    ls.add_argument("--prefix", help="names starting with this")
    ls.add_argument("--tag", help="resources with this tag")
    ls.add_argument("--query", help="free text in the name or description")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--cursor", type=int, default=0)
    for name, text in (
        ("get", "a resource (its versions) or, with @, one version"),
        ("resolve", "a resource with its dependency closure pinned"),
        ("delete", "delete a version (…@<version>) or every version"),
    ):
        p = res_sub.add_parser(name, parents=[server], help=text)
        p.add_argument("uri", help="resource://<kind>s/<name>[@<version>|@<tag>]")
    pub = res_sub.add_parser("publish", parents=[server], help="publish the first or next version")
    pub.add_argument("--kind", required=True)
    pub.add_argument("--name", required=True)
    pub.add_argument("--spec", required=True, type=Path, help="a JSON file of the spec ('-': stdin)")
    pub.add_argument("--version", dest="res_version", help="an integer or semver (default: the next integer)")
    pub.add_argument("--description")
    pub.add_argument("--tag", action="append", default=[], help="a tag moved to this version (repeatable)")
    render = res_sub.add_parser("render", parents=[server], help="render a prompt")
    render.add_argument("uri")
    render.add_argument("--arg", action="append", default=[], help="NAME=VALUE (VALUE as JSON if it parses)")
    search = res_sub.add_parser("search", parents=[server], help="search a knowledge resource")
    search.add_argument("uri")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=5)
    up = res_sub.add_parser(
        "upload",
        parents=[server],
        help="upload files (PDF, .docx, HTML, Markdown, text) to a knowledge draft",
    )
    up.add_argument("name", help="the knowledge resource's name")
    up.add_argument("files", nargs="+", type=Path, help="each file's name is its document's id")
    docs = res_sub.add_parser("documents", parents=[server], help="a knowledge resource's documents")
    docs.add_argument("name")
    docs.add_argument("--version", dest="res_version", help="a published version (default: the draft)")
    rm = res_sub.add_parser("remove-document", parents=[server], help="remove a document from the draft")
    rm.add_argument("name")
    rm.add_argument("document_id")
    draft = res_sub.add_parser(
        "publish-draft", parents=[server], help="publish the draft as the next version"
    )
    draft.add_argument("name")
    draft.add_argument(
        "--version", dest="res_version", help="an integer or semver (default: the next integer)"
    )
    draft.add_argument("--description")
    draft.add_argument("--tag", action="append", default=[], help="a tag moved to this version (repeatable)")
    tag = res_sub.add_parser("tag", parents=[server], help="point a tag at a version")
    tag.add_argument("uri", help="resource://<kind>s/<name>@<version>")
    tag.add_argument("tag")

    cfg = sub.add_parser("config", help="the config centre of a running server (/v1/config)")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    show = cfg_sub.add_parser("show", parents=[server], help="every setting, its value and source")
    show.add_argument(
        "--scope", choices=["tenant", "server"], help="only the values set through the API there"
    )
    get = cfg_sub.add_parser("get", parents=[server], help="one setting")
    get.add_argument("setting")
    put = cfg_sub.add_parser("set", parents=[server], help="set a value (VALUE as JSON if it parses)")
    put.add_argument("setting")
    put.add_argument("value")
    unset = cfg_sub.add_parser("unset", parents=[server], help="remove a value set through the API")
    unset.add_argument("setting")
    for p in (put, unset):
        p.add_argument("--scope", choices=["tenant", "server"], default="tenant")
    audit = cfg_sub.add_parser("audit", parents=[server], help="the changes, newest first")
    audit.add_argument("--scope", choices=["tenant", "server"], default="tenant")
    audit.add_argument("--limit", type=int, default=100)

    ten = sub.add_parser(
        "tenants", help="the tenant registry of a running server (platform admins; /v1/tenants)"
    )
    ten_sub = ten.add_subparsers(dest="tenants_command", required=True)
    ls = ten_sub.add_parser("list", parents=[server], help="the tenants, a page at a time, by id")
    ls.add_argument(
        "--status",
        choices=["active", "deleting", "deleted", "all"],
        help="default: active and deleting; deleted: the tombstones (conversations kept: no purgedAt)",
    )
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--cursor", help="the `next` of the previous page")
    create = ten_sub.add_parser("create", parents=[server], help="register a tenant")
    create.add_argument("--name", required=True)
    create.add_argument("--description")
    create.add_argument("--tenant-id", help="register an id in use already (default: a new tenant_… id)")
    for name, text in (
        ("get", "one tenant"),
        ("delete", "revoke its keys; delete its budgets, resources, settings (and conversations locally)"),
    ):
        p = ten_sub.add_parser(name, parents=[server], help=text)
        p.add_argument("tenant_id")
    upd = ten_sub.add_parser("update", parents=[server], help="change the name or description")
    upd.add_argument("tenant_id")
    upd.add_argument("--name")
    described = upd.add_mutually_exclusive_group()
    described.add_argument("--description")
    described.add_argument("--remove-description", action="store_true")


def run_remote(args: argparse.Namespace) -> int:
    if args.command == "resources" and args.resources_command == "upload":
        return _upload(args)
    try:
        method, path, body = {"resources": _resources, "config": _config, "tenants": _tenants}[args.command](
            args
        )
    except ValueError as exc:
        print(f"avm: {exc}", file=sys.stderr)
        return 2
    return call(args, method, path, body)


def call(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: Any = None,
    *,
    content: bytes | None = None,
    content_type: str | None = None,
) -> int:
    """One request to the server; prints the answer (JSON) or the error. Shared by the remote commands.
    ``content``: a raw body (a file) instead of ``body``'s JSON."""
    import httpx

    url = (args.url or os.environ.get("AVM_URL") or DEFAULT_URL).rstrip("/")
    key = args.key or os.environ.get("AVM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if content_type:
        headers["Content-Type"] = content_type
    try:
        if content is not None:
            response = httpx.request(method, url + path, content=content, headers=headers, timeout=300)
        else:
            response = httpx.request(method, url + path, json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        print(f"avm: cannot reach {url}: {type(exc).__name__}", file=sys.stderr)
        return 1
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": {"code": f"http_{response.status_code}", "message": response.text[:500]}}
    if response.status_code >= 400:
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        print(
            f"avm: {error.get('code', response.status_code)}: {error.get('message', answer)}", file=sys.stderr
        )
        return 1
    print(json.dumps(answer, indent=2, ensure_ascii=False))
    return 0


def _upload(args: argparse.Namespace) -> int:
    """Each file into the knowledge draft, one request each (its type from its extension); stops at
    the first refusal."""
    import mimetypes

    for file in args.files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            print(f"avm: {file}: {exc.strerror}", file=sys.stderr)
            return 2
        path = f"/v1/knowledge/{_quote_path(args.name)}/documents?{urlencode({'filename': file.name})}"
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        code = call(args, "POST", path, content=data, content_type=kind)
        if code:
            return code
    return 0


def _quote_path(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="/")


def _path_of(uri: str) -> str:
    prefix = "resource://"
    if not uri.startswith(prefix) or "/" not in uri[len(prefix) :]:
        raise ValueError(f"{uri!r} is not a resource URI (resource://<kind>s/<name>[@<version>])")
    return "/v1/resources/" + uri[len(prefix) :]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _resources(args: argparse.Namespace) -> tuple[str, str, Any]:
    command = args.resources_command
    if command == "list":
        query = {"kind": args.kind, "prefix": args.prefix, "tag": args.tag, "q": args.query}
        params = "&".join(f"{k}={_quote(v)}" for k, v in query.items() if v)
        return "GET", f"/v1/resources?limit={args.limit}&cursor={args.cursor}&{params}".rstrip("&"), None
    if command == "get":
        return "GET", _path_of(args.uri), None
    if command == "delete":
        return "DELETE", _path_of(args.uri), None
    if command == "resolve":
        return "GET", f"/v1/resources/resolve?uri={_quote(args.uri)}", None
    if command == "publish":
        text = sys.stdin.read() if str(args.spec) == "-" else args.spec.read_text()
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"--spec: not JSON ({exc})") from None
        body = {"kind": args.kind, "name": args.name, "spec": spec, "tags": args.tag}
        if args.res_version:
            body["version"] = args.res_version
        if args.description:
            body["description"] = args.description
        return "POST", "/v1/resources", body
    if command == "render":
        arguments = {}
        for pair in args.arg:
            name, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"--arg {pair!r}: give NAME=VALUE")
            arguments[name] = _value(value)
        return "POST", "/v1/resources/render", {"uri": args.uri, "arguments": arguments}
    if command == "search":
        return "POST", "/v1/resources/search", {"uri": args.uri, "query": args.query, "limit": args.limit}
    if command == "documents":
        version = f"?{urlencode({'version': args.res_version})}" if args.res_version else ""
        return "GET", f"/v1/knowledge/{_quote_path(args.name)}/documents{version}", None
    if command == "remove-document":
        return (
            "DELETE",
            f"/v1/knowledge/{_quote_path(args.name)}/documents/{_quote_path(args.document_id)}",
            None,
        )
    if command == "publish-draft":
        body = {"spec": {"draft": True}, "tags": args.tag}
        if args.res_version:
            body["version"] = args.res_version
        if args.description:
            body["description"] = args.description
        return "PUT", f"/v1/resources/knowledge/{_quote_path(args.name)}", body
    return "POST", "/v1/resources/tags", {"uri": args.uri, "tag": args.tag}


def _config(args: argparse.Namespace) -> tuple[str, str, Any]:
    command = args.config_command
    if command == "show":
        return "GET", "/v1/config" + (f"?scope={args.scope}" if args.scope else ""), None
    if command == "get":
        return "GET", f"/v1/config/{_quote(args.setting)}", None
    if command == "set":
        return "PUT", f"/v1/config/{_quote(args.setting)}", {"scope": args.scope, "value": _value(args.value)}
    if command == "unset":
        return "PUT", f"/v1/config/{_quote(args.setting)}", {"scope": args.scope, "value": None}
    return "GET", f"/v1/config/audit?scope={args.scope}&limit={args.limit}", None


def _tenants(args: argparse.Namespace) -> tuple[str, str, Any]:
    command = args.tenants_command
    if command == "list":
        query = {"status": args.status, "limit": args.limit, "cursor": args.cursor}
        return "GET", "/v1/tenants?" + urlencode({k: v for k, v in query.items() if v is not None}), None
    if command == "create":
        body = {"name": args.name, "description": args.description, "tenantId": args.tenant_id}
        return "POST", "/v1/tenants", {k: v for k, v in body.items() if v is not None}
    path = f"/v1/tenants/{_quote(args.tenant_id)}"
    if command == "get":
        return "GET", path, None
    if command == "delete":
        return "DELETE", path, None
    changes = {k: v for k, v in {"name": args.name, "description": args.description}.items() if v is not None}
    if args.remove_description:
        changes["description"] = None
    if not changes:
        raise ValueError("update: give --name, --description or --remove-description")
    return "PATCH", path, changes


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


__all__ = ["DEFAULT_URL", "add_remote_commands", "call", "run_remote"]
