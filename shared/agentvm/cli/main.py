"""The ``avm`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm import DISTRIBUTION, __version__

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.config import Settings
    from agentvm.ports import TenantStore, UsageRollups
    from agentvm.security.setup import Security


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="avm", description="AgentVM: an AI agent runtime.")
    parser.add_argument("--version", action="version", version=f"avm ({DISTRIBUTION} {__version__})")
    sub = parser.add_subparsers(dest="command", required=True)

    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument(
        "--data-dir", type=Path, help="where state lives (default ~/.agentvm, env AVM_DATA_DIR)"
    )
    # `keys` and `budgets` can act on a deployed AWS stack instead (with AWS credentials for it).
    stack = argparse.ArgumentParser(add_help=False)
    stack.add_argument("--table", help="act on this AWS stack's DynamoDB table (its TableName output)")
    stack.add_argument(
        "--secret-parameter",
        default=AWS_SECRET_PARAMETER,
        help=f"with --table: the SSM SecureString of the server secret (default {AWS_SECRET_PARAMETER})",
    )
    stack.add_argument("--region", help="with --table: the stack's AWS region (default: the AWS config's)")
    managed = [data_dir, stack]
    # `keys` can also act on a cluster's PostgreSQL database (docs/cluster.md), from outside its nodes.
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument(
        "--database-url",
        help="act on this cluster's PostgreSQL database (env AVM_DATABASE_URL; with the cluster's "
        "AVM_AUTH_SECRET in the environment)",
    )
    keyed = [*managed, cluster]

    serve = sub.add_parser("serve", parents=[data_dir], help="run AgentVM locally (HTTP + WebSocket at /ws)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1, env AVM_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8080, env AVM_PORT)")
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING... (default INFO, env AVM_LOG_LEVEL)")
    serve.add_argument(
        "--open",
        action="store_true",
        default=None,
        help="key-less dev mode: every connection is tenant 'local'; loopback only (env AVM_OPEN)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        help="processes sharing the port and the data dir (default 1, env AVM_WORKERS; docs/scaling.md)",
    )
    serve.add_argument(
        "--database-url",
        help="postgresql://... shared by the cluster's nodes: this process is one node of the "
        "cluster on PostgreSQL (env AVM_DATABASE_URL; docs/cluster.md)",
    )
    serve.add_argument(
        "--no-turns",
        dest="run_turns",
        action="store_false",
        default=None,
        help="with --database-url: serve clients but run no turns here (env AVM_RUN_TURNS=false)",
    )

    fake = sub.add_parser("fake-llm", help="run a fake Anthropic/OpenAI streaming server on loopback")
    from agentvm.fakellm import add_arguments

    add_arguments(fake)

    keys = sub.add_parser(
        "keys", help="create, list and revoke API keys (acts on the data dir, or --table, directly)"
    )
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", parents=keyed, help="create a key; prints its token once")
    create.add_argument("--tenant", required=True, help=_TENANT_HELP)
    create.add_argument(
        "--scope", action="append", choices=["admin", "client"], help="repeatable (default: client)"
    )
    create.add_argument("--name", help="a label shown by `keys list`")
    create.add_argument(
        "--rate-limit",
        type=int,
        help="requests per minute (default: the server's AVM_RATE_LIMIT_PER_MINUTE; 0 = unlimited)",
    )
    listing = keys_sub.add_parser("list", parents=keyed, help="list a tenant's keys (never tokens)")
    listing.add_argument("--tenant", required=True, help=_TENANT_HELP)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    revoke = keys_sub.add_parser(
        "revoke", parents=keyed, help="revoke a key (servers stop accepting it within AVM_KEY_CACHE_S)"
    )
    revoke.add_argument("key_id", help="the key's id (the keyId `keys list` shows), not its token")

    budgets = sub.add_parser("budgets", help="token budgets per tenant and per container (UTC day/month)")
    budgets_sub = budgets.add_subparsers(dest="budgets_command", required=True)
    set_ = budgets_sub.add_parser("set", parents=managed, help="set limits (flags left out are kept)")
    show = budgets_sub.add_parser("show", parents=managed, help="limits and current usage")
    for p in (set_, show):
        p.add_argument("--tenant", required=True, help=_TENANT_HELP)
        p.add_argument("--container", help="a container of the tenant (default: the whole tenant)")
    set_.add_argument("--daily", type=_limit, help="tokens per UTC day, or 'none'")
    set_.add_argument("--monthly", type=_limit, help="tokens per UTC month, or 'none'")
    from agentvm.cli.remote import add_remote_commands

    add_remote_commands(sub)  # resources, config, tenants: over HTTP to a running server
    from agentvm.chat import add_chat_command

    add_chat_command(sub)  # a terminal client (the SDK): a running server, or --local
    from agentvm.cli.observe import add_observe_commands

    add_observe_commands(sub)  # usage, turns: over HTTP to a running server
    from agentvm.cli.sessions import add_session_commands

    add_session_commands(sub)  # sessions: export, import, search, fork, title over HTTP
    return parser


_NO_LIMIT = -1
_TENANT_HELP = "the tenant: 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit"
AWS_SECRET_PARAMETER = "/agentvm/auth-secret"  # template.yaml's AuthSecretParameterName default


def _limit(text: str) -> int:
    if text.lower() == "none":
        return _NO_LIMIT
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("a limit is a number of tokens >= 0, or 'none'")
    return value


# The module a missing extra leaves out -> the extra that brings it (pyproject.toml), for the
# message a user with only `agentvm-runtime[client]` installed gets from `avm serve` or `avm keys`.
_EXTRA_OF = {
    "fastapi": "local",
    "pydantic_settings": "local",
    "jsonschema": "local",
    "genai_prices": "local",
    "uvicorn": "local",
    "prometheus_client": "local",
    "cryptography": "local",
    "mcp": "local",
    "anthropic": "local",
    "openai": "local",
    "psycopg": "cluster",
    "psycopg_pool": "cluster",
    "boto3": "aws",
    "botocore": "aws",
    "pynamodb": "aws",
    "aws_lambda_powertools": "aws",
    "mangum": "aws",
}


def main(argv: list[str] | None = None) -> int:
    """``avm``: every expected failure is one line on stderr and an exit code, never a traceback."""
    command = (argv if argv is not None else sys.argv[1:])[:1]
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe is found here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`avm ... | head`). As the signal module's docs advise: point stdout at
        # devnull so the interpreter's final flush does not raise again, and exit like SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except ModuleNotFoundError as exc:
        extra = _EXTRA_OF.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        what = f"avm {command[0]}" if command else "avm"
        print(
            f"avm: {what} needs the {extra!r} extra (module {exc.name!r} is missing):"
            f" pip install 'agentvm-runtime[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        if exc.filename is None:
            raise
        print(f"avm: {exc.strerror or type(exc).__name__}: {exc.filename}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "fake-llm":
        from agentvm.fakellm import run

        return run(args)
    if args.command == "chat":
        from agentvm.chat import run_chat

        return run_chat(args)
    if args.command in ("resources", "config", "tenants"):
        from agentvm.cli.remote import run_remote

        return run_remote(args)
    if args.command in ("usage", "turns"):
        from agentvm.cli.observe import run_observe

        return run_observe(args)
    if args.command == "sessions":
        from agentvm.cli.sessions import run_sessions

        return run_sessions(args)
    if args.command in ("keys", "budgets"):
        from agentvm.errors import AgentVMError

        # On a stack, AWS errors (no credentials, access denied, no such table or parameter) are
        # reported the same way; their messages name resources, never the secret.
        # So are a cluster database's (unreachable: its URL redacted; a failing statement).
        remote = args.table or getattr(args, "database_url", None) or os.environ.get("AVM_DATABASE_URL")
        expected = Exception if remote else (AgentVMError, ValueError)
        try:
            return asyncio.run(_keys(args) if args.command == "keys" else _budgets(args))
        except expected as exc:
            print(f"avm: {getattr(exc, 'message', exc)}", file=sys.stderr)
            return 2
    return 2


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    from agentvm.config import Settings

    overrides = {k: v for k, v in {"data_dir": args.data_dir, **extra}.items() if v is not None}
    return Settings(**overrides)  # explicit flags beat the environment


def _serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from agentvm.hosts.data_dir import private_umask
    from agentvm.hosts.local import local_runtime, local_security
    from agentvm.hosts.local_server import open_mode_error, serve
    from agentvm.logs import configure_logging
    from agentvm.security.setup import ensure_admin_key

    private_umask()  # what the server creates is its user's only (hosts/data_dir.py)
    try:
        settings = _settings(
            args,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            open=args.open,
            workers=args.workers,
            database_url=args.database_url,
            run_turns=args.run_turns,
        )
    except ValidationError as exc:  # its messages never hold the refused value (config.py)
        print(f"avm: {exc}", file=sys.stderr)
        return 2
    error = open_mode_error(settings)
    if error is not None:
        print(f"avm: {error}", file=sys.stderr)
        return 2
    if settings.database_url is not None and settings.workers > 1:
        print(
            "avm: --workers is for one machine's SQLite; with --database-url run more nodes", file=sys.stderr
        )
        return 2
    secrets = [
        s.get_secret_value()
        for s in (
            settings.anthropic_api_key,
            settings.openai_api_key,
            settings.auth_secret,
            settings.auth_secret_previous,
            settings.admin_key,
        )
        if s is not None
    ]
    secrets += settings.database_secrets()
    configure_logging(
        settings.log_level,
        secrets=secrets,
        refusals_per_minute=settings.log_refusals_per_minute,
        ws_frames=settings.log_ws_frames,
        log_format=settings.log_format,
    )
    from agentvm.errors import AgentVMError

    busy = _port_in_use(settings.host, settings.port)
    if busy is not None:  # said before anything starts or logs that it listens
        print(f"avm: cannot listen on {settings.host}:{settings.port}: {busy}", file=sys.stderr)
        return 2
    if settings.database_url is not None:  # a node of a cluster on PostgreSQL (docs/cluster.md)
        from agentvm.hosts.cluster_server import serve_cluster

        try:
            return serve_cluster(
                settings, announce_admin_key=lambda token: _announce_admin_key(token, settings)
            )
        except (AgentVMError, ValueError) as exc:  # PostgreSQL unreachable, a bad AVM_AUTH_SECRET
            print(f"avm: {getattr(exc, 'message', exc)}", file=sys.stderr)
            return 2
    host = local_runtime(settings)
    try:
        security = local_security(settings, host.runtime.clock)
        security.attach(host.runtime)
        if host.runtime.config is not None:  # seal what an older version stored in plaintext
            asyncio.run(host.runtime.config.seal_stored_secrets())
        token = None if security.auth is None else asyncio.run(ensure_admin_key(security.auth, settings))
    except (AgentVMError, ValueError) as exc:  # a bad AVM_AUTH_SECRET or AVM_ADMIN_KEY
        print(f"avm: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    if token is not None:
        _announce_admin_key(token, settings)
    if settings.workers > 1 and settings.worker_id is None:
        from agentvm.hosts.local_workers import run_workers

        return run_workers(settings, sys.argv[1:])
    serve(host)
    return 0


def _port_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now (in use, an address not of this machine), or None.
    Bound and released at once with the server's own options (SO_REUSEADDR, as uvicorn sets), so a
    port in TIME_WAIT is not reported; the server's own bind still decides (a race is reported there)."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"unknown host ({exc.strerror})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "the port is in use (another avm serve?); choose one with --port or AVM_PORT"
            return exc.strerror or type(exc).__name__
    return None


def _announce_admin_key(token: str, settings: Settings) -> None:
    """Printed to stdout once (never logged): the first start's admin key."""
    ws = f"ws://{settings.host}:{settings.port}/ws"
    print(
        "\n".join(
            [
                "",
                "AgentVM created an admin API key for tenant 'default'. It is shown only now; store it:",
                "",
                f"    {token}",
                "",
                f"Connect with the header 'Authorization: Bearer <key>', or {ws}?token=<key>",
                "More keys: avm keys create --tenant <tenant> --scope client   (see SECURITY.md)",
                "",
            ]
        ),
        flush=True,
    )


def _security(args: argparse.Namespace) -> Security:
    """The key store, budgets and counters the server uses (never open mode): the data dir's, or
    with ``--table`` a deployed AWS stack's, wired as its functions wire them (``aws_security``)."""
    from agentvm.runtime import SystemClock

    if args.table:
        from agentvm.config import Settings
        from agentvm.hosts.aws import aws_security

        if args.region:
            os.environ["AWS_DEFAULT_REGION"] = args.region  # boto3 clients are created after this
        # Only the stack's parameter: a local AVM_AUTH_SECRET must never hash the stack's keys.
        aws = Settings(
            table_name=args.table,
            auth_secret_parameter=args.secret_parameter,
            auth_secret=None,
            auth_secret_previous=None,
        )
        return aws_security(aws, SystemClock())
    from agentvm.hosts.data_dir import prepare_data_dir, private_umask
    from agentvm.hosts.local import local_security

    settings = _settings(args).model_copy(update={"open": False})
    private_umask()
    prepare_data_dir(settings.data_dir)
    return local_security(settings, SystemClock())


def _usage_sums(args: argparse.Namespace) -> UsageRollups:
    """The usage sums next to the budgets ``_security`` uses (after it: the region is set)."""
    from agentvm.hosts.admin_stores import usage_rollups

    return usage_rollups(args.table, _settings(args).data_dir)


def _tenant_store(args: argparse.Namespace) -> TenantStore:
    """The tenant registry next to the key store ``_security`` uses (after it: the region is set)."""
    from agentvm.hosts.admin_stores import tenant_store

    return tenant_store(args.table, _settings(args).data_dir)


async def _keys(args: argparse.Namespace) -> int:
    if args.table is None:
        settings = _settings(args, database_url=args.database_url)
        if settings.database_url is not None:  # a cluster's database (docs/cluster.md)
            from agentvm.hosts.cluster_server import cluster_admin

            async with cluster_admin(settings) as (security, tenants):
                return await _manage_keys(args, security, lambda: tenants)
    return await _manage_keys(args, _security(args), lambda: _tenant_store(args))


async def _manage_keys(
    args: argparse.Namespace, security: Security, tenant_store: Callable[[], TenantStore]
) -> int:
    auth = security.auth
    assert auth is not None  # not open: the CLI always manages keys
    if args.keys_command == "create":
        registered = await tenant_store().get_tenant(args.tenant)
        if registered is not None and registered.status != "active":
            print(f"avm: tenant {args.tenant!r} was deleted; its id is not reused", file=sys.stderr)
            return 2
        record, token = await auth.keys.create(
            args.tenant, args.scope or ["client"], name=args.name, rate_limit_per_minute=args.rate_limit
        )
        print(token)
        print(
            f"created key {record.keyId} for tenant {record.tenantId!r} (scopes: {', '.join(record.scopes)});"
            " the token above is shown only once",
            file=sys.stderr,
        )
        return 0
    if args.keys_command == "list":
        for key in await auth.keys.list(args.tenant):
            public = key.to_public()
            if args.json:
                print(json.dumps(public))
                continue
            status = "active" if key.revokedAt is None else f"revoked {_when(key.revokedAt)}"
            print(
                f"{key.keyId}  {','.join(key.scopes):<12}  {status:<28}  created {_when(key.createdAt)}"
                f"  {key.name or ''}".rstrip()
            )
        return 0
    revoked = await auth.revoke(args.key_id)
    if revoked is None:
        print(f"avm: no API key {args.key_id}", file=sys.stderr)
        return 1
    print(
        f"revoked {revoked.keyId} (tenant {revoked.tenantId!r}); running servers stop accepting it within "
        f"AVM_KEY_CACHE_S (at most 60 s)",
        file=sys.stderr,
    )
    return 0


async def _budgets(args: argparse.Namespace) -> int:
    from agentvm.security.apikeys import check_tenant_id

    budgets = _security(args).budgets
    budgets.read_sums_from(lambda: _usage_sums(args))  # seeds a new budget (security.budgets)
    tenant, container = check_tenant_id(args.tenant), args.container
    if args.budgets_command == "set":
        current = await budgets.store.get_budget(tenant, container)

        def pick(flag: int | None, kept: int | None) -> int | None:
            return kept if flag is None else None if flag == _NO_LIMIT else flag

        await budgets.set(
            tenant,
            container,
            daily_tokens=pick(args.daily, current.dailyTokens if current else None),
            monthly_tokens=pick(args.monthly, current.monthlyTokens if current else None),
        )
    record = await budgets.store.get_budget(tenant, container)
    usage = await budgets.usage(tenant, container)
    print(
        json.dumps(
            {
                "tenant": tenant,
                "container": container,
                "dailyTokens": record.dailyTokens if record else None,
                "monthlyTokens": record.monthlyTokens if record else None,
                "usage": usage,
            }
        )
    )
    return 0


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


if __name__ == "__main__":
    sys.exit(main())
