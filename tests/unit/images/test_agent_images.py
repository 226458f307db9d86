"""Images built from agent resources (``agentvm.resources.build``): pinned to the versions resolved
at build time, moved only by an explicit rebuild (recorded), with the definition's prompt, tools and
knowledge search tool reaching the model; bad definitions refused with stable codes."""

from __future__ import annotations

from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.errors import ResourceInUse
from tests.harness import Harness

TENANT = "tenant-a"


@pytest.fixture
async def h(tmp_path):
    h = Harness(tmp_path)
    h.rt.tools = ToolSources()  # built-ins run anywhere
    yield h
    h.queue.close()
    h.store.close()


async def publish(h: Harness, kind: str, name: str, spec: dict[str, Any], tenant: str = TENANT, **kw: Any):
    assert h.rt.resources is not None
    return await h.rt.resources.publish(tenant, kind, name, spec=spec, **kw)


async def persona(h: Harness, text: str):
    return await publish(
        h,
        "prompt",
        "persona",
        {"template": f"You are {{{{who}}}}. {text}", "variables": {"who": {"type": "string"}}},
    )


async def helper_agent(h: Harness, **extra: Any):
    await publish(h, "tool", "calc", {"tool": {"type": "builtin", "name": "calculator"}})
    spec = {
        "prompt": {"uri": "resource://prompts/persona", "arguments": {"who": "Ada"}},
        "tools": ["resource://tools/calc@1"],
        "model": "scripted/test-1",
        "maxSteps": 4,
        **extra,
    }
    return await publish(h, "agent", "helper", spec, description="A helpful agent")


async def turn(h: Harness, client, image: dict[str, Any], text: str = "hi"):
    h.model.add("ok")
    await client.request("message_send", imageId=image["imageId"], content=text)
    await h.run_turns()
    return h.model.requests[-1]


async def test_an_image_keeps_the_prompt_it_was_built_with_until_it_is_rebuilt(h):
    await persona(h, "Version one.")
    await helper_agent(h)
    client = await h.client(TENANT)
    built = await client.request(
        "image_create", containerId="alice", config={"agent": "resource://agents/helper@1"}
    )
    image = built["record"]
    assert image["name"] == "helper" and image["description"] == "A helpful agent"
    assert image["build"]["pins"] == [
        "resource://agents/helper@1",
        "resource://prompts/persona@1",
        "resource://tools/calc@1",
    ]
    first = await turn(h, client, image)
    assert first.system == "You are Ada. Version one."
    assert [t.name for t in first.tools] == ["calculator"]

    await persona(h, "Version two.")  # the prompt moves on; the image does not
    assert (await turn(h, client, image)).system == "You are Ada. Version one."
    fresh = (
        await client.request(
            "image_create", containerId="bob", config={"agent": "resource://agents/helper@1"}
        )
    )["record"]
    assert (await turn(h, client, fresh)).system == "You are Ada. Version two."

    rebuilt = (await client.request("image_update", imageId=image["imageId"], updates={"rebuild": True}))[
        "record"
    ]
    assert "resource://prompts/persona@2" in rebuilt["build"]["pins"]
    assert [b["pins"][1] for b in rebuilt["build"]["history"]] == [
        "resource://prompts/persona@1",
        "resource://prompts/persona@2",
    ]
    assert (await turn(h, client, image)).system == "You are Ada. Version two."
    got = (await client.request("image_get", imageId=image["imageId"]))["record"]
    assert got["build"]["resolved"] == "resource://agents/helper@1"
    assert got["build"]["pins"] == rebuilt["build"]["pins"]


async def test_a_version_an_image_is_pinned_to_cannot_be_deleted_until_the_image_moves(h):
    await persona(h, "One.")
    await helper_agent(h)
    client = await h.client(TENANT)
    image = (
        await client.request("image_create", containerId="a", config={"agent": "resource://agents/helper"})
    )["record"]
    await persona(h, "Two.")
    with pytest.raises(ResourceInUse) as refused:
        await h.rt.resources.delete(TENANT, "prompt", "persona", "1")
    assert f"image:{image['imageId']}" in refused.value.dependents

    await client.request("image_update", imageId=image["imageId"], updates={"rebuild": True})
    assert await h.rt.resources.delete(TENANT, "prompt", "persona", "1") == ["resource://prompts/persona@1"]

    await client.request("image_delete", imageId=image["imageId"])
    await h.rt.resources.delete(TENANT, "agent", "helper")  # nothing holds the agent any more
    assert await h.rt.resources.delete(TENANT, "prompt", "persona") == ["resource://prompts/persona@2"]


DOCS = [
    {
        "id": "billing",
        "title": "Billing",
        "text": "Invoices are sent on the first day of each month.\n\n"
        "Refunds are paid back to the original card within 5 business days of approval.",
    },
    {
        "id": "security",
        "title": "Security",
        "text": "Passwords are hashed with Argon2.\n\nTwo-factor authentication is available for every plan.",
    },
    {
        "id": "shipping",
        "title": "Shipping",
        "text": "Orders ship from Rotterdam. Express delivery takes two days inside the EU.",
    },
]


async def test_an_agent_answers_from_the_best_chunk_of_its_knowledge(h):
    await publish(h, "knowledge", "handbook", {"documents": DOCS}, description="the company handbook")
    await publish(
        h,
        "agent",
        "support",
        {"systemPrompt": "Answer from the handbook.", "knowledge": ["resource://knowledge/handbook@1"]},
    )
    client = await h.client(TENANT)
    image = (
        await client.request("image_create", containerId="a", config={"agent": "resource://agents/support"})
    )["record"]
    h.model.add(Calls(("search_handbook", {"query": "refunds to my card", "limit": 2})), "Within 5 days.")
    await client.request("message_send", imageId=image["imageId"], content="How long do refunds take?")
    await h.run_turns()

    first, second = h.model.requests[-2:]
    assert [t.name for t in first.tools] == ["search_handbook"]
    (result,) = second.messages[-1].tool_results
    assert result.content.startswith("[1] Billing [billing]\n") and not result.is_error
    assert "within 5 business days" in result.content.split("[2]")[0]
    history = (await client.request("image_messages", imageId=image["imageId"]))["messages"]
    assert history[-1]["content"][0]["text"] == "Within 5 days."


async def test_knowledge_ranking_prefers_the_chunk_with_the_rarer_matching_terms(h):
    await publish(h, "knowledge", "handbook", {"documents": DOCS})
    from agentvm.resources.uri import parse

    version, hits = await h.rt.resources.search(
        TENANT, parse("resource://knowledge/handbook"), "two-factor plans"
    )
    assert version.index is not None and version.index["chunks"] >= 3  # in the knowledge index
    assert hits[0].documentId == "security" and "Two-factor" in hits[0].text
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
    _, express = await h.rt.resources.search(
        TENANT, parse("resource://knowledge/handbook"), "express delivery"
    )
    assert [x.documentId for x in express] == ["shipping"]
    _, none = await h.rt.resources.search(TENANT, parse("resource://knowledge/handbook"), "zebra")
    assert none == []


@pytest.mark.parametrize(
    ("config", "code", "named"),
    [
        ({"agent": "agents/helper"}, "invalid_uri", "config.agent"),
        ({"agent": "resource://prompts/persona"}, "invalid_uri", "config.agent"),
        ({"agent": "resource://agents/nobody"}, "not_found", "resource://agents/nobody"),
        ({"agent": "resource://agents/helper", "systemPrompt": "x"}, "bad_request", "config.systemPrompt"),
        ({"agent": "resource://agents/helper@9"}, "not_found", "helper@9"),
        ({"rebuild": True}, "bad_request", "config.rebuild"),
    ],
)
async def test_bad_definitions_are_refused_and_nothing_is_created(h, config, code, named):
    await persona(h, "One.")
    await helper_agent(h)
    client = await h.client(TENANT)
    answer = await client.request("image_create", containerId="a", config=config)
    assert answer["code"] == code and named in answer["error"]
    assert await h.store.list_images(TENANT) == []


async def test_a_built_image_takes_no_inline_prompt_and_an_inline_image_cannot_rebuild(h):
    await persona(h, "One.")
    await helper_agent(h)
    client = await h.client(TENANT)
    built = (
        await client.request("image_create", containerId="a", config={"agent": "resource://agents/helper"})
    )["record"]
    refused = await client.request(
        "image_update", imageId=built["imageId"], updates={"systemPrompt": "other"}
    )
    assert refused["code"] == "bad_request" and "updates.systemPrompt" in refused["error"]
    renamed = await client.request("image_update", imageId=built["imageId"], updates={"name": "Renamed"})
    assert renamed["record"]["name"] == "Renamed" and renamed["record"]["systemPrompt"] == "You are Ada. One."

    inline = (await client.request("image_create", containerId="a", config={"systemPrompt": "hi"}))["record"]
    no = await client.request("image_update", imageId=inline["imageId"], updates={"rebuild": True})
    assert no["code"] == "bad_request" and "updates.rebuild" in no["error"]
    moved = await client.request(
        "image_update", imageId=inline["imageId"], updates={"agent": "resource://agents/helper@1"}
    )
    assert moved["record"]["systemPrompt"] == "You are Ada. One." and "build" in moved["record"]


async def test_another_tenants_agent_cannot_be_built_but_a_platform_one_can(h):
    await persona(h, "One.")
    await helper_agent(h)
    other = await h.client("tenant-b")
    answer = await other.request(
        "image_create", containerId="b", config={"agent": "resource://agents/helper"}
    )
    assert answer["code"] == "not_found"
    await publish(h, "agent", "concierge", {"systemPrompt": "Platform concierge."}, tenant="platform")
    image = (
        await other.request("image_create", containerId="b", config={"agent": "resource://agents/concierge"})
    )["record"]
    assert image["systemPrompt"] == "Platform concierge."
