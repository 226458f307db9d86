"""A tour of the HTTP API: every route called as a client would, with the data the OpenAPI
examples show, each answer checked against what ``/openapi.json`` documents for it (a documented
success status, the top-level keys of one of its examples, and its schema).

``tour()`` is a generator of steps (``Http``, ``Ws``, ``Turn``) that receives each step's answer,
so one script runs on both hosts: in-process on the local wiring
(``tests/unit/api/test_openapi_truth.py``) and on AWS through the real Lambda handlers on moto
(``tests/functions/test_api_tour_aws.py``). Before it starts, the host has a workspace file
``src/hello.py`` (``print(6*7)``) for tenant ``acme``'s container ``user-alice``. A new route
joins the tour (one ``yield Http(...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

if TYPE_CHECKING:
    from collections.abc import Generator

TENANT, CONTAINER = "acme", "user-alice"
WORKSPACE_FILE = ("src/hello.py", b"print(6*7)\n")


@dataclass(frozen=True)
class Http:
    """A request; ``route`` is its OpenAPI operation's path, ``url`` (default: the route) what is
    sent. ``caller``: ``admin`` (an admin key of ``acme``) or ``platform`` (a platform admin)."""

    method: str
    route: str
    url: str | None = None
    body: Any = None
    caller: str = "admin"


@dataclass(frozen=True)
class Ws:
    """An AgentX request of ``acme``'s admin over the WebSocket; the answer is its ``data``."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """The scripted model will answer ``reply``; run the queued turns."""

    reply: str


Step = Http | Ws | Turn


def next_step(steps: Generator[Step, Any, None], answer: Any) -> Step | None:
    """The tour's next step, given the last one's answer; ``None`` at the end."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None


# -- what the document says --------------------------------------------------------------------
def examples_of(media: dict[str, Any]) -> list[Any]:
    """The examples of a media type object (``example``, or the values of ``examples``)."""
    if "example" in media:
        return [media["example"]]
    return [e["value"] for e in media.get("examples", {}).values() if "value" in e]


def successes(op: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(s): r for s, r in op["responses"].items() if s.isdigit() and 200 <= int(s) < 300}


def fits(schema: dict[str, Any], part: dict[str, Any], instance: Any) -> None:
    """Validate against a schema of the OpenAPI document (its ``$ref`` resolved in the document)."""
    jsonschema.Draft202012Validator({**part, "components": schema["components"]}).validate(instance)


def top_keys(value: Any) -> frozenset[str] | None:
    """The keys of an answer (of its first item, for a list)."""
    if isinstance(value, list):
        return top_keys(value[0]) if value else None
    return frozenset(value) if isinstance(value, dict) else None


def check_answer(schema: dict[str, Any], step: Http, status: int, body: Any) -> None:
    """The answer is documented: a success status of the operation, the top-level keys of one of
    its examples, and it validates against the documented schema."""
    op = schema["paths"][step.route][step.method]
    documented = successes(op)
    assert status in documented, (step, status, body)
    media = documented[status]["content"]["application/json"]
    keys = {top_keys(e) for e in examples_of(media)}
    assert top_keys(body) in keys, (step.method, step.route, sorted(top_keys(body) or ()), keys)
    fits(schema, media["schema"], body)


# -- the tour ------------------------------------------------------------------------------------
GREETING = {"template": "You help {{product}} users. Be brief.", "variables": {"product": {"type": "string"}}}
HANDBOOK = {
    "documents": [
        {"id": "refunds", "title": "Refunds", "text": "Refunds are paid within 14 days of a return."},
        {"id": "shipping", "title": "Shipping", "text": "Orders ship in 2 days."},
    ]
}
AGENT = {
    "prompt": {"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}},
    "tools": ["resource://tools/calc@1"],
    "knowledge": ["resource://knowledge/handbook@1"],
    "model": "scripted/test-1",
}
LOCATOR = "deepractice.ai/prompts/assistant.prompt@1.0.0"
UPLOAD = {
    "locator": LOCATOR,
    "content": "You are a helpful assistant for {{product}}.",
    "description": "The assistant's system prompt",
    "tags": ["stable"],
}


def tour() -> Generator[Step, Any, None]:
    yield Http("get", "/health")
    made = yield Http(
        "post", "/v1/auth/keys", body={"scopes": ["client"], "name": "web app", "rateLimitPerMinute": 60}
    )
    yield Http("get", "/v1/auth/keys")
    yield Http("delete", "/v1/auth/keys/{key_id}", f"/v1/auth/keys/{made['key']['keyId']}")
    yield Http("put", "/v1/budgets/tenant", body={"dailyTokens": 1000000, "monthlyTokens": 20000000})
    yield Http("get", "/v1/budgets/tenant")
    budget = f"/v1/budgets/containers/{CONTAINER}"
    yield Http("put", "/v1/budgets/containers/{container_id}", budget, body={"dailyTokens": 50000})
    yield Http("get", "/v1/budgets/containers/{container_id}", budget)
    yield Ws("container_create", {"containerId": CONTAINER})
    workspace = f"/v1/containers/{CONTAINER}/workspace"
    listing = yield Http("get", "/v1/containers/{container_id}/workspace", f"{workspace}?path=src")
    assert listing["entries"] == [{"path": "src/hello.py", "kind": "file", "size": 11}]
    read = yield Http(
        "get", "/v1/containers/{container_id}/workspace/file", f"{workspace}/file?path=src/hello.py"
    )
    assert read["content"] == "print(6*7)\n"

    one, greeting = "/v1/resources/{plural}/{name}", "/v1/resources/prompts/support/greeting"
    yield Http(
        "post",
        "/v1/resources",
        body={"kind": "prompt", "name": "support/greeting", "spec": GREETING, "tags": ["stable"]},
    )
    kinder = {**GREETING, "template": "You help {{product}} users. Be kind."}
    yield Http("put", one, greeting, body={"spec": kinder, "description": "Kinder"})
    yield Http(
        "post", "/v1/resources/tags", body={"uri": "resource://prompts/support/greeting@2", "tag": "stable"}
    )
    yield Http("get", "/v1/resources", "/v1/resources?kind=prompt")
    yield Http("get", one, greeting)
    yield Http("get", one, f"{greeting}@stable")
    rendered = yield Http(
        "post",
        "/v1/resources/render",
        body={"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}},
    )
    assert rendered["text"] == "You help Acme users. Be kind."
    yield Http("post", "/v1/resources", body={"kind": "knowledge", "name": "handbook", "spec": HANDBOOK})
    hits = yield Http(
        "post",
        "/v1/resources/search",
        body={"uri": "resource://knowledge/handbook@1", "query": "refund policy"},
    )
    assert hits["hits"][0]["documentId"] == "refunds"
    calc = {"tool": {"type": "builtin", "name": "calculator"}}
    yield Http("post", "/v1/resources", body={"kind": "tool", "name": "calc", "spec": calc})
    yield Http("post", "/v1/resources", body={"kind": "agent", "name": "support", "spec": AGENT})
    yield Http("get", "/v1/resources/resolve", "/v1/resources/resolve?uri=resource://agents/support@1")
    built = yield Ws(
        "image_create", {"containerId": CONTAINER, "config": {"agent": "resource://agents/support@1"}}
    )
    image = built["record"]
    yield Http(
        "post", "/v1/resources/tags", body={"uri": "resource://prompts/support/greeting@1", "tag": "stable"}
    )
    rebuilt = yield Http(
        "post", "/v1/images/{image_id}/rebuild", f"/v1/images/{image['imageId']}/rebuild", body={}
    )
    assert "resource://prompts/support/greeting@1" in rebuilt["record"]["build"]["pins"]
    yield Http("delete", one, f"{greeting}@2")

    yield Http("get", "/v1/registry/types")
    yield Http("post", "/v1/registry/publish", body=UPLOAD)
    later = "deepractice.ai/prompts/assistant.prompt@1.1.0"
    yield Http("post", "/v1/registry/link", body={**UPLOAD, "locator": later})
    yield Http("get", "/v1/registry/resource", f"/v1/registry/resource?locator={LOCATOR}")
    resolved = yield Http(
        "post", "/v1/registry/resolve", body={"locator": LOCATOR, "args": {"product": "Acme"}}
    )
    assert resolved["content"] == "You are a helpful assistant for Acme."
    yield Http("get", "/v1/registry/exists", f"/v1/registry/exists?locator={LOCATOR}")
    yield Http("get", "/v1/registry/search", "/v1/registry/search?query=assistant")
    yield Http("post", "/v1/registry/delete", body={"locator": later})

    values = {"llm.defaultModel": "scripted/test-1", "llm.maxOutputTokens": 2048}
    yield Http("put", "/v1/config", body={"values": values})
    yield Http("get", "/v1/config")
    yield Http("get", "/v1/config/{key}", "/v1/config/llm.defaultModel")
    yield Http("put", "/v1/config/{key}", "/v1/config/llm.maxOutputTokens", body={"value": 4096})
    yield Http("get", "/v1/config/audit")

    yield Ws("message_send", {"imageId": image["imageId"], "content": "hi"})
    yield Turn("Hello from Acme support.")
    usage = yield Http("get", "/v1/usage")
    assert usage["totals"]["turns"] == 1

    acme = {"name": "Acme Corp", "description": "Resells agents to its own customers", "tenantId": TENANT}
    yield Http("post", "/v1/tenants", body=acme, caller="platform")
    yield Http("get", "/v1/tenants", caller="platform")
    yield Http("get", "/v1/tenants/{tenant_id}", f"/v1/tenants/{TENANT}", caller="platform")
    yield Http(
        "patch", "/v1/tenants/{tenant_id}", f"/v1/tenants/{TENANT}", body={"name": "Acme"}, caller="platform"
    )
    globex = yield Http(
        "post", "/v1/tenants/create", body={"name": "Globex", "description": "d"}, caller="platform"
    )
    ref = {"tenantId": globex["tenantId"]}
    yield Http("post", "/v1/tenants/get", body=ref, caller="platform")
    yield Http("get", "/v1/tenants/list", caller="platform")
    yield Http("post", "/v1/tenants/update", body={**ref, "description": "e"}, caller="platform")
    yield Http("post", "/v1/tenants/delete", body=ref, caller="platform")
    initech = yield Http(
        "post", "/v1/tenants", body={"name": "Initech", "description": "d"}, caller="platform"
    )
    yield Http("delete", "/v1/tenants/{tenant_id}", f"/v1/tenants/{initech['tenantId']}", caller="platform")


__all__ = [
    "Http",
    "Step",
    "Turn",
    "Ws",
    "check_answer",
    "examples_of",
    "fits",
    "next_step",
    "successes",
    "top_keys",
    "tour",
]
