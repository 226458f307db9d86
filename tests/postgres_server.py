"""A throwaway PostgreSQL for the tests: the cluster host's stores run their contract suites on it.

``AVM_TEST_DATABASE_URL`` (a server the tests may create and drop databases on, as a superuser or
a role with CREATEDB) is used when set. Otherwise the first test that needs PostgreSQL starts one:
``initdb`` in a temporary directory (as the ``postgres`` user when we run as root, since PostgreSQL
refuses to run as root), listening on a free loopback port and on a unix socket in that directory,
with durability off (``fsync``, ``synchronous_commit``, ``full_page_writes``: test data only). It is
stopped and removed at the end of the session (the ``_postgres_server_stops`` fixture in
tests/conftest.py, with ``atexit`` as a backstop).

Each test gets a fresh, empty database: ``CREATE DATABASE ... TEMPLATE avm_template_<pid>``, where the
template has had every packaged migration applied once per session (a file copy: milliseconds).

PostgreSQL's binaries are found under ``AVM_POSTGRES_BIN``, ``pg_config --bindir`` or Debian's
``/usr/lib/postgresql/<version>/bin``. Missing, the tests that need them skip saying why, except
when ``CI=true``: there they fail, so CI never passes by skipping the PostgreSQL suites
(``./dev`` installs Debian's postgresql when it can).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql

from agentvm.adapters.postgres.database import Database
from agentvm.adapters.postgres.migrations import migrate

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine

# One template per test process: sessions sharing an AVM_TEST_DATABASE_URL server never drop
# each other's template.
TEMPLATE = f"avm_template_{os.getpid()}"
_names = itertools.count(1)


def as_url(conninfo: str) -> str:
    """A ``key=value`` conninfo (what this module hands out) as the ``postgresql://`` URL that
    ``avm serve --database-url`` and ``AVM_DATABASE_URL`` take."""
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(conninfo).items() if v is not None}
    dbname = params.pop("dbname")
    user = params.pop("user", "")
    password = params.pop("password", None)
    auth = quote(user) + (f":{quote(password)}" if password else "") + ("@" if user else "")
    return f"postgresql://{auth}/{quote(dbname)}?{urlencode(params)}"


def _bin_dir() -> Path | None:
    explicit = os.environ.get("AVM_POSTGRES_BIN")
    if explicit:
        return Path(explicit)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name),
        reverse=True,
    )
    return debian[0].parent if debian else None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required in CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason} (install Debian's postgresql, or set AVM_TEST_DATABASE_URL)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server the tests own: ``admin_url`` reaches its ``postgres`` database."""

    def __init__(self, admin_url: str, *, data_dir: Path | None = None, pg_ctl: list[str] | None = None):
        self.admin_url = admin_url
        self._data_dir = data_dir
        self._pg_ctl = pg_ctl
        self._template_ready = False

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = _bin_dir()
        if bin_dir is None or not (bin_dir / "initdb").exists():
            _unavailable("initdb not found (AVM_POSTGRES_BIN, pg_config, /usr/lib/postgresql/*/bin)")
        assert bin_dir is not None
        as_user: list[str] = []
        root = Path(tempfile.mkdtemp(prefix="avm-pg-"))
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            runuser = shutil.which("runuser")
            if runuser is None:
                _unavailable("running as root without runuser to become the postgres user")
            as_user = [str(runuser), "-u", "postgres", "--"]
            shutil.chown(root, "postgres", "postgres")
        data = root / "data"
        port = _free_port()
        try:
            subprocess.run(
                [
                    *as_user,
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            options = (
                f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                "-c shared_buffers=32MB"
            )
            pg_ctl = [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data)]
            subprocess.run(
                [*pg_ctl, "-o", options, "-l", str(root / "server.log"), "-w", "-t", "30", "start"],
                check=True,
                capture_output=True,
                text=True,
            )
        except (subprocess.CalledProcessError, OSError) as exc:
            log = root / "server.log"
            detail = getattr(exc, "stderr", "") or (log.read_text() if log.exists() else "")
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"could not start the test PostgreSQL: {exc}\n{detail}") from exc
        return cls(f"postgresql://postgres@127.0.0.1:{port}/postgres", data_dir=root, pg_ctl=pg_ctl)

    def stop(self) -> None:
        if self._data_dir is None and self._template_ready:  # a server we did not start: tidy up
            self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
            self._template_ready = False
        if self._pg_ctl is not None and self._data_dir is not None:
            subprocess.run([*self._pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True, check=False)
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._pg_ctl = None
            self._data_dir = None
            self._template_ready = False  # gone with the server (a second stop() does nothing)

    def url(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(self.admin_url, dbname=dbname)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)

    def _ensure_template(self) -> None:
        if self._template_ready:
            return
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
        self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))

        async def _migrate() -> None:
            database = Database(self.url(TEMPLATE), min_size=1, max_size=1)
            await database.open()
            try:
                await migrate(database)
            finally:
                await database.close()

        # in a worker thread: the caller may be inside a running event loop (an async fixture)
        _run_in_thread(_migrate)
        self._template_ready = True

    def create_database(self, *, migrated: bool = True) -> str:
        """A new database (every migration applied, or empty) and its URL."""
        name = f"avm_test_{os.getpid()}_{next(_names)}"
        if migrated:
            self._ensure_template()
            statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)
            )
        else:
            statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        self._admin(statement)
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))


def _run_in_thread(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a coroutine to completion on its own event loop in a worker thread."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            asyncio.run(make())
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


_server: PostgresServer | None = None


def shared_server() -> PostgresServer:
    """The session's server: ``AVM_TEST_DATABASE_URL``'s, or one started on first use."""
    global _server
    if _server is None:
        url = os.environ.get("AVM_TEST_DATABASE_URL")
        if url:
            _server = PostgresServer(url)
        else:
            _server = PostgresServer.start()
            atexit.register(_server.stop)
    return _server


def stop_shared_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


@asynccontextmanager
async def fresh_database(*, migrated: bool = True, max_size: int = 4) -> AsyncIterator[Database]:
    """An open ``Database`` on a new database of the shared server, dropped on exit."""
    server = shared_server()
    url = server.create_database(migrated=migrated)
    database = Database(url, min_size=1, max_size=max_size)
    await database.open()
    try:
        yield database
    finally:
        await database.close()
        server.drop_database(url)


async def require_pgvector(database: Database) -> None:
    """Skip (fail under ``CI=true``) unless ``database`` has the ``vector`` extension: migration
    0113 creates it when the server has pgvector (``scripts/install_pgvector.sh``, which ``./dev
    test`` runs when it is missing)."""
    async with database.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        present = await cur.fetchone() is not None
    if present:
        return
    reason = "no pgvector on this PostgreSQL server (scripts/install_pgvector.sh installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"pgvector is required in CI: {reason}", pytrace=False)
    pytest.skip(reason)
