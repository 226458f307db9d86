"""From an image's declarations to the ``Toolbox`` of one turn: built-ins, HTTP tools, MCP tools.

MCP tool lists are cached in the image record (``toolCatalog``, keyed by a fingerprint of the
servers' config, with the time they were listed): a turn reads the list from the record and
connects to a server only when the model calls one of its tools. A list is fetched again once it
is older than ``tools_ttl_s`` (``AVM_MCP_TOOLS_TTL_S``), and at once for a server that sent
``notifications/tools/list_changed`` to the container's pooled session.

Servers to list are listed concurrently, within ``list_deadline_s`` (5 s by default,
``AVM_MCP_LIST_DEADLINE_S``): a server that cannot start or list, or is still listing at the
deadline, is left out of that turn (its previous list, if any, is kept), and the client is told
(``mcp_server_failed``, stage "start" or "list"). A listing cut by the deadline goes on in the
background (up to ``_LIST_TIMEOUT_S``) and its tools are in the next turn; a server whose listing
failed is not tried again for ``list_retry_s`` (30 s), so a hanging server costs one turn the
deadline, not every turn. A server that goes away during a call is reported too (stage "call"), and
a call's progress notifications become ``tool_progress`` events (``agent.tools.reports``), and a
server's questions during a call ``tool_elicitation`` events (``agent.tools.elicitation``).

With a host's session pool (``mcp_pool``, ``adapters/mcp/pool.py``) a turn leases its container's
live sessions for its calls, so a stdio server keeps running, with its state, from one turn to the
next; without one (AWS Lambda) each turn opens its own sessions and closes them with the toolbox.
A listing leases the container's pooled session too (without a pool: a session of its own, closed
when it ends); it may outlive the turn that started it.

Names are unique per image: declared tools keep theirs; an MCP tool whose name is taken gets its
server's name as a prefix (``<server>__<tool>``).

A remote server declared with ``"auth": "oauth"`` is reached with the tenant's OAuth tokens for its
URL (``oauth``, a ``ports.McpOAuthAuth``; the records come with the turn's ``mcp_oauth`` access).
Without tokens (or on a host that keeps none) it is left out of the turn, and the client is told
(``mcp_server_failed``, stage "start", the reason saying an admin must authorize it first).
Without a pool its listings are kept per tenant, so no tenant's listing runs on another's tokens.

Secrets that headers reference (``{"secret": "NAME"}``) are the image's tenant's
(``AVM_TOOL_SECRETS = {"<tenant>": {"NAME": "value"}, "*": {...}}``, ``"*"``: every tenant's), so
one tenant can never send another tenant's secret to a URL of its choosing. URLs must resolve to
public addresses unless private networks are allowed (``agent.egress``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentvm.agent.tools.builtin import BUILTIN_TOOLS
from agentvm.agent.tools.declarations import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    TOOL_NAME,
    ApprovalConfig,
    BuiltinToolDecl,
    ClientToolDecl,
    HttpToolDecl,
    McpRemoteServer,
    McpStdioServer,
    SandboxToolDecl,
    SecretRef,
    parse_mcp_servers,
)
from agentvm.agent.tools.egress import EgressRefused, check_public
from agentvm.agent.tools.elicitation import current_elicitation
from agentvm.agent.tools.media import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_RESULT_BYTES
from agentvm.agent.tools.reports import MCP_NEEDS_AUTHORIZATION, ToolReports, current_progress
from agentvm.agent.tools.toolbox import DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_TIMEOUT_S, ClientTool, Toolbox
from agentvm.llm import ToolSpec
from agentvm.ports import McpServerFailed, ToolOutput

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.ports import (
        HttpToolClient,
        McpConnector,
        McpOAuthAccess,
        McpOAuthAuth,
        McpSession,
        McpSessionPool,
        Sandbox,
        StorageAccount,
        Store,
        Tool,
    )
    from agentvm.records import ImageRecord

log = logging.getLogger("agentvm.tools")

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+)\}")
_NO_OAUTH_HERE = "needs OAuth authorization, which this server cannot keep (no OAuth records store)"
_LIST_TIMEOUT_S = 20.0  # a listing's own bound (it may go on past the turn's deadline, in the background)
DEFAULT_TOOLS_TTL_S = 600.0
DEFAULT_LIST_DEADLINE_S = 5.0
DEFAULT_LIST_RETRY_S = 30.0


class MissingSecret(ValueError):
    """A header names a secret the server does not have (the name is safe to show; no value)."""


def resolve_headers(headers: Mapping[str, str | SecretRef], secrets: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        if isinstance(value, SecretRef):
            if value.secret not in secrets:
                raise MissingSecret(
                    f"the server has no tool secret named {value.secret!r} (AVM_TOOL_SECRETS)"
                )
            out[name] = secrets[value.secret]
        else:
            out[name] = value
    return out


def tenant_secrets(secrets: Mapping[str, Mapping[str, str]], tenant_id: str) -> dict[str, str]:
    """The secrets an image of ``tenant_id`` may reference: the shared ones, then its own."""
    return {**secrets.get("*", {}), **secrets.get(tenant_id, {})}


@dataclass
class HttpTool:
    """An HTTP declaration as a callable tool."""

    decl: HttpToolDecl
    client: HttpToolClient
    secrets: Mapping[str, str]
    max_bytes: int
    allow_private: bool = False

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.decl.name, self.decl.description, self.decl.inputSchema)

    @property
    def timeout_s(self) -> float | None:
        return self.decl.timeoutS

    @property
    def idempotent(self) -> bool:
        return self.decl.idempotent if self.decl.idempotent is not None else self.decl.method == "GET"

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        rest = dict(arguments)

        def fill(match: re.Match[str]) -> str:
            return quote(str(rest.pop(match.group(1), "")), safe="")

        url = _PLACEHOLDER.sub(fill, self.decl.url)
        body: Any = None
        if self.decl.method in ("GET", "DELETE"):
            if rest:
                from urllib.parse import urlencode

                query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in rest.items()}
                url += ("&" if "?" in url else "?") + urlencode(query)
        else:
            body = rest
        if not self.allow_private:
            await check_public(url)
        response = await self.client.request(
            self.decl.method,
            url,
            headers=resolve_headers(self.decl.headers, self.secrets),
            json_body=body,
            timeout_s=self.decl.timeoutS or DEFAULT_TIMEOUT_S,
            max_bytes=self.max_bytes,
        )
        text = response.text
        if response.truncated:
            text += f"\n[response truncated at {self.max_bytes} bytes]"
        if response.status >= 400:
            return ToolOutput(f"HTTP {response.status}: {text}", is_error=True)
        return ToolOutput(text)


@dataclass
class McpTool:
    """One tool of an MCP server; the server's session is opened on the first call of the turn."""

    spec: ToolSpec
    remote_name: str
    server: str
    sessions: TurnMcpSessions
    timeout_s: float | None = None
    idempotent: bool = False

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        try:
            session = await self.sessions.get(self.server)
            return await session.call_tool(
                self.remote_name, arguments, on_progress=current_progress(), on_elicit=current_elicitation()
            )
        except McpServerFailed as exc:  # cannot start, or went away: the client is told, the model too
            self.sessions.reports.server_failed(
                self.server, exc.stage, exc.reason, tool=self.spec.name, exit_code=exc.exit_code
            )
            raise


@dataclass
class TurnMcpSessions:
    """The MCP sessions of one turn, opened on demand, closed with the toolbox (with a ``pool``:
    leased from the container's live sessions, and handed back with the toolbox)."""

    connector: McpConnector
    servers: Mapping[str, McpStdioServer | McpRemoteServer]
    secrets: Mapping[str, str]
    allow_private: bool = False
    pool: McpSessionPool | None = None
    owner: tuple[str, str] = ("", "")  # (tenant, container) the pooled sessions belong to
    reports: ToolReports = field(default_factory=ToolReports)
    http_auths: Mapping[str, Any] = field(default_factory=dict)  # by server: its OAuth (the tenant's tokens)
    _open: dict[str, McpSession] = field(default_factory=dict)

    async def get(self, server: str) -> McpSession:
        """The server's session, opened on first use. A missing secret or a refused address raises
        here: an error result for that call."""
        if server not in self._open:
            config = self.servers[server]
            if isinstance(config, McpRemoteServer) and not self.allow_private:
                await check_public(config.url)
            resolved = _resolved(config, self.secrets)
            self._open[server] = _open(
                self.connector, self.pool, self.owner, server, resolved, self.http_auths
            )
        return self._open[server]

    async def aclose(self) -> None:
        sessions, self._open = list(self._open.values()), {}
        await asyncio.gather(*(s.aclose() for s in sessions), return_exceptions=True)


def servers_fingerprint(mcp_servers: Mapping[str, Any] | None) -> str:
    return hashlib.sha256(json.dumps(mcp_servers or {}, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ToolSources:
    """Builds each turn's toolbox. Wired per host: what it can reach (MCP, HTTP) and its settings."""

    mcp: McpConnector | None = None
    mcp_pool: McpSessionPool | None = None  # None: sessions per turn (AWS); set: kept across turns
    tools_ttl_s: float = DEFAULT_TOOLS_TTL_S  # MCP tool lists older than this are listed again
    http: HttpToolClient | None = None
    sandbox: Sandbox | None = None  # None: this host runs no sandbox (its tools are left out, with a note)
    remote_sandbox: bool = False  # sandbox jobs run on a sandbox worker (AWS): the turn suspends on each
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # by tenant; "*": all
    allow_stdio: bool = True
    allow_private_networks: bool = False
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    max_media_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES
    max_media_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    list_deadline_s: float = DEFAULT_LIST_DEADLINE_S  # a turn waits this long for servers' tool lists
    list_retry_s: float = DEFAULT_LIST_RETRY_S  # a server whose listing failed is left out this long
    oauth: McpOAuthAuth | None = None  # None: servers with "auth": "oauth" are left out (reported)
    # listings by (tenant, container, servers fingerprint, server) (tenant and container empty
    # without a pool): one in flight at a time, kept past its turn
    _listings: dict[tuple[str, str, str, str], _Listing] = field(default_factory=dict, repr=False)

    async def toolbox(
        self,
        store: Store,
        image: ImageRecord,
        *,
        storage: StorageAccount | None = None,
        mcp_oauth: McpOAuthAccess | None = None,
    ) -> Toolbox:
        """The image's tools; ``storage``: the tenant's storage account its sandbox calls are
        charged to (``security/storage_quota.py``); ``mcp_oauth``: the host's OAuth records of
        remote MCP servers (None: it keeps none)."""
        secrets = tenant_secrets(self.secrets, image.tenantId)
        tools: list[Tool] = []
        notes: list[str] = []
        reports = ToolReports()
        for raw in image.tools or []:
            kind = raw.get("type")
            if kind == "builtin":
                decl = BuiltinToolDecl.model_validate(raw)
                builtin = BUILTIN_TOOLS[decl.name]
                tools.append(builtin if decl.timeoutS is None else _with_timeout(builtin, decl.timeoutS))
            elif kind == "http" and self.http is not None:
                http = HttpToolDecl.model_validate(raw)
                tools.append(
                    HttpTool(http, self.http, secrets, self.max_output_chars * 4, self.allow_private_networks)
                )
            elif kind == "sandbox" and self.remote_sandbox:
                from agentvm.agent.tools.sandbox import remote_sandbox_tools

                tools.extend(remote_sandbox_tools(SandboxToolDecl.model_validate(raw)))
            elif kind == "sandbox":
                if self.sandbox is None:
                    notes.append("the sandbox is not available on this server; its tools are left out")
                    continue
                from agentvm.agent.tools.sandbox import sandbox_tools

                decl_ = SandboxToolDecl.model_validate(raw)
                tools.extend(sandbox_tools(decl_, self.sandbox, image.tenantId, image.containerId, storage))
            elif kind == "client":
                client = ClientToolDecl.model_validate(raw)
                spec_ = ToolSpec(client.name, client.description, client.inputSchema)
                tools.append(ClientTool(spec_, client.timeoutS))
        closers = []
        if image.mcpServers and self.mcp is not None:
            servers = parse_mcp_servers(image.mcpServers, allow_stdio=self.allow_stdio)
            auths, unauthorized = await self._oauth(servers, image.tenantId, mcp_oauth)
            for name, reason in unauthorized.items():
                notes.append(f"MCP server {name!r} {reason}")
                reports.server_failed(name, "start", reason)
            catalog, listing_notes = await self._catalog(
                store, image, servers, secrets, reports, auths, left_out=set(unauthorized)
            )
            notes += listing_notes
            sessions = TurnMcpSessions(
                self.mcp,
                servers,
                secrets,
                self.allow_private_networks,
                reports=reports,
                pool=self.mcp_pool,
                owner=(image.tenantId, image.containerId),
                http_auths=auths,
            )
            taken = {t.spec.name for t in tools}
            for server in sorted(set(catalog) - set(unauthorized)):
                for entry in catalog[server]:
                    name = _unique_name(entry["name"], server, taken)
                    taken.add(name)
                    spec = ToolSpec(name, entry.get("description") or "", entry.get("inputSchema") or {})
                    timeout = servers[server].timeoutS
                    tools.append(McpTool(spec, entry["name"], server, sessions, timeout_s=timeout))
            closers.append(sessions.aclose)
        approval = ApprovalConfig.model_validate(image.approval) if image.approval else None
        return Toolbox(
            tools,
            default_timeout_s=self.default_timeout_s,
            max_output_chars=self.max_output_chars,
            max_media_block_bytes=self.max_media_block_bytes,
            max_media_result_bytes=self.max_media_result_bytes,
            closers=closers,
            notes=notes,
            approval=frozenset() if approval is None else _approval_names(approval.tools),
            approval_timeout_s=DEFAULT_APPROVAL_TIMEOUT_S if approval is None else approval.timeoutS,
            reports=reports,
        )

    async def task_session(
        self, image: ImageRecord, server: str, *, mcp_oauth: McpOAuthAccess | None = None
    ) -> McpSession:
        """A session of ``image``'s MCP ``server``, its config, header secrets and OAuth tokens
        resolved again for the image's tenant: the waits sweeper follows a suspended call's task
        through it (``turns/mcp_tasks.py``). The caller closes it."""
        servers = parse_mcp_servers(image.mcpServers or {}, allow_stdio=self.allow_stdio)
        if self.mcp is None or server not in servers:
            raise McpServerFailed(server, "call", "is no longer one of the image's servers")
        auths, unauthorized = await self._oauth({server: servers[server]}, image.tenantId, mcp_oauth)
        if server in unauthorized:
            raise McpServerFailed(server, "call", unauthorized[server])
        secrets = tenant_secrets(self.secrets, image.tenantId)
        return await TurnMcpSessions(
            self.mcp, servers, secrets, self.allow_private_networks, http_auths=auths
        ).get(server)

    async def _oauth(
        self,
        servers: Mapping[str, McpStdioServer | McpRemoteServer],
        tenant_id: str,
        access: McpOAuthAccess | None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The HTTP auth of each server declared with ``"auth": "oauth"`` the tenant has authorized,
        and why each other one is left out of the turn."""
        auths: dict[str, Any] = {}
        unauthorized: dict[str, str] = {}
        for name, server in servers.items():
            if not isinstance(server, McpRemoteServer) or server.auth != "oauth":
                continue
            if self.oauth is None or access is None:
                unauthorized[name] = _NO_OAUTH_HERE
                continue
            auth = await self.oauth.http_auth(access, tenant_id, server.url)
            if auth is None:
                unauthorized[name] = MCP_NEEDS_AUTHORIZATION
            else:
                auths[name] = auth
        return auths, unauthorized

    async def _catalog(
        self,
        store: Store,
        image: ImageRecord,
        servers: Mapping[str, McpStdioServer | McpRemoteServer],
        secrets: Mapping[str, str],
        reports: ToolReports,
        auths: Mapping[str, Any] | None = None,
        *,
        left_out: set[str] | None = None,
    ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
        """The servers' tool lists: from the image record while fresh, else listed now (concurrently,
        within the deadline) and stored there (stale: older than ``tools_ttl_s``, or the server said
        its tools changed). ``auths``: servers' OAuth; ``left_out``: servers not listed this turn
        (reported already; a list they had is kept)."""
        auths = auths or {}
        left_out = left_out or set()
        key = servers_fingerprint(image.mcpServers)
        cached = image.toolCatalog or {}
        previous: dict[str, list[dict[str, Any]]] = (
            dict(cached.get("servers", {})) if cached.get("key") == key else {}
        )
        expired = time.time() - float(cached.get("listedAt") or 0) >= self.tools_ttl_s
        changed = {name for name in previous if self._tools_changed(image, name, servers, secrets)}
        wanted = set(servers) - left_out  # a server left out keeps the list it had, if any
        if previous and wanted <= set(previous) <= set(servers) and not expired and not changed:
            return previous, []
        assert self.mcp is not None
        listed = {} if expired else {n: tools for n, tools in previous.items() if n not in changed}
        notes: list[str] = []
        kept_stale = False  # a list kept from before because its refresh failed or is late

        def unavailable(name: str, stage: str, reason: str, exit_code: int | None = None) -> None:
            notes.append(f"MCP server {name!r} {reason}")
            reports.server_failed(name, stage, reason, exit_code=exit_code)

        # with a pool, a container's live session is listed (its tools may have changed with its state)
        owner = (image.tenantId, image.containerId) if self.mcp_pool is not None else ("", "")
        waiting: dict[str, _Listing] = {}
        for name, server in servers.items():
            if name in left_out:
                continue
            if name in listed:
                continue
            # without a pool, a listing on a tenant's tokens is that tenant's alone
            lister = owner if name not in auths or owner != ("", "") else (image.tenantId, "")
            listing = self._listing(key, name, server, secrets, lister, auths.get(name))
            if isinstance(listing, str):
                unavailable(name, "start", listing)
            else:
                waiting[name] = listing
        if waiting:
            tasks = {listing.task for listing in waiting.values()}
            await asyncio.wait(tasks, timeout=self.list_deadline_s)
        loop = asyncio.get_running_loop()
        for name, listing in waiting.items():
            done = listing.task.done()
            exc = (
                None
                if not done
                else listing.task.exception()
                if not listing.task.cancelled()
                else TimeoutError()
            )
            if done and exc is None:
                listed[name] = listing.task.result()
                self._listings.pop((*listing.owner, key, name), None)
                continue
            if name in previous:  # a refresh that failed or is late: keep the list it had this turn
                listed[name] = previous[name]
                kept_stale = True
                if done and listing.failed_at is None:
                    listing.failed_at = loop.time()
                continue
            if not done:  # still listing: left out of this turn, kept for the next
                seconds = self.list_deadline_s
                unavailable(
                    name, "list", f"did not list its tools within {seconds:g} s; left out of this turn"
                )
                continue
            if listing.failed_at is None:
                listing.failed_at = loop.time()
            if isinstance(exc, McpServerFailed):
                unavailable(name, exc.stage, exc.reason, exc.exit_code)
            elif isinstance(exc, TimeoutError):
                unavailable(name, "list", f"did not list its tools within {_LIST_TIMEOUT_S:g} s")
            else:  # misconfigured, or an answer that is not a tool list
                unavailable(name, "list", f"could not list its tools: {str(exc)[:300] or type(exc).__name__}")
        complete = set(listed) == set(servers)
        if complete or listed:
            # a list kept stale keeps its old time: the next turn tries the refresh again
            listed_at = int(cached.get("listedAt") or 0) if kept_stale else int(time.time())
            image.toolCatalog = {"key": key, "servers": listed, "listedAt": listed_at}
            try:
                await store.put_image(image)
            except Exception as exc:  # a cache write that fails costs a listing next turn, nothing more
                log.warning("could not cache the MCP tool catalog", extra={"error": type(exc).__name__})
        return listed, notes

    def _tools_changed(
        self,
        image: ImageRecord,
        name: str,
        servers: Mapping[str, McpStdioServer | McpRemoteServer],
        secrets: Mapping[str, str],
    ) -> bool:
        if self.mcp_pool is None or name not in servers:
            return False
        try:
            resolved = _resolved(servers[name], secrets)
        except MissingSecret:
            return False
        return self.mcp_pool.tools_changed(image.tenantId, image.containerId, name, resolved)

    def _listing(
        self,
        key: str,
        name: str,
        server: McpStdioServer | McpRemoteServer,
        secrets: Mapping[str, str],
        owner: tuple[str, str],
        http_auth: Any = None,
    ) -> _Listing | str:
        """The server's listing: the one in flight or finished lately, else a new one; or why it
        cannot be listed (a missing secret, a refused address: reported, not retried in the background).
        ``owner``: the (tenant, container) whose pooled session is listed, or ("", "") without a pool."""
        loop = asyncio.get_running_loop()
        listing = self._listings.get((*owner, key, name))
        if listing is not None and listing.loop is loop:
            fresh = listing.failed_at is None or loop.time() - listing.failed_at < self.list_retry_s
            if fresh:
                return listing
        try:
            config = _resolved(server, secrets)
        except MissingSecret as exc:
            return f"is unavailable: {exc}"
        url = server.url if isinstance(server, McpRemoteServer) and not self.allow_private_networks else None
        task = loop.create_task(
            self._list(name, server, config, url, owner, http_auth), name=f"mcp-list:{name}"
        )
        task.add_done_callback(_retrieved)  # a failure nobody waits for any more is not "never retrieved"
        listing = _Listing(task, loop, owner)
        self._listings[(*owner, key, name)] = listing
        return listing

    async def _list(
        self,
        name: str,
        server: McpStdioServer | McpRemoteServer,
        config: dict[str, Any],
        url: str | None,
        owner: tuple[str, str],
        http_auth: Any = None,
    ) -> list[dict[str, Any]]:
        if url is not None:
            try:
                await check_public(url)
            except EgressRefused as exc:
                raise McpServerFailed(name, "start", f"is unavailable: {exc}") from None
        assert self.mcp is not None
        session = _open(
            self.mcp, self.mcp_pool, owner, name, config, {} if http_auth is None else {name: http_auth}
        )
        try:
            # The declared timeout is per tool call; starting a server and listing may take longer.
            list_timeout = max(server.timeoutS or 0, _LIST_TIMEOUT_S)
            specs = await asyncio.wait_for(session.list_tools(), list_timeout)
        except Exception as exc:
            log.warning("MCP server tools could not be listed", extra={"server": name, "error": _short(exc)})
            raise
        finally:
            await session.aclose()
        return [{"name": s.name, "description": s.description, "inputSchema": s.input_schema} for s in specs]


@dataclass
class _Listing:
    """One server's tool listing, possibly still running after the turn that started it."""

    task: asyncio.Task[list[dict[str, Any]]]
    loop: asyncio.AbstractEventLoop
    owner: tuple[str, str]  # the (tenant, container) of its key in ``ToolSources._listings``
    failed_at: float | None = None  # when a turn saw it fail (loop time): retried after list_retry_s


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _short(exc: BaseException) -> str:
    return str(exc)[:300] or type(exc).__name__


def _approval_names(tools: list[str] | str) -> frozenset[str] | str:
    return "*" if tools == "*" else frozenset(tools)


def _open(
    connector: McpConnector,
    pool: McpSessionPool | None,
    owner: tuple[str, str],
    server: str,
    config: dict[str, Any],
    http_auths: Mapping[str, Any],
) -> McpSession:
    """A session of ``server``: leased from the pool (its key holds the tenant: no two tenants share
    one), else opened for the turn; with the server's OAuth when it has one."""
    auth = http_auths.get(server)
    extra = {} if auth is None else {"http_auth": auth}
    if pool is not None:
        return pool.lease(*owner, server, config, **extra)
    return connector.session(server, config, **extra)


def _resolved(server: McpStdioServer | McpRemoteServer, secrets: Mapping[str, str]) -> dict[str, Any]:
    """The server's config as the connector takes it, with header secrets resolved."""
    cfg = server.model_dump(exclude_none=True, exclude={"timeoutS"})
    if isinstance(server, McpRemoteServer):
        cfg["headers"] = resolve_headers(server.headers, secrets)
    return cfg


def _unique_name(name: str, server: str, taken: set[str]) -> str:
    if name not in taken and TOOL_NAME.match(name):
        return name
    base = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{name}")[:64]
    candidate, n = base, 2
    while candidate in taken:
        candidate = f"{base[:60]}_{n}"
        n += 1
    return candidate


@dataclass(frozen=True)
class _TimedBuiltin:
    inner: Tool
    timeout_s: float | None

    @property
    def spec(self) -> ToolSpec:
        return self.inner.spec

    @property
    def idempotent(self) -> bool:
        return self.inner.idempotent

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return await self.inner.call(arguments)


def _with_timeout(tool: Tool, timeout_s: float) -> Tool:
    return _TimedBuiltin(tool, timeout_s)


__all__ = [
    "HttpTool",
    "McpTool",
    "MissingSecret",
    "ToolSources",
    "TurnMcpSessions",
    "servers_fingerprint",
    "tenant_secrets",
]
