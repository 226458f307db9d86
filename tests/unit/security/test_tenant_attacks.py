"""Tenant B attacks tenant A: every command, ``subscribe`` and every HTTP route, with A's ids.

For each, B's answer for A's id must equal its answer for an id that does not exist (after
normalising request ids, generated ids, timestamps and the id string itself), and A's data must
be exactly as before. Callers are authenticated with real API keys (``auth`` frame, bearer header).

The suite runs once per runtime factory in ``RUNTIME_FACTORIES``: an async context manager taking
``tmp_path`` and yielding a ``World``. Hosts: the local runtime on SQLite, and the AWS runtime on
moto (``aws_runtime``'s DynamoDB store, connections, keys, budgets and counters with the real
gateway). Add one by appending a ``pytest.param(factory, id=..., marks=...)``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.api.app import create_app
from tests.contract.moto_table import atomic_moto
from tests.harness import Harness
from tests.moto_logs import GROUP, MotoLogShipper
from tests.security_harness import SERVER_SECRET, ManualClock, keyed_client, keyed_v2_client, new_key, secure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from agentvm.adapters.llm.scripted import ScriptedModelClient
    from agentvm.runtime import Runtime
    from tests.harness import ProtocolClient
    from tests.v2_client import V2Client


@dataclass
class World:
    """A runtime with auth, budgets and rate limits, and an admin key for tenants A and B."""

    rt: Runtime
    model: ScriptedModelClient
    run_turns: Callable[[], Awaitable[None]]
    connect: Callable[[str], Awaitable[ProtocolClient]]  # an API key's token -> an authenticated client
    tokens: dict[str, str]  # tenant -> admin token
    # an API key's token -> a client authenticated over AgentX v2 (JSON-RPC: an ``auth`` notification)
    connect_v2: Callable[[str], Awaitable[V2Client]] | None = None

    @asynccontextmanager
    async def http(self, tenant: str) -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=create_app(self.rt))
        headers = {"Authorization": f"Bearer {self.tokens[tenant]}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client


async def _world(h: Harness) -> World:
    """The world of a harness whose runtime has security attached: an admin key per tenant."""
    tokens = {t: await new_key(h.rt, t, "admin") for t in ("tenant-a", "tenant-b")}
    return World(
        rt=h.rt,
        model=h.model,
        run_turns=h.run_turns,
        connect=lambda token: keyed_client(h, token),
        tokens=tokens,
        connect_v2=lambda token: keyed_v2_client(h, token),
    )


@asynccontextmanager
async def local_sqlite_world(tmp_path: Any) -> AsyncIterator[World]:
    from agentvm.adapters.local.prometheus_metrics import PrometheusMetrics
    from agentvm.adapters.local.sqlite.logs import SqliteLogStore

    h = Harness(tmp_path)
    secure(h, ManualClock())
    h.rt.metrics = PrometheusMetrics(connections=h.rt.connections, queue=h.queue)
    h.rt.logs = SqliteLogStore(tmp_path / "logs.db")
    with _logging_to(h.rt.logs.handler()):
        try:
            yield await _world(h)
        finally:
            h.queue.close()
            h.store.close()
            h.rt.logs.close()


@contextmanager
def _logging_to(handler: logging.Handler) -> Iterator[None]:
    """Every INFO line of the process also goes to ``handler`` (tagged and masked as served)."""
    from agentvm.logs import add_log_handler

    add_log_handler(handler)
    root = logging.getLogger()
    # setLevel, not ``root.level =``: it clears the loggers' cached isEnabledFor answers (a
    # logger asked at WARNING by an earlier test of this process would go on refusing INFO)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@asynccontextmanager
async def aws_dynamodb_world(tmp_path: Any) -> AsyncIterator[World]:
    """The AWS host's runtime on moto: ``aws_runtime`` (DynamoDB store and connections, keys, budgets
    and counters on the one table) with the real gateway and HTTP app. Only the queue, the push and
    the model are the harness's (SQS and API Gateway are not what this suite attacks), and security
    runs on the test's clock, as in the local world."""
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics
    from agentvm.adapters.aws.cloudwatch.logs import CloudWatchLogStore
    from agentvm.adapters.aws.cloudwatch.logs_insights import LogsInsights
    from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
    from agentvm.adapters.aws.dynamodb.schedules import DynamoDbSchedules
    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from agentvm.adapters.aws.dynamodb.webhooks import DynamoDbWebhooks
    from agentvm.config import Settings
    from agentvm.hosts.aws import aws_runtime, aws_security

    h = Harness(tmp_path)
    local_store = h.store
    with atomic_moto():
        settings = Settings(
            table_name="agentvm-attacks",
            auth_secret=SERVER_SECRET.decode(),
            webhooks_allow_private_networks=True,  # the victims' endpoints are on loopback
        )
        DynamoDbStore(settings.table_name).create_table(wait=True)
        rt = aws_runtime(settings)
        h.rt = dataclasses.replace(rt, queue=h.queue, push=h.push, models=h.rt.models, turns=h.rt.turns)
        aws_security(settings, ManualClock()).attach(h.rt)
        assert isinstance(h.rt.store, DynamoDbStore) and isinstance(h.rt.connections, DynamoDbConnections)
        assert isinstance(h.rt.schedules, DynamoDbSchedules)  # /v1/schedules is attacked on AWS too
        assert isinstance(h.rt.webhooks, DynamoDbWebhooks)  # the webhook routes are attacked on AWS too
        # Logs and metrics on CloudWatch (moto): lines shipped into the group as Lambda ships them
        shipper = MotoLogShipper(GROUP)
        insights = LogsInsights(GROUP, poll_s=0.0)
        h.rt.metrics = CloudWatchMetrics(insights=insights, write=shipper.ship)
        h.rt.logs = CloudWatchLogStore(insights, now_ms=h.rt.clock.now_ms)
        with _logging_to(shipper):
            try:
                yield await _world(h)
            finally:
                h.queue.close()
                local_store.close()


RUNTIME_FACTORIES = [
    pytest.param(local_sqlite_world, id="local-sqlite"),
    pytest.param(aws_dynamodb_world, id="aws-dynamodb", marks=pytest.mark.aws),
]


@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        yield w


# -- normalisation ------------------------------------------------------------------------------
_GENERATED = re.compile(r"\b(img|sess|agent|msg|conn|turn|mem)_[0-9a-z_]+")
_TIMES = {
    "timestamp",
    "createdAt",
    "updatedAt",
    "registeredAt",
    "savedAt",
    "dayResetAt",
    "monthResetAt",
    "ageMs",
    "exportedAt",
}


def normalise(value: Any, target: str) -> Any:
    if isinstance(value, dict):
        return {
            k: 0 if k in _TIMES else "<req>" if k == "requestId" else normalise(v, target)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalise(v, target) for v in value]
    if isinstance(value, str):
        return _GENERATED.sub(r"\1_*", value.replace(target, "<ID>"))
    return value


async def frames_of(client: ProtocolClient, send: Awaitable[Any]) -> list[dict[str, Any]]:
    """Every frame ``client`` gets while ``send`` runs: responses, errors and pushed events."""
    before = len(client.frames)
    await send  # a coroutine does nothing until awaited
    return copy.deepcopy(client.frames[before:])


# -- tenant A's data ------------------------------------------------------------------------------
@dataclass
class Victim:
    client: ProtocolClient
    container: str
    image: dict[str, Any]
    agent_id: str
    key_id: str
    turn_id: str  # a suspended turn of A's, waiting for approval of ``call_id``
    call_id: str
    built: str  # an image of A's built from A's agent resource
    memory_id: str = ""  # an item of A's end user's memory (container scope)
    image_memory_id: str = ""  # an item of the memory of A's images named "A"
    schedule: str = "sch_none"  # a schedule of A's (hosts without schedules: none)
    endpoint: str = "whe_none"  # a webhook endpoint of A's, and one of its deliveries
    delivery: str = "msg_none"
    elicitation_id: str = "elicit_none"  # an MCP server's question to A's user, open


async def victim(world: World) -> Victim:
    from agentvm.adapters.llm.scripted import Calls
    from agentvm.agent.tools.sources import ToolSources

    if world.rt.tools is None:
        world.rt.tools = ToolSources()
    a = await world.connect(world.tokens["tenant-a"])
    img = (await a.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    run = await a.request("image_run", imageId=img["imageId"])
    world.model.add("a private reply")
    await a.request("message_send", imageId=img["imageId"], content="a private question")
    await world.run_turns()
    # A turn of A's suspended on a call that needs approval: B must not see, approve or answer it.
    guarded = {"name": "G", "tools": [{"type": "builtin", "name": "calculator"}], "approval": {"tools": "*"}}
    held = (await a.request("image_create", containerId="user-alice", config=guarded))["record"]
    world.model.add(Calls(("calculator", {"expression": "1+1"})))
    await a.request("message_send", imageId=held["imageId"], content="add, once approved")
    await world.run_turns()
    [wait] = (await a.request("tool_waits", containerId="user-alice"))["waits"]
    # An MCP server's question to A's user, open in the desk as while the server's call waits
    # (tests/integration/test_mcp_elicitation.py drives real servers): B must not answer it.
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.ports import ElicitationOwner, ElicitationRequest

    if world.rt.elicitations is None:  # the local host's, as with several workers: rows of SQLite
        from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations

        world.rt.elicitations = ElicitationDesk(store=SqliteElicitations(":memory:"))
    owner = ElicitationOwner("tenant-a", "user-alice", img["sessionId"], wait["turnId"])
    schema = {"type": "object", "properties": {"pin": {"type": "string"}}}
    question = await world.rt.elicitations.open(
        owner,
        "call_ask",
        "ask",
        ElicitationRequest("A's private question", schema=schema),
        deadline_at=int(time.time() * 1000) + 3_600_000,
    )
    assert question is not None
    async with world.http("tenant-a") as http:
        await http.put("/v1/budgets/tenant", json={"daily_tokens": 10_000, "monthly_tokens": None})
        await http.put("/v1/budgets/containers/user-alice", json={"daily_tokens": 5_000})
        key = (await http.post("/v1/auth/keys", json={"scopes": ["client"], "name": "a-app"})).json()
        # A's resources: a private prompt, and an agent built on it
        prompt = {"template": "A's plan: {{goal}}", "variables": {"goal": {"type": "string"}}}
        await http.post("/v1/resources", json={"kind": "prompt", "name": "private/plan", "spec": prompt})
        spec = {"prompt": {"uri": "resource://prompts/private/plan@1", "arguments": {"goal": "win"}}}
        await http.post("/v1/resources", json={"kind": "agent", "name": "planner", "spec": spec})
        await http.put(
            "/v1/config", json={"values": {"llm.maxOutputTokens": 321, "compaction.model": "scripted/a"}}
        )
        kb = {"documents": [{"title": "Plan", "text": "A's secret plan is to win."}]}
    if world.rt.tenants is not None:  # A is registered (by the platform)
        from agentvm.records import TenantRecord

        await world.rt.tenants.create_tenant(
            TenantRecord(tenantId="tenant-a", name="A", createdAt=1, updatedAt=1)
        )
    async with world.http("tenant-a") as http:
        await http.post("/v1/resources", json={"kind": "knowledge", "name": "private/kb", "spec": kb})
        # a file in the draft of A's knowledge resource (a host with no knowledge index refuses it)
        await http.post(
            "/v1/knowledge/private/kb/documents?filename=notes.md",
            content=b"# Plan\n\nA's draft plan: win the market.",
            headers={"Content-Type": "text/markdown"},
        )
    built = await a.request(
        "image_create", containerId="user-alice", config={"agent": "resource://agents/planner"}
    )
    async with world.http("tenant-a") as http:  # A's agent memory: its end user's, and its image's
        mem = (await http.post("/v1/memory/containers/user-alice", json={"text": "Alice's secret"})).json()
        note = (await http.post("/v1/memory/images/A", json={"text": "A's private note"})).json()
    schedule = "sch_none"
    if world.rt.schedules is not None:
        async with world.http("tenant-a") as http:
            made = await http.post(
                "/v1/schedules",
                json={"imageId": img["imageId"], "cron": "0 9 * * *", "message": "A's morning"},
            )
            schedule = made.json()["schedule"]["scheduleId"]
    endpoint = delivery = "none"
    if world.rt.webhooks is not None:
        from agentvm.turns.webhooks import record_event

        async with world.http("tenant-a") as http:
            hook = {"url": "http://127.0.0.1:9/a-private-hook", "events": ["turn.ended"]}
            endpoint = (await http.post("/v1/webhooks/endpoints", json=hook)).json()["endpoint"]["endpointId"]
            await record_event(world.rt, "tenant-a", "turn.ended", "evt-a", {"secret": "A's"})
            delivery = (await http.get(f"/v1/webhooks/endpoints/{endpoint}/deliveries")).json()["deliveries"][
                0
            ]["deliveryId"]
    return Victim(
        a,
        "user-alice",
        img,
        run["agentId"],
        key["key"]["keyId"],
        wait["turnId"],
        wait["toolCallId"],
        built["record"]["imageId"],
        mem["id"],
        note["id"],
        schedule,
        endpoint,
        delivery,
        question.elicitation_id,
    )


async def snapshot(world: World, v: Victim) -> dict[str, Any]:
    a = v.client
    tenant_a = await world.rt.tenants.get_tenant("tenant-a") if world.rt.tenants is not None else None
    out: dict[str, Any] = {
        "tenant": None if tenant_a is None else tenant_a.model_dump(),
        "containers": await a.request("container_list"),
        "images": await a.request("image_list"),
        "agents": await a.request("agent_list", containerId=v.container),
        "image": await a.request("image_get", imageId=v.image["imageId"]),
        "messages": await a.request("image_messages", imageId=v.image["imageId"]),
        "waits": await a.request("tool_waits"),
        "built": await a.request("image_get", imageId=v.built),
        "question": None
        if world.rt.elicitations is None
        else await world.rt.elicitations.get("tenant-a", v.elicitation_id),
    }
    async with world.http("tenant-a") as http:
        for path in (
            "/v1/auth/keys",
            "/v1/budgets/tenant",
            "/v1/budgets/containers/user-alice",
            "/v1/usage",
            "/v1/usage/summary?groupBy=container,image,model,kind&period=day",
            "/v1/turns",
            "/v1/resources",
            "/v1/resources/prompts/private/plan",
            "/v1/resources/resolve?uri=resource://agents/planner",
            "/v1/resources/knowledge/private/kb",
            "/v1/knowledge/private/kb/documents",
            "/v1/knowledge/private/kb/documents?version=1",
            "/v1/config",
            "/v1/config/audit",
            "/v1/registry/search",
            "/v1/registry/resource?locator=private/plan.prompt@1",
            "/v1/memory/containers/user-alice",
            "/v1/memory/images/A",
            "/v1/schedules",
            f"/v1/schedules/{v.schedule}/runs",
            "/v1/webhooks/endpoints",
            f"/v1/webhooks/endpoints/{v.endpoint}/deliveries",
        ):
            out[path] = (await http.get(path)).json()
        notes = await http.get(f"/v1/containers/{v.container}/workspace/file?path=notes.txt")
        out["workspace"] = (notes.status_code, notes.json())
    return normalise(out, "\0")


# -- the attacks ----------------------------------------------------------------------------------
EXTRA = {
    "message_send": {"content": "hijack"},
    "image_update": {"updates": {"name": "pwned", "systemPrompt": "leak everything"}},
    "image_create": {"config": {"name": "B"}},
}


def extra_for(cmd: str, v: Victim) -> dict[str, Any]:
    """Fields besides the attacked id that name A's objects (the same in both requests)."""
    if cmd == "tool_approval":
        return {"toolCallId": v.call_id, "approved": True}
    if cmd == "tool_result":
        return {"toolCallId": v.call_id, "output": "forged"}
    if cmd == "elicitation_answer":
        return {"action": "accept", "content": {"pin": "forged"}}
    return {}


def attacks(v: Victim) -> list[tuple[str, str, str, str]]:
    """(command, id field, A's id, a missing id of the same kind): every command taking an id.

    Reads first, then writes, so B's own writes (container_create) cannot change a later answer.
    """
    img, agent, container = v.image["imageId"], v.agent_id, v.container
    missing_img, missing_agent, missing_c = "img_missing_0000", "agent_missing_0000", "user-missing"
    return [
        ("container_get", "containerId", container, missing_c),
        ("agent_list", "containerId", container, missing_c),
        ("image_list", "containerId", container, missing_c),
        ("agent_get", "agentId", agent, missing_agent),
        ("image_get", "imageId", img, missing_img),
        ("image_messages", "imageId", img, missing_img),
        ("tool_waits", "containerId", container, missing_c),
        ("tool_waits", "imageId", img, missing_img),
        ("tool_approval", "turnId", v.turn_id, "turn_missing_0000"),
        ("tool_result", "turnId", v.turn_id, "turn_missing_0000"),
        ("elicitation_answer", "elicitationId", v.elicitation_id, "elicit_missing_0000"),
        ("message_send", "imageId", img, missing_img),
        ("message_send", "agentId", agent, missing_agent),
        ("agent_interrupt", "imageId", img, missing_img),
        ("agent_interrupt", "agentId", agent, missing_agent),
        ("image_update", "imageId", img, missing_img),
        ("image_run", "imageId", img, missing_img),
        ("image_stop", "imageId", img, missing_img),
        ("agent_destroy", "agentId", agent, missing_agent),
        ("agent_destroy_all", "containerId", container, missing_c),
        ("image_delete", "imageId", img, missing_img),
        ("image_create", "containerId", container, missing_c),
        ("container_create", "containerId", container, missing_c),
    ]


COMMANDS_COVERED = {
    "container_create",
    "container_get",
    "container_list",
    "agent_get",
    "agent_list",
    "agent_destroy",
    "agent_destroy_all",
    "message_send",
    "agent_interrupt",
    "image_create",
    "image_run",
    "image_stop",
    "image_update",
    "image_list",
    "image_get",
    "image_delete",
    "image_messages",
    # additive: suspended turns
    "tool_approval",
    "tool_result",
    "tool_waits",
    # additive: an MCP server's question during a call
    "elicitation_answer",
}


def test_the_suite_covers_every_command():
    from agentvm.gateway.v1.commands import COMMANDS

    assert {t.removesuffix("_request") for t in COMMANDS} == COMMANDS_COVERED


async def test_tenant_b_learns_nothing_and_changes_nothing_with_tenant_a_ids(world):
    v = await victim(world)
    before = await snapshot(world, v)
    a_frames = len(v.client.frames)
    b = await world.connect(world.tokens["tenant-b"])

    # commands without ids see only B's (empty) tenant
    assert (await b.request("container_list"))["containerIds"] == []
    assert (await b.request("image_list"))["records"] == []

    covered = {"container_list", "image_list"}
    for cmd, field, own, miss in attacks(v):
        extra = {**EXTRA.get(cmd, {}), **extra_for(cmd, v)}
        foreign = await frames_of(b, b.request(cmd, **extra, **{field: own}))
        absent = await frames_of(b, b.request(cmd, **extra, **{field: miss}))
        assert normalise(foreign, own) == normalise(absent, miss), (cmd, field)
        covered.add(cmd)
    assert covered == COMMANDS_COVERED

    # building from A's agent reads like building from one that does not exist
    built = [
        normalise(
            await b.request("image_create", containerId="b", config={"agent": f"resource://agents/{n}"}), n
        )
        for n in ("planner", "nobody")
    ]
    assert built[0] == built[1] and built[0]["code"] == "not_found"

    # subscribe to A's session reads like subscribing to a session that does not exist
    foreign = await frames_of(b, b.subscribe(v.image["sessionId"]))
    absent = await frames_of(b, b.subscribe("sess_missing_0000"))
    assert normalise(foreign, v.image["sessionId"]) == normalise(absent, "sess_missing_0000")
    assert foreign[0]["data"]["details"]["code"] == "not_found"

    await world.run_turns()  # nothing B did may have queued work on A's session
    assert v.client.frames[a_frames:] == []  # A's connection saw nothing of B's attempts
    assert await snapshot(world, v) == before


async def test_tenant_b_cannot_see_or_touch_tenant_a_over_http(world, tmp_path):
    v = await victim(world)
    world.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    await world.rt.sandbox.write("tenant-a", v.container, "notes.txt", b"tenant A's private notes")
    before = await snapshot(world, v)
    sent: list[tuple[str, str]] = []  # every request B sends: each /v1 route must be among them
    said = (await v.client.request("image_messages", imageId=v.image["imageId"]))["messages"]
    async with world.http("tenant-a") as http:  # an export of A's, as B might have come by one
        exported = (await http.get(f"/v1/sessions/{v.image['sessionId']}/export")).content
    async with world.http("tenant-b") as http:
        http.event_hooks["request"].append(_recorder(sent))
        keys = (await http.get("/v1/auth/keys")).json()["keys"]
        assert {k["tenantId"] for k in keys} == {"tenant-b"}
        # a key B makes is B's; naming A's tenant is refused
        made = await http.post("/v1/auth/keys", json={"scopes": ["admin"]})
        assert made.json()["key"]["tenantId"] == "tenant-b"
        named = await http.post("/v1/auth/keys", json={"scopes": ["admin"], "tenantId": "tenant-a"})
        assert named.status_code == 400

        pairs = [
            # knowledge uploads (api/knowledge.py): A's draft and versions are B's missing ones
            ("GET", "/v1/knowledge/{}/documents", "private/kb", "private/none", None),
            ("GET", "/v1/knowledge/{}/documents?version=1", "private/kb", "private/none", None),
            ("DELETE", "/v1/knowledge/{}/documents/notes.md", "private/kb", "private/none", None),
            ("POST", "/v1/knowledge/{}/documents?filename=notes.md", "private/kb", "private/none", None),
            ("DELETE", "/v1/auth/keys/{}", v.key_id, "zzzzzzzzzzzz", None),
            ("GET", "/v1/budgets/containers/{}", v.container, "user-missing", None),
            ("PUT", "/v1/budgets/containers/{}", v.container, "user-missing", {"daily_tokens": 1}),
            ("GET", "/v1/usage?containerId={}", v.container, "user-missing", None),
            ("GET", "/v1/usage/summary?tenantId={}", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/usage/summary?groupBy=image&containerId={}", v.container, "user-missing", None),
            ("GET", "/v1/usage/export?tenantId={}", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/usage/export?format=jsonl&containerId={}", v.container, "user-missing", None),
            ("GET", "/v1/turns?containerId={}", v.container, "user-missing", None),
            ("GET", "/v1/turns?tenantId={}", "tenant-a", "tenant-nobody", None),
            ("POST", "/v1/turns/{}/cancel", v.turn_id, "turn_missing_0000", None),
            ("POST", "/v1/turns/cancel?by=turnIds", v.turn_id, "turn_missing_0000", None),
            ("POST", "/v1/turns/cancel?by=containerId", v.container, "user-missing", None),
            ("POST", "/v1/turns/cancel?by=tenantId", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/containers/{}/workspace", v.container, "user-missing", None),
            ("GET", "/v1/containers/{}/workspace/file?path=notes.txt", v.container, "user-missing", None),
            ("GET", "/v1/resources/prompts/{}", "private/plan", "private/none", None),
            ("GET", "/v1/resources/prompts/{}@1", "private/plan", "private/none", None),
            ("GET", "/v1/resources/resolve?uri=resource://agents/{}", "planner", "nobody", None),
            ("POST", "/v1/resources/render", "private/plan", "private/none", None),
            ("POST", "/v1/resources/tags", "private/plan", "private/none", None),
            ("DELETE", "/v1/resources/prompts/{}@1", "private/plan", "private/none", None),
            ("DELETE", "/v1/resources/agents/{}", "planner", "nobody", None),
            ("POST", "/v1/resources/search", "private/kb", "private/none", None),
            (
                "GET",
                "/v1/registry/resource?locator={}",
                "private/plan.prompt@1",
                "private/none.prompt@1",
                None,
            ),
            (
                "GET",
                "/v1/registry/resource?locator={}",
                "localhost/private/plan:1",
                "localhost/private/none:1",
                None,
            ),
            ("GET", "/v1/registry/exists?locator={}", "private/plan.prompt", "private/none.prompt", None),
            ("POST", "/v1/registry/resolve", "private/plan.prompt@1", "private/none.prompt@1", None),
            ("POST", "/v1/registry/delete", "private/plan.prompt@1", "private/none.prompt@1", None),
            ("POST", "/v1/registry/delete", "private/plan.prompt", "private/none.prompt", None),
            ("GET", "/v1/tenants/{}", "tenant-a", "tenant-nobody", None),
            ("PATCH", "/v1/tenants/{}", "tenant-a", "tenant-nobody", {"name": "pwned"}),
            ("DELETE", "/v1/tenants/{}", "tenant-a", "tenant-nobody", None),
            ("POST", "/v1/tenants/get", "tenant-a", "tenant-nobody", None),
            ("POST", "/v1/tenants/update", "tenant-a", "tenant-nobody", None),
            ("POST", "/v1/tenants/delete", "tenant-a", "tenant-nobody", None),
            ("POST", "/v1/tenants", "tenant-a", "tenant-nobody", None),  # re-registering A's id
            ("POST", "/v1/tenants/create", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/metrics?tenant={}", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/metrics?format=prometheus&tenant={}", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/logs?tenant={}", "tenant-a", "tenant-nobody", None),
            ("GET", "/v1/logs?containerId={}", v.container, "user-missing", None),
            ("GET", "/v1/logs?turnId={}", v.turn_id, "turn_missing_0000", None),
            ("GET", "/v1/logs?sessionId={}", v.image["sessionId"], "sess_missing_0000", None),
            ("POST", "/v1/images/{}/rebuild", v.built, "img_missing", {}),
            (
                "POST",
                "/v1/images/{}/rebuild",
                v.image["imageId"],
                "img_missing",
                {"agent": "resource://agents/planner"},
            ),
            # writes last: B's definitions cannot reach A's resources, and A's names make B's own
            ("POST", "/v1/resources", "private/plan", "private/none", None),
            ("PUT", "/v1/resources/agents/{}", "planner", "nobody", {"spec": {"systemPrompt": "B's"}}),
            ("POST", "/v1/registry/link", "planner", "nobody", None),  # their next versions
            # the session centre
            ("GET", "/v1/sessions/{}/export", v.image["sessionId"], "sess_missing_0000", None),
            ("PUT", "/v1/sessions/{}/title", v.image["sessionId"], "sess_missing_0000", {"title": "pwned"}),
            (
                "POST",
                "/v1/sessions/{}/fork",
                v.image["sessionId"],
                "sess_missing_0000",
                {"messageId": said[0]["id"], "requestId": "r1"},
            ),
            ("GET", "/v1/sessions/search?q=private&containerId={}", v.container, "user-missing", None),
            # turns over HTTP (api/http_turns.py): nothing sent, streamed or stopped on A's session
            (
                "POST",
                "/v1/sessions/{}/turns",
                v.image["sessionId"],
                "sess_missing_0000",
                {"message": "pwned"},
            ),
            ("GET", "/v1/sessions/{}/events", v.image["sessionId"], "sess_missing_0000", None),
            ("POST", "/v1/sessions/{}/interrupt", v.image["sessionId"], "sess_missing_0000", None),
            # agent memory (api/memory.py): A's end user's and A's image's, by container, name and id
            ("GET", "/v1/memory/containers/{}", v.container, "user-missing", None),
            ("GET", "/v1/memory/containers/{}?q=secret", v.container, "user-missing", None),
            ("GET", "/v1/memory/containers/{}/export", v.container, "user-missing", None),
            ("POST", "/v1/memory/containers/{}", v.container, "user-missing", {"text": "pwned"}),
            ("GET", "/v1/memory/containers/user-alice/{}", v.memory_id, "mem_missing_0000", None),
            ("PATCH", "/v1/memory/containers/user-alice/{}", v.memory_id, "mem_missing_0000", {"text": "x"}),
            ("DELETE", "/v1/memory/containers/user-alice/{}", v.memory_id, "mem_missing_0000", None),
            ("DELETE", "/v1/memory/containers/{}", v.container, "user-missing", None),
            ("GET", "/v1/memory/images/{}", "A", "nobody", None),
            ("GET", "/v1/memory/images/{}?q=private", "A", "nobody", None),
            ("GET", "/v1/memory/images/{}/export", "A", "nobody", None),
            ("GET", "/v1/memory/images/A/{}", v.image_memory_id, "mem_missing_0000", None),
            ("PATCH", "/v1/memory/images/A/{}", v.image_memory_id, "mem_missing_0000", {"text": "x"}),
            ("DELETE", "/v1/memory/images/A/{}", v.image_memory_id, "mem_missing_0000", None),
            ("DELETE", "/v1/memory/images/{}", "A", "nobody", None),
            ("POST", "/v1/memory/images/{}", "A", "nobody", {"text": "B's own note"}),  # B's own scope
            # schedules (api/schedules.py): none of A's read, changed, deleted, nor made on A's image
            ("GET", "/v1/schedules/{}", v.schedule, "sch_missing_0000", None),
            ("GET", "/v1/schedules/{}/runs", v.schedule, "sch_missing_0000", None),
            ("PATCH", "/v1/schedules/{}", v.schedule, "sch_missing_0000", {"paused": True}),
            ("DELETE", "/v1/schedules/{}", v.schedule, "sch_missing_0000", None),
            ("POST", "/v1/schedules", v.image["imageId"], "img_missing", None),
            # webhooks (api/webhooks.py): none of A's endpoints or deliveries read, replayed or deleted
            ("GET", "/v1/webhooks/endpoints/{}", v.endpoint, "whe_missing_0000", None),
            ("GET", "/v1/webhooks/endpoints/{}/deliveries", v.endpoint, "whe_missing_0000", None),
            ("POST", "/v1/webhooks/deliveries/{}/replay", v.delivery, "msg_missing_0000", None),
            ("DELETE", "/v1/webhooks/endpoints/{}", v.endpoint, "whe_missing_0000", None),
            # elicitation (api/elicitations.py): A's user's open question is not answered by B
            (
                "POST",
                "/v1/elicitations/{}",
                v.elicitation_id,
                "elicit_missing_0000",
                {"action": "accept", "content": {"pin": "forged"}},
            ),
            ("POST", "/v1/elicitations/{}", v.elicitation_id, "elicit_missing_0000", {"action": "decline"}),
        ]
        bodies = {  # the routes that name the resource in their body
            "/v1/resources/render": lambda name: {
                "uri": f"resource://prompts/{name}",
                "arguments": {"goal": "x"},
            },
            "/v1/resources/tags": lambda name: {"uri": f"resource://prompts/{name}@1", "tag": "pwned"},
            "/v1/resources/search": lambda name: {"uri": f"resource://knowledge/{name}", "query": "plan"},
            "/v1/registry/resolve": lambda name: {"locator": name, "args": {"goal": "x"}},
            "/v1/registry/delete": lambda name: {"locator": name},
            "/v1/tenants/get": lambda name: {"tenantId": name},
            "/v1/tenants/update": lambda name: {"tenantId": name, "name": "pwned"},
            "/v1/tenants/delete": lambda name: {"tenantId": name},
            "/v1/tenants": lambda name: {"name": "pwned", "tenantId": name},
            "/v1/tenants/create": lambda name: {"name": "pwned", "tenantId": name},
            "/v1/resources": lambda name: {
                "kind": "agent",
                "name": "b-agent",
                "spec": {"prompt": {"uri": f"resource://prompts/{name}", "arguments": {"goal": "x"}}},
            },
            "/v1/registry/link": lambda name: {
                "locator": f"{name}.agent@2",
                "content": {"systemPrompt": "B"},
            },
            # (the query string only tells the three bodies apart)
            "/v1/turns/cancel?by=turnIds": lambda name: {"turnIds": [name]},
            "/v1/turns/cancel?by=containerId": lambda name: {"containerId": name},
            "/v1/turns/cancel?by=tenantId": lambda name: {"all": True, "tenantId": name},
            "/v1/schedules": lambda name: {"imageId": name, "cron": "* * * * *", "message": "pwned"},
        }
        assert (await http.get("/v1/resources")).json() == {"resources": [], "next": None}
        listed = await http.get("/v1/schedules")  # B lists none of A's schedules
        assert world.rt.schedules is None or listed.json() == {"schedules": []}
        hooks = await http.get("/v1/webhooks/endpoints")  # nor webhook endpoints
        assert world.rt.webhooks is None or hooks.json() == {"endpoints": []}
        # an endpoint B registers is B's own, and gets none of A's events
        mine = await http.post(
            "/v1/webhooks/endpoints", json={"url": "http://127.0.0.1:9/b", "events": ["turn.ended"]}
        )
        if world.rt.webhooks is not None:
            b_endpoint = mine.json()["endpoint"]["endpointId"]
            assert (await http.get(f"/v1/webhooks/endpoints/{b_endpoint}/deliveries")).json() == {
                "deliveries": []
            }
        empty = {"results": [], "total": 0, "limit": 20, "offset": 0}
        assert (await http.get("/v1/registry/search?query=plan")).json() == empty
        for method, path, own, miss, body in pairs:
            make = bodies.get(path)
            foreign = await http.request(method, path.format(own), json=make(own) if make else body)
            absent = await http.request(method, path.format(miss), json=make(miss) if make else body)
            assert foreign.status_code == absent.status_code, path
            assert normalise(_body(foreign), own) == normalise(_body(absent), miss), path
        # searching finds nothing of A's; importing into A's container id makes B's own container
        assert (await http.get("/v1/sessions/search?q=private")).json() == {"results": [], "next": None}
        imports = [
            await http.post(f"/v1/containers/{c}/sessions/import", content=exported)
            for c in (v.container, "user-missing")
        ]
        assert [r.status_code for r in imports] == [201, 201]
        # a session made in A's container id is in B's own container (HTTP turns, api/http_turns.py)
        made = [
            await http.post(f"/v1/containers/{c}/sessions", json={}) for c in (v.container, "user-missing")
        ]
        assert [r.status_code for r in made] == [201, 201]
        assert made[0].json()["sessionId"] != v.image["sessionId"]
        assert normalise(imports[0].json(), v.container) == normalise(imports[1].json(), "user-missing")
        # publishing at A's locator makes B's own resource; A's stays as it was (the snapshot)
        mine = await http.post(
            "/v1/registry/publish", json={"locator": "private/plan.prompt@1", "content": "B"}
        )
        assert mine.status_code == 201 and mine.json()["uri"] == "resource://prompts/private/plan@1"
        resolved = await http.post("/v1/registry/resolve", json={"locator": "private/plan.prompt@1"})
        assert resolved.json()["content"] == "B"
        # uploading at A's knowledge name fills B's own draft; A's stays as it was (the snapshot)
        upload = await http.post(
            "/v1/knowledge/private/kb/documents?filename=notes.md",
            content=b"B's notes about the plan.",
            headers={"Content-Type": "text/plain"},
        )
        if world.rt.knowledge_index is not None:
            assert upload.status_code == 201 and upload.json()["draft"]["documents"] == 1
            listed = (await http.get("/v1/knowledge/private/kb/documents")).json()["documents"]
            assert [d["bytes"] for d in listed] == [len(b"B's notes about the plan.")]
        # the tenant registry is the platform's: B (an admin of its own tenant) lists nothing of it
        for path in ("/v1/tenants", "/v1/tenants/list", "/v1/tenants?status=all", "/v1/tenants/tenant-a"):
            refused = await http.get(path)
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden"), path
        usage = (await http.get("/v1/usage")).json()
        assert usage["totals"]["turns"] == 0 and usage["totals"]["cacheSavings"] == 0.0
        assert usage["records"] == [] and usage["sessions"] == []  # none of A's turns or sessions
        # B's metrics are B's alone: none of A's turns, tokens, tools or series
        figures = (await http.get("/v1/metrics")).json()
        assert (figures["tenantId"], figures["turns"]["total"], figures["tokens"]) == (
            "tenant-b",
            0,
            {"input": 0, "output": 0},
        )
        assert figures["tools"] == {"calls": 0, "failures": 0} and "tenant-a" not in json.dumps(figures)
        exposition = await http.get("/v1/metrics?format=prometheus")
        if exposition.status_code == 200:  # the local host (AWS answers JSON only)
            assert "tenant-a" not in exposition.text and 'tenant="tenant-b"' in exposition.text
        # B's log lines are B's alone: none of A's (which exist: A's admin reads them)
        getattr(world.rt.logs, "flush", lambda: None)()
        lines = (await http.get("/v1/logs?limit=500")).json()["lines"]
        leaked = json.dumps(lines)
        assert all(line["tenantId"] == "tenant-b" for line in lines)
        for a_id in ("tenant-a", v.container, v.image["sessionId"], v.turn_id, v.image["imageId"]):
            assert a_id not in leaked, a_id
    async with world.http("tenant-a") as own:
        mine = (await own.get("/v1/logs?limit=500")).json()["lines"]
        assert mine and {line["tenantId"] for line in mine} == {"tenant-a"}
        assert any(line["turnId"] == v.turn_id for line in mine)
    async with world.http("tenant-b") as http:
        http.event_hooks["request"].append(_recorder(sent))
        assert (await http.get("/v1/usage/summary?groupBy=tenant")).json()["rows"] == []
        prices = await http.get("/v1/usage/prices")  # the server's table: no tenant's data in it
        assert prices.status_code == 200 and "tenant-a" not in prices.text
        every = await http.get("/v1/usage/summary?tenantId=*")
        assert (every.status_code, every.json()["error"]["code"]) == (403, "forbidden")
        # A's configuration: B sees only its own (defaults), its audit log is empty, and writing
        # the server's settings needs a platform admin
        config = (await http.get("/v1/config")).json()["settings"]
        assert config["llm.maxOutputTokens"]["source"] != "tenant" and "321" not in json.dumps(config)
        assert (await http.get("/v1/config/llm.maxOutputTokens")).json() == config["llm.maxOutputTokens"]
        assert (await http.get("/v1/registry/types")).status_code == 200  # no tenant's data in it
        assert (await http.get("/v1/config?scope=tenant")).json() == {"settings": {}}
        assert (await http.get("/v1/config/audit")).json() == {"changes": []}
        server = await http.put("/v1/config", json={"scope": "server", "values": {"llm.maxOutputTokens": 1}})
        assert server.status_code == 403
        await http.put("/v1/config/llm.maxOutputTokens", json={"value": 5})  # B's own: A's stays
        tenant_budget = (await http.get("/v1/budgets/tenant")).json()  # A set one; B has none
        assert (tenant_budget["dailyTokens"], tenant_budget["usage"]["month"]) == (None, 0)
        await http.put("/v1/budgets/tenant", json={"daily_tokens": 1, "monthly_tokens": 1})
        await _mcp_oauth_attacks(world, http)
    schema = create_app(world.rt).openapi()
    attacked = {_route(schema, method, url) for method, url in sent}
    every = {(m.upper(), p) for p, ops in schema["paths"].items() if p.startswith("/v1/") for m in ops}
    assert every <= attacked, f"/v1 routes tenant B does not try here: {sorted(every - attacked)}"

    # A's key id with another secret reads exactly like a made-up key
    a_key_id = world.tokens["tenant-a"].split("_")[1]
    forged = f"avm_{a_key_id}_{world.tokens['tenant-b'].split('_', 2)[2]}"
    made_up = "avm_zzzzzzzzzzzz_" + world.tokens["tenant-b"].split("_", 2)[2]
    transport = httpx.ASGITransport(app=create_app(world.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as anon:
        answers = [
            (await anon.get("/v1/usage", headers={"Authorization": f"Bearer {t}"})) for t in (forged, made_up)
        ]
    assert [r.status_code for r in answers] == [401, 401] and answers[0].json() == answers[1].json()
    forged_ws = await frames_of(v.client, v.client.send_raw(_auth(forged)))
    made_up_ws = await frames_of(v.client, v.client.send_raw(_auth(made_up)))
    assert normalise(forged_ws, "\0") == normalise(made_up_ws, "\0")

    assert await snapshot(world, v) == before


A_OAUTH_URL = "https://mcp.crm.example.com/mcp"


async def _mcp_oauth_attacks(world: World, http: httpx.AsyncClient) -> None:
    """B's key on the MCP OAuth routes (api/mcp_oauth.py): a server A authorized reads, for B, like
    one nobody did, and B's forgetting it leaves A's tokens."""
    from mcp.shared.auth import OAuthToken

    from agentvm.adapters.mcp.oauth import SealedTokenStorage
    from tests.mcp_servers.oauth_provider import DictRecords

    if world.rt.mcp_oauth is None:
        world.rt.mcp_oauth = DictRecords()
    access = world.rt.mcp_oauth_access()  # None on AWS: its config centre seals nothing
    if access is not None:
        a_tokens = SealedTokenStorage(access.records, access.sealer, "tenant-a", A_OAUTH_URL)
        await a_tokens.set_tokens(OAuthToken(access_token="a-access", expires_in=3600))
    answers: dict[str, list[tuple[int, Any]]] = {}
    for url in (A_OAUTH_URL, "https://mcp.nobody.example.com/mcp"):
        params = {"server_url": url}
        answers[url] = [
            (r.status_code, r.json())
            for r in [
                await http.get("/v1/mcp/oauth/connections", params=params),
                await http.delete("/v1/mcp/oauth/connections", params=params),
            ]
        ]
    assert answers[A_OAUTH_URL] == answers["https://mcp.nobody.example.com/mcp"]
    assert "a-access" not in json.dumps(answers)
    # B cannot have the server authorize anything at a private address (nor A's pending state)
    refused = await http.post("/v1/mcp/oauth/authorizations", json={"server_url": "http://127.0.0.1:9/mcp"})
    assert refused.status_code == 400
    if access is not None:
        assert await a_tokens.get_tokens() is not None  # B's DELETE forgot nothing of A's


def _recorder(sent: list[tuple[str, str]]) -> Callable[[httpx.Request], Awaitable[None]]:
    async def record(request: httpx.Request) -> None:
        sent.append((request.method, request.url.path))

    return record


def _route(schema: dict[str, Any], method: str, path: str) -> tuple[str, str] | None:
    """The OpenAPI operation a request path reaches: the matching template with the fewest
    parameters (``/v1/tenants/list`` is its own route, not ``/v1/tenants/{tenant_id}``), then the
    longest (``/v1/schedules/{id}/runs`` is not ``/v1/schedules/{id}``)."""

    def matching(param: str) -> list[str]:
        return [
            template
            for template, ops in schema["paths"].items()
            if method.lower() in ops
            and re.fullmatch(re.sub(r"\\\{[^}]+\\\}", param, re.escape(template)), path)
        ]

    # a template whose parameters each take one segment first (``/v1/memory/{kind}/{owner}/export``
    # is not ``/v1/memory/{kind}/{owner}`` with an owner "x/export"), then ones whose take several
    matches = matching("[^/]+") or matching(".+")
    return (method, min(matches, key=lambda t: (t.count("{"), -len(t)))) if matches else None


def _body(response: httpx.Response) -> Any:
    """A JSON answer as data; a file (a usage export) as its text, names and all."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return {"file": response.text, "disposition": response.headers.get("content-disposition")}


def _auth(token: str) -> str:
    return json.dumps({"type": "auth", "headers": {"Authorization": f"Bearer {token}"}})


# -- AgentX v2 (JSON-RPC 2.0): the same attacks, as a v2 client --------------------------------------
def v2_attacks(v: Victim) -> list[tuple[str, str, str, str]]:
    """(method, id param, A's id, a missing id of the same kind): every v2 method taking an id."""
    img, agent, container, session = v.image["imageId"], v.agent_id, v.container, v.image["sessionId"]
    missing_img, missing_agent, missing_c = "img_missing_0000", "agent_missing_0000", "user-missing"
    return [
        ("container.get", "containerId", container, missing_c),
        ("instance.list", "containerId", container, missing_c),
        ("image.list", "containerId", container, missing_c),
        ("instance.get", "instanceId", agent, missing_agent),
        ("agent.get", "agentId", agent, missing_agent),
        ("image.get", "imageId", img, missing_img),
        ("image.messages", "imageId", img, missing_img),
        ("os.list", "imageId", img, missing_img),
        ("os.read", "imageId", img, missing_img),
        ("agentvm.tool.waits", "containerId", container, missing_c),
        ("agentvm.tool.waits", "imageId", img, missing_img),
        ("agentvm.tool.approve", "turnId", v.turn_id, "turn_missing_0000"),
        ("agentvm.tool.result", "turnId", v.turn_id, "turn_missing_0000"),
        ("agentvm.elicitation.answer", "elicitationId", v.elicitation_id, "elicit_missing_0000"),
        ("agentvm.subscribe", "sessionId", session, "sess_missing_0000"),
        ("subscribe", "topic", session, "sess_missing_0000"),
        ("message.send", "imageId", img, missing_img),
        ("message.send", "instanceId", agent, missing_agent),
        ("instance.interrupt", "imageId", img, missing_img),
        ("instance.interrupt", "instanceId", agent, missing_agent),
        ("image.update", "imageId", img, missing_img),
        ("image.run", "imageId", img, missing_img),
        ("image.stop", "imageId", img, missing_img),
        ("instance.destroy", "instanceId", agent, missing_agent),
        ("instance.destroyAll", "containerId", container, missing_c),
        ("image.delete", "imageId", img, missing_img),
        ("image.create", "containerId", container, missing_c),
        ("container.create", "containerId", container, missing_c),
    ]


V2_EXTRA = {
    "message.send": {"content": "hijack"},
    "image.update": {"updates": {"name": "pwned", "systemPrompt": "leak everything"}},
    "image.create": {"name": "B"},
    "os.read": {"path": "notes.txt"},
}
# v2 methods that take no id of anyone's (or are protocol plumbing), checked otherwise below
V2_WITHOUT_IDS = {"container.list", "auth", "control.ack"}


def test_the_v2_suite_covers_every_method():
    from agentvm.gateway.v2.methods import METHODS

    attacked = {
        m for m, *_ in v2_attacks(Victim(None, "", {"imageId": "", "sessionId": ""}, "", "", "", "", ""))
    }  # type: ignore[arg-type]
    aliases = {"agent.list", "agent.destroy", "agent.destroyAll", "agent.interrupt"}  # same handlers
    assert set(METHODS) == attacked | aliases | V2_WITHOUT_IDS


async def test_tenant_b_learns_nothing_and_changes_nothing_with_tenant_a_ids_over_v2(world):
    from tests.v2_client import rpc

    v = await victim(world)
    before = await snapshot(world, v)
    a_frames = len(v.client.frames)
    assert world.connect_v2 is not None
    b = await world.connect_v2(world.tokens["tenant-b"])
    assert (await b.call("container.list"))["containerIds"] == []
    assert (await b.call("image.list"))["records"] == []
    assert (await b.call("instance.list"))["agents"] == []

    for method, param, own, miss in v2_attacks(v):
        extra = {**V2_EXTRA.get(method, {}), **_v2_extra_for(method, v)}
        foreign = await frames_of(b, b.send(rpc(method, {**extra, param: own}, id="attack")))
        absent = await frames_of(b, b.send(rpc(method, {**extra, param: miss}, id="attack")))
        assert normalise(foreign, own) == normalise(absent, miss), (method, param, foreign, absent)
        assert foreign, method  # answered (an error, or B's own empty answer)
    # the same with the runtime. prefix, and as a batch
    batch = [
        rpc("runtime.image.get", {"imageId": v.image["imageId"]}, id=1),
        rpc("image.messages", {"imageId": v.image["imageId"]}, id=2),
    ]
    (answers,) = await b.send(batch)
    assert answers[0]["result"] == {"record": None} and answers[1]["error"]["data"]["code"] == "not_found"

    await world.run_turns()  # nothing B did may have queued work on A's session
    assert v.client.frames[a_frames:] == []  # A's connection saw nothing of B's attempts
    assert await snapshot(world, v) == before


def _v2_extra_for(method: str, v: Victim) -> dict[str, Any]:
    if method == "agentvm.tool.approve":
        return {"toolCallId": v.call_id, "approved": True}
    if method == "agentvm.tool.result":
        return {"toolCallId": v.call_id, "output": "forged"}
    if method == "agentvm.elicitation.answer":
        return {"action": "accept", "content": {"pin": "forged"}}
    return {}


async def test_tenant_b_never_gets_tenant_a_cached_reply(world):
    """The reply cache (turns/reply_cache.py) is keyed per tenant: B asking A's cached first question
    to an image of the same config is answered by the model, never with A's reply."""
    config = {"name": "Desk", "systemPrompt": "You answer shop questions.", "replyCache": {"enabled": True}}
    a = await world.connect(world.tokens["tenant-a"])
    b = await world.connect(world.tokens["tenant-b"])
    world.model.add("Tenant A's private answer.", "Tenant B's own answer.")

    async def first_reply(client: ProtocolClient, container: str) -> str:
        image = (await client.request("image_create", containerId=container, config=config))["record"]
        await client.subscribe(image["sessionId"])
        await client.request("message_send", imageId=image["imageId"], content="Opening hours?")
        await world.run_turns()
        deltas = [f for f in client.session_events() if f["context"]["imageId"] == image["imageId"]]
        return "".join(f["data"]["text"] for f in deltas if f["type"] == "text_delta")

    assert await first_reply(a, "user-alice") == "Tenant A's private answer."
    assert await first_reply(b, "user-alice") == "Tenant B's own answer."  # the model, not A's cache
    assert await first_reply(a, "user-bob") == "Tenant A's private answer."  # A's own hit
    assert len(world.model.requests) == 2


async def test_tenant_b_sees_and_calls_none_of_tenant_a_agents_over_mcp(world):
    """``/mcp`` (AgentVM as an MCP server, api/mcp.py), with the official MCP SDK's client: B's key
    lists none of A's images, and calling A's tools reads exactly as calling a tool that does not
    exist; A's data is as before and no turn ran on A's sessions."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    v = await victim(world)
    before = await snapshot(world, v)
    a_frames = len(v.client.frames)

    async def session_of(tenant: str, work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        headers = {"Authorization": f"Bearer {world.tokens[tenant]}"}
        transport = httpx2.ASGITransport(app=create_app(world.rt))
        async with (
            httpx2.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http,
            streamable_http_client("http://avm/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    async def names(session: ClientSession) -> list[str]:
        return [t.name for t in (await session.list_tools()).tools]

    a_tools = await session_of("tenant-a", names)
    assert len(a_tools) == 3  # A's "A", "G" and the built planner: the names B will try
    assert await session_of("tenant-b", names) == []

    async def attack(session: ClientSession) -> list[tuple[str, str]]:
        out = []
        for name in [*a_tools, v.image["imageId"]]:
            for target in (name, "nobody-at-all"):
                with pytest.raises(MCPError) as refused:
                    await session.call_tool(target, {"message": "hijack"})
                out.append((target, refused.value.message.replace(target, "<ID>")))
        return out

    answers = await session_of("tenant-b", attack)
    for (_, foreign), (_, absent) in zip(answers[::2], answers[1::2], strict=True):
        assert foreign == absent == "Unknown tool: <ID>"
    await world.run_turns()  # nothing B did may have queued work on A's sessions
    assert v.client.frames[a_frames:] == []
    assert await snapshot(world, v) == before


async def test_tenant_b_cannot_see_or_touch_tenant_a_over_the_managed_agents_api(world):
    """Anthropic's Managed Agents API (api/managed/): every route, with A's agent, environment and
    session ids, answers B exactly as with ids that do not exist; B's lists hold none of A's; A's
    objects stay as they were. ``x-api-key`` (what the SDK sends) authenticates as the bearer does."""
    from agentvm.api.managed import served_routes

    async with world.http("tenant-a") as a:
        agent = (await a.post("/anthropic/v1/agents", json={"name": "A's", "model": "echo/echo-1"})).json()
        env = (await a.post("/anthropic/v1/environments", json={"name": "A's env"})).json()
        made = await a.post(
            "/anthropic/v1/sessions", json={"agent": agent["id"], "environment_id": env["id"]}
        )
        assert made.status_code == 200, made.text
        session = made.json()

        async def a_state() -> list[Any]:
            paths = ("agents", "environments", "sessions", f"sessions/{session['id']}/events")
            pages = [(await a.get(f"/anthropic/v1/{p}?include_archived=true")).json() for p in paths]
            for item in pages[2]["data"]:
                item.pop("stats")  # the session's age: time, not state
            return pages

        before = await a_state()
    message = {"events": [{"type": "user.message", "content": [{"type": "text", "text": "pwned"}]}]}
    result = {"type": "user.custom_tool_result", "custom_tool_use_id": "{}.call_1", "content": []}
    pairs = [
        ("GET", "/agents/{}", agent["id"], "agent_missing_0000", None),
        ("POST", "/agents/{}", agent["id"], "agent_missing_0000", {"system": "B's"}),
        ("POST", "/agents/{}/archive", agent["id"], "agent_missing_0000", None),
        ("GET", "/agents/{}/versions", agent["id"], "agent_missing_0000", None),
        ("GET", "/environments/{}", env["id"], "env_missing_0000", None),
        ("POST", "/environments/{}", env["id"], "env_missing_0000", {"name": "pwned"}),
        ("POST", "/environments/{}/archive", env["id"], "env_missing_0000", None),
        ("POST", "/sessions", agent["id"], "agent_missing_0000", "agent"),
        ("POST", "/sessions", env["id"], "env_missing_0000", "environment"),
        ("GET", "/sessions/{}", session["id"], "sess_missing_0000", None),
        ("POST", "/sessions/{}", session["id"], "sess_missing_0000", {"title": "pwned"}),
        ("POST", "/sessions/{}/archive", session["id"], "sess_missing_0000", None),
        ("DELETE", "/sessions/{}", session["id"], "sess_missing_0000", None),
        ("POST", "/sessions/{}/events", session["id"], "sess_missing_0000", message),
        ("GET", "/sessions/{}/events", session["id"], "sess_missing_0000", None),
        ("GET", "/sessions/{}/events/stream", session["id"], "sess_missing_0000", None),
        ("GET", "/sessions?agent_id={}", agent["id"], "agent_missing_0000", None),
    ]
    sent: list[tuple[str, str]] = []
    async with world.http("tenant-b") as http:
        http.headers.pop("Authorization")
        http.headers["x-api-key"] = world.tokens["tenant-b"]
        http.event_hooks["request"].append(_recorder(sent))
        own_agent = (
            await http.post("/anthropic/v1/agents", json={"name": "B's", "model": "echo/echo-1"})
        ).json()
        own_env = (await http.post("/anthropic/v1/environments", json={"name": "B's env"})).json()
        own = (
            await http.post(
                "/anthropic/v1/sessions", json={"agent": own_agent["id"], "environment_id": own_env["id"]}
            )
        ).json()
        bodies = {
            "agent": lambda name: {"agent": name, "environment_id": own_env["id"]},
            "environment": lambda name: {"agent": own_agent["id"], "environment_id": name},
        }
        for method, path, mine, miss, body in pairs:
            make = bodies.get(body) if isinstance(body, str) else None
            answers = [
                await http.request(method, "/anthropic/v1" + path.format(x), json=make(x) if make else body)
                for x in (mine, miss)
            ]
            assert answers[0].status_code == answers[1].status_code, path
            assert normalise(_body(answers[0]), mine) == normalise(_body(answers[1]), miss), path
        # A's turn named in a tool result on B's own session reads like an unknown one
        answers = [
            await http.post(
                f"/anthropic/v1/sessions/{own['id']}/events",
                json={"events": [{**result, "custom_tool_use_id": f"{t}.call_1"}]},
            )
            for t in (f"turn_of_{session['id']}", "turn_missing_0000")
        ]
        assert answers[0].status_code == answers[1].status_code == 404
        for collection in ("agents", "environments", "sessions"):
            listed = (await http.get(f"/anthropic/v1/{collection}?include_archived=true")).json()["data"]
            assert [x["id"] for x in listed] == [
                {"agents": own_agent, "environments": own_env, "sessions": own}[collection]["id"]
            ]
        http.headers["x-api-key"] = "avm_zzzzzzzzzzzz_" + world.tokens["tenant-b"].split("_", 2)[2]
        refused = await http.get("/anthropic/v1/agents")
        assert (refused.status_code, refused.json()["error"]["type"]) == (401, "authentication_error")
    async with world.http("tenant-a") as a:
        assert await a_state() == before
    templates = set(served_routes())
    assert len(templates) >= 20
    attacked = {
        (method, template)
        for method, template in templates
        for sent_method, url in sent
        if sent_method == method and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), url)
    }
    assert templates - attacked == set(), "Managed Agents routes tenant B does not try here"


async def test_tenant_b_reaches_none_of_tenant_a_agents_over_a2a(world):
    """``/a2a/{image_id}`` (each image as an A2A agent, api/a2a.py): B's key on A's image, for its
    card and every JSON-RPC method, is answered exactly as an image that does not exist; A's data
    is as before and no turn ran on A's sessions."""
    import httpx

    v = await victim(world)
    before = await snapshot(world, v)
    a_frames = len(v.client.frames)
    headers = {"Authorization": f"Bearer {world.tokens['tenant-b']}", "A2A-Version": "1.0"}
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hijack"}]}
    calls = [
        ("SendMessage", {"message": message}),
        ("SendStreamingMessage", {"message": message}),
        ("GetTask", {"id": "t1"}),
        ("CancelTask", {"id": "t1"}),
        ("ListTasks", {}),
    ]
    transport = httpx.ASGITransport(app=create_app(world.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        # A2A is served on this runtime (both hosts ship a2a-sdk): A's own key gets A's card.
        own = {"Authorization": f"Bearer {world.tokens['tenant-a']}"}
        served = await http.get(f"/a2a/{v.image['imageId']}/.well-known/agent-card.json", headers=own)
        assert (
            served.status_code == 200
            and served.json()["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
        )
        for target in (v.image["imageId"], "img_nobody_at_all"):
            card = await http.get(f"/a2a/{target}/.well-known/agent-card.json")
            answers = [card]
            for method, params in calls:
                rpc = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                answers.append(await http.post(f"/a2a/{target}", json=rpc))
            shown = [(a.status_code, a.text.replace(target, "<ID>")) for a in answers]
            if target == v.image["imageId"]:
                foreign = shown
            else:
                assert foreign == shown and {status for status, _ in shown} == {404}
        # B's own image, naming A's turn (a task: suspended, so cancelable) answers as a missing task.
        b = await world.connect(world.tokens["tenant-b"])
        mine = (await b.request("image_create", containerId="user-bob", config={"name": "B"}))["record"]
        answers: dict[str, list[tuple[int, str]]] = {}
        for task_id in (v.turn_id, "turn_nobody_at_all"):
            follow_up = {**message, "messageId": f"m-{task_id}", "taskId": task_id}
            shown = []
            for method, params in (
                ("GetTask", {"id": task_id}),
                ("CancelTask", {"id": task_id}),
                ("SendMessage", {"message": follow_up}),
            ):
                rpc = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                answer = await http.post(f"/a2a/{mine['imageId']}", json=rpc)
                shown.append((answer.status_code, answer.text.replace(task_id, "<ID>")))
            answers[task_id] = shown
        assert answers[v.turn_id] == answers["turn_nobody_at_all"]
        assert "TaskNotFound" in answers[v.turn_id][0][1] or "-32001" in answers[v.turn_id][0][1]
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        listed = (await http.post(f"/a2a/{mine['imageId']}", json=rpc)).json()["result"]
        assert listed.get("tasks", []) == []  # B's image: none of A's turns
    await world.run_turns()  # nothing B did may have queued work on A's sessions
    assert v.client.frames[a_frames:] == []
    assert await snapshot(world, v) == before


async def test_tenant_b_gets_no_use_of_tenant_a_mcp_oauth_authorization(tmp_path):
    """A real authorization of tenant A (a loopback MCP server whose authorization server approves
    at once): its state lands tokens under A only, even through B's browser; it works once; B's
    key sees and forgets nothing of A's; and B's turn naming the same server URL is not
    authorized by A's tokens."""
    from urllib.parse import urlsplit

    from agentvm.adapters.llm.scripted import Calls
    from agentvm.adapters.mcp.client import SdkMcpConnector
    from agentvm.adapters.mcp.oauth import StoredOAuth
    from agentvm.agent.tools.sources import ToolSources
    from tests.mcp_servers.oauth_provider import DictRecords, protected_server

    async with local_sqlite_world(tmp_path) as world, protected_server() as (url, provider):
        rt = world.rt
        records = DictRecords()
        rt.mcp_oauth = records
        assert rt.config is not None
        rt.config.settings = rt.config.settings.model_copy(update={"tool_allow_private_networks": True})
        rt.tools = ToolSources(
            mcp=SdkMcpConnector(connect_timeout_s=10),
            allow_private_networks=True,
            list_deadline_s=10,
            oauth=StoredOAuth("http://avm/v1/mcp/oauth/callback"),
        )
        async with world.http("tenant-a") as a, world.http("tenant-b") as b:
            started = await a.post("/v1/mcp/oauth/authorizations", json={"server_url": url})
            async with httpx.AsyncClient() as browser:
                approved = await browser.get(started.json()["authorization_url"])
            landing = urlsplit(approved.headers["location"])
            landed = await b.get(f"{landing.path}?{landing.query}")  # in B's browser, B's key and all
            assert landed.status_code == 200
            replayed = await b.get(f"{landing.path}?{landing.query}")
            assert replayed.status_code == 400 and "already used" in replayed.text
            assert {tenant for tenant, _, _ in records.rows.values()} == {"tenant-a"}
            params = {"server_url": url}
            assert (await b.get("/v1/mcp/oauth/connections", params=params)).json()["connected"] is False
            await b.delete("/v1/mcp/oauth/connections", params=params)
            assert (await a.get("/v1/mcp/oauth/connections", params=params)).json()["connected"] is True

        servers = {"crm": {"type": "http", "url": url, "auth": "oauth"}}
        for tenant, container in (("tenant-b", "user-bob"), ("tenant-a", "user-ann")):
            c = await world.connect(world.tokens[tenant])
            await c.request("container_create", containerId=container)
            config = {"mcpServers": servers}
            img = (await c.request("image_create", containerId=container, config=config))["record"]
            world.model.add(Calls(("add", {"a": 1, "b": 2})), "Done.")
            await c.request("message_send", imageId=img["imageId"], content="add them")
            await world.run_turns()
            failures = [f["data"] for f in c.session_events() if f["type"] == "mcp_server_failed"]
            [result] = world.model.requests[-1].messages[-1].tool_results
            if tenant == "tenant-b":  # no tool of A's server for B: the call is of an unknown tool
                assert "needs OAuth authorization" in failures[0]["reason"] and result.is_error
            else:
                assert failures == [] and result.content == "3"
        assert provider.issued == 1
