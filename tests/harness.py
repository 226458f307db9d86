"""The in-process test harness: a wired local runtime on real SQLite, and a protocol client."""

from __future__ import annotations

import itertools
import json
from typing import Any

from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.adapters.local.sqlite.config import SqliteConfigStore
from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex
from agentvm.adapters.local.sqlite.memory import SqliteMemoryStore
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.replies import SqliteReplyCache
from agentvm.adapters.local.sqlite.resources import SqliteResourceStore
from agentvm.adapters.local.sqlite.running import SqliteRunningTurns
from agentvm.adapters.local.sqlite.schedules import SqliteSchedules
from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.adapters.local.sqlite.tenant_purge import LocalTenantPurge
from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore
from agentvm.adapters.local.sqlite.usage import SqliteUsageRollups
from agentvm.adapters.local.sqlite.waits import SqliteToolWaits
from agentvm.adapters.local.sqlite.webhooks import SqliteWebhooks
from agentvm.config import Settings
from agentvm.configcentre.centre import ConfigCentre
from agentvm.configcentre.sealing import SecretSealer
from agentvm.events import request
from agentvm.gateway.dispatch import handle_frame
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.ports import ConnectionInfo
from agentvm.resources.centre import ResourceCentre
from agentvm.resources.indexing import fixed_embedder
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll
from agentvm.turns.worker import process_turn

HARNESS_SERVER_SECRET = b"harness-server-secret-seals-config-secrets-0123456789"

_request_ids = itertools.count(1)


class ProtocolClient:
    """Speaks AgentX frames to the gateway in-process and keeps every frame it receives."""

    def __init__(self, rt: Runtime, push: LocalPush, connection_id: str) -> None:
        self.rt = rt
        self.connection_id = connection_id
        self.frames: list[dict[str, Any]] = []
        self.messages: list[str] = []  # every WebSocket message received (a batch is one)
        self._push = push
        push.attach(connection_id, self._receive)

    async def _receive(self, payload: str) -> None:
        self.messages.append(payload)
        self.frames.extend(_frames_of(payload))

    async def send_raw(self, raw: str | bytes) -> list[dict[str, Any]]:
        payloads = await handle_frame(self.rt, self.connection_id, raw)
        self.messages.extend(payloads)
        out = [frame for payload in payloads for frame in _frames_of(payload)]
        self.frames.extend(out)
        return out

    async def request(self, type_: str, **data: Any) -> dict[str, Any]:
        """Send ``<type_>_request``; returns the response frame's ``data``."""
        request_id = f"req_{next(_request_ids)}"
        replies = await self.send_raw(json.dumps(request(type_, request_id, data, now_ms=0)))
        responses = [f for f in replies if f.get("category") == "response"]
        assert len(responses) == 1, replies
        assert responses[0]["data"]["requestId"] == request_id
        assert responses[0]["type"] == f"{type_}_response"
        return responses[0]["data"]

    async def subscribe(self, session_id: str, *, after_seq: int | None = None) -> list[dict[str, Any]]:
        frame: dict[str, Any] = {"type": "subscribe", "sessionId": session_id}
        if after_seq is not None:
            frame["afterSeq"] = after_seq
        return await self.send_raw(json.dumps(frame))

    def turn_frames(self) -> list[dict[str, Any]]:
        """Every frame of a turn received (numbered: ``seq``), in arrival order."""
        return [f for f in self.frames if "seq" in f]

    async def disconnect(self) -> None:
        """What the host does when the socket closes: no more frames, the connection forgotten."""
        self._push.detach(self.connection_id)
        await self.rt.connections.remove(self.connection_id)

    def session_events(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("source") == "agent"]

    def types(self) -> list[str]:
        return [f["type"] for f in self.frames]


def _frames_of(payload: str) -> list[dict[str, Any]]:
    """The frames of one message: a batched message (``?frames=batch``) is a JSON array of them."""
    decoded = json.loads(payload)
    return decoded if isinstance(decoded, list) else [decoded]


class Harness:
    def __init__(self, tmp_path: Any) -> None:
        self.model = ScriptedModelClient()
        self.store = SqliteStore(":memory:")
        self.queue = SqliteTurnQueue(tmp_path / "queue.db", retry_delay_s=0.01)
        self.push = LocalPush()
        self.rt = Runtime(
            store=self.store,
            queue=self.queue,
            connections=InMemoryConnections(),
            push=self.push,
            models=SingleModelResolver(self.model),
            turns=TurnSettings(flush_s=0.01, max_frame_bytes=64 * 1024, subscriber_refresh_s=0.0),
            waits=SqliteToolWaits(":memory:"),
            cancel_poll=CancelPoll(),
            progress=TurnProgress(),
            metrics=NoMetrics(),
        )
        self.rt.resources = ResourceCentre(
            SqliteResourceStore(":memory:"),
            self.rt.clock,
            platform_tenant="platform",
            storage=lambda: self.rt.storage_quota,
            knowledge=lambda: self.rt.knowledge_index,
            embedder=fixed_embedder(lambda: self.rt.embedder),
        )
        self.rt.knowledge_index = SqliteKnowledgeIndex(":memory:")  # as the local host: FTS5 + sqlite-vec
        self.rt.tenants = SqliteTenantStore(":memory:")
        self.rt.usage = SqliteUsageRollups(self.store)
        self.rt.running = SqliteRunningTurns(":memory:", self.store)
        self.rt.sessions = SqliteSessionArchive(self.store)
        self.rt.replies = SqliteReplyCache(":memory:")  # images opt in (replyCache)
        self.memory = SqliteMemoryStore(":memory:")  # images opt in (a memory tool)
        self.rt.memory = self.memory
        self.rt.tenant_purge = LocalTenantPurge(
            self.store, tmp_path / "workspaces", replies=self.rt.replies, memory=self.memory
        )
        self.rt.schedules = SqliteSchedules(":memory:")
        self.rt.webhooks = SqliteWebhooks(":memory:", SecretSealer(lambda: [HARNESS_SERVER_SECRET]))
        self.rt.webhooks_allow_private = True  # receivers in tests listen on loopback
        self.rt.config = ConfigCentre(
            SqliteConfigStore(":memory:"),
            Settings(data_dir=tmp_path),
            self.rt.clock,
            cache_s=0.0,
            sealer=SecretSealer(lambda: [HARNESS_SERVER_SECRET]),
        )
        self._conns = itertools.count(1)

    async def client(
        self, tenant: str = "tenant-a", *, batch: bool = False, cadence: str | None = None
    ) -> ProtocolClient:
        """A connection of ``tenant``; ``batch``: it declared batched frames at the upgrade, and
        ``cadence`` the text cadence it asked for (``?cadence=``)."""
        conn_id = f"conn_{next(self._conns)}"
        await self.rt.connections.register(
            ConnectionInfo(conn_id, tenant, self.rt.clock.now_ms(), batch=batch, cadence=cadence)
        )
        return ProtocolClient(self.rt, self.push, conn_id)

    async def run_turns(self) -> None:
        await self.queue.drain(lambda job: process_turn(self.rt, job))
