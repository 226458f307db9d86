"""Security for the in-process harness: API keys, budgets and rate limits on SQLite, on a clock the
test moves (``ManualClock``), so cache bounds, minutes and UTC days pass instantly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.budgets import SqliteBudgetStore
from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.adapters.local.sqlite.keys import SqliteKeyStore
from agentvm.ports import ConnectionInfo
from agentvm.security.apikeys import ApiKeys, ServerSecrets
from agentvm.security.auth import Authenticator
from agentvm.security.budgets import Budgets
from agentvm.security.ratelimit import RateLimiter
from agentvm.security.setup import Security
from agentvm.security.storage_quota import StorageQuota
from tests.harness import ProtocolClient

if TYPE_CHECKING:
    from agentvm.runtime import Runtime
    from tests.harness import Harness
    from tests.v2_client import V2Client

SERVER_SECRET = b"unit-test-server-secret-0123456789abcdef"
JAN_15_2026_NOON_MS = 1_768_478_400_000


class ManualClock:
    """A ``Clock`` that moves only when told to."""

    def __init__(self, now_ms: int = JAN_15_2026_NOON_MS) -> None:
        self.ms = now_ms
        self.mono = 1_000.0

    def now_ms(self) -> int:
        return self.ms

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)
        self.mono += seconds


def security(
    clock: ManualClock,
    *,
    secrets: ServerSecrets | None = None,
    rate_limit_per_minute: int = 600,
    unauthenticated_per_minute: int = 30,
    cache_s: float = 30.0,
    storage_bytes: int = 0,
) -> Security:
    counters = SqliteCounters(":memory:", now=lambda: clock.now_ms() / 1000)
    keys = ApiKeys(SqliteKeyStore(":memory:"), secrets or ServerSecrets(SERVER_SECRET), clock)
    return Security(
        auth=Authenticator(keys, clock, cache_s=cache_s),
        budgets=Budgets(SqliteBudgetStore(":memory:"), counters, clock),
        rate_limiter=RateLimiter(
            counters,
            clock,
            per_minute=rate_limit_per_minute,
            unauthenticated_per_minute=unauthenticated_per_minute,
        ),
        storage_quota=StorageQuota(counters, limit_bytes=storage_bytes) if storage_bytes else None,
    )


def secure(h: Harness, clock: ManualClock | None = None, **kw: object) -> Security:
    """Attach keys, budgets and rate limits to the harness's runtime."""
    sec = security(clock or ManualClock(), **kw)  # type: ignore[arg-type]
    sec.attach(h.rt)
    return sec


_anon = iter(range(1, 1_000_000))


async def anonymous_client(h: Harness) -> ProtocolClient:
    """A connection as a host registers it before any credentials: no tenant yet."""
    conn_id = f"anon_{next(_anon)}"
    await h.rt.connections.register(ConnectionInfo(conn_id, None, h.rt.clock.now_ms()))
    return ProtocolClient(h.rt, h.push, conn_id)


async def keyed_client(h: Harness, token: str) -> ProtocolClient:
    """A connection authenticated by an ``auth`` frame carrying ``token``."""
    client = await anonymous_client(h)
    replies = await client.send_raw(
        '{"type": "auth", "headers": {"Authorization": "Bearer %s"}}' % token  # noqa: UP031
    )
    assert replies == [], replies
    return client


async def new_key(rt: Runtime, tenant: str, *scopes: str, **kw: object) -> str:
    assert rt.auth is not None
    _, token = await rt.auth.keys.create(tenant, scopes or ("client",), **kw)  # type: ignore[arg-type]
    return token


async def keyed_v2_client(h: Harness, token: str) -> V2Client:
    """An AgentX v2 connection authenticated by an ``auth`` notification carrying ``token``."""
    from tests.v2_client import V2Client

    conn_id = f"anon_{next(_anon)}"
    await h.rt.connections.register(ConnectionInfo(conn_id, None, h.rt.clock.now_ms()))
    client = V2Client(h.rt, h.push, conn_id)
    replies = await client.notify("auth", headers={"Authorization": f"Bearer {token}"})
    assert replies == [], replies
    return client
