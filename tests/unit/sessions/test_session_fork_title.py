"""Forks (``POST /v1/sessions/{id}/fork``) and titles (``PUT /v1/sessions/{id}/title``, and titles
generated after the first turn when a tenant opts in), on both hosts: the local runtime on SQLite
and the AWS runtime on moto. What the scripted model received is the proof of what a turn saw."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.errors import ProviderUnavailable
from agentvm.records import SessionSummary
from agentvm.turns.title import TITLE_SYSTEM
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES

if TYPE_CHECKING:
    from tests.unit.security.test_tenant_attacks import World


@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        from agentvm.agent.tools.sources import ToolSources

        w.rt.tools = w.rt.tools or ToolSources()
        yield w


async def chat(
    world: World, turns: list[tuple[Any, ...]], config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An image of tenant A and the turns ``(question, *scripted replies)`` run on it."""
    a = await world.connect(world.tokens["tenant-a"])
    image = (
        await a.request(
            "image_create", containerId="user-alice", config={"name": "Trip"} if config is None else config
        )
    )["record"]
    for question, *replies in turns:
        world.model.add(*replies)
        await a.request("message_send", imageId=image["imageId"], content=question)
        await world.run_turns()
    return image


async def history(world: World, image_id: str) -> list[dict[str, Any]]:
    a = await world.connect(world.tokens["tenant-a"])
    return (await a.request("image_messages", imageId=image_id))["messages"]


async def say(world: World, image_id: str, text: str, *replies: Any) -> None:
    a = await world.connect(world.tokens["tenant-a"])
    world.model.add(*replies)
    await a.request("message_send", imageId=image_id, content=text)
    await world.run_turns()


def seen(world: World) -> list[tuple[str, str]]:
    """What the model received in its last call: (role, text) of every turn."""
    return [(t.role, t.text) for t in world.model.requests[-1].messages]


TRIP = [
    ("Where should I go in May?", "Lisbon."),
    ("What should I eat there?", "Bacalhau."),
    ("And drink?", "Vinho verde."),
]


# -- forks ---------------------------------------------------------------------------------------------
async def test_a_turn_on_a_fork_sees_only_the_prefix(world):
    image = await chat(world, TRIP)
    said = await history(world, image["imageId"])
    async with world.http("tenant-a") as http:
        r = await http.post(f"/v1/sessions/{image['sessionId']}/fork", json={"messageId": said[3]["id"]})
    assert r.status_code == 201, r.text
    forked = r.json()
    fork = forked["record"]
    assert forked["messages"] == 4 and forked["forkedFrom"] == {
        "sessionId": image["sessionId"],
        "messageId": said[3]["id"],
        "seq": 4,
    }
    assert (fork["containerId"], fork["name"]) == ("user-alice", "Trip")
    assert fork["imageId"] != image["imageId"] and fork["sessionId"] != image["sessionId"]

    await say(world, fork["imageId"], "Something else to drink?", "Ginjinha.")
    assert seen(world) == [
        ("user", "Where should I go in May?"),
        ("assistant", "Lisbon."),
        ("user", "What should I eat there?"),
        ("assistant", "Bacalhau."),
        ("user", "Something else to drink?"),
    ]
    copied = await history(world, fork["imageId"])
    assert [m["content"] for m in copied[:4]] == [m["content"] for m in said[:4]]
    assert not {m["id"] for m in copied} & {m["id"] for m in said}
    assert await history(world, image["imageId"]) == said  # the source is untouched

    await say(world, image["imageId"], "And dessert?", "Pastel de nata.")
    assert ("assistant", "Vinho verde.") in seen(world)  # the source goes on from its own history
    assert ("user", "Something else to drink?") not in seen(world)


async def test_a_fork_inside_a_tool_turn_keeps_the_call_without_its_result(world):
    tooled = {"name": "Calc", "tools": [{"type": "builtin", "name": "calculator"}]}
    image = await chat(world, [("What is 6*7?", Calls(("calculator", {"expression": "6*7"})), "42.")], tooled)
    said = await history(world, image["imageId"])
    call = next(m for m in said if m["subtype"] == "tool-call")
    async with world.http("tenant-a") as http:
        fork = (
            await http.post(f"/v1/sessions/{image['sessionId']}/fork", json={"messageId": call["id"]})
        ).json()
    await say(world, fork["record"]["imageId"], "Try again?", "Sure: 42.")
    [*_, asked, results, again] = world.model.requests[-1].messages
    assert asked.tool_calls[0].name == "calculator" and results.tool_results[0].is_error
    assert "no result was recorded" in results.tool_results[0].content
    assert again.text == "Try again?"


async def test_fork_refuses_unknown_messages_and_sessions_with_stable_codes(world):
    image = await chat(world, TRIP[:1])
    other = await chat(world, TRIP[1:2])
    elsewhere = (await history(world, other["imageId"]))[0]["id"]
    async with world.http("tenant-a") as http:
        for session, message, status, code in [
            (image["sessionId"], "msg_missing", 404, "message_not_found"),
            (image["sessionId"], elsewhere, 404, "message_not_found"),  # a message of another session
            ("sess_missing", elsewhere, 404, "not_found"),
        ]:
            r = await http.post(f"/v1/sessions/{session}/fork", json={"messageId": message})
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
        r = await http.post(f"/v1/sessions/{image['sessionId']}/fork", json={"messageId": 7})
        assert (r.status_code, r.json()["error"]["code"]) == (400, "bad_request")
    a = await world.connect(world.tokens["tenant-a"])
    assert len((await a.request("image_list", containerId="user-alice"))["records"]) == 2


async def test_a_fork_with_a_request_id_is_made_once_and_without_one_each_time(world):
    image = await chat(world, TRIP[:1])
    first_id = (await history(world, image["imageId"]))[0]["id"]
    async with world.http("tenant-a") as http:
        url = f"/v1/sessions/{image['sessionId']}/fork"
        keyed = [
            await http.post(url, json={"messageId": first_id, "requestId": "r-1", "name": "Again"})
            for _ in "ab"
        ]
        plain = [await http.post(url, json={"messageId": first_id}) for _ in "ab"]
    assert [r.status_code for r in keyed] == [201, 200]
    assert (
        keyed[0].json()["record"] == keyed[1].json()["record"]
        and keyed[0].json()["record"]["name"] == "Again"
    )
    assert [r.status_code for r in plain] == [201, 201]
    assert plain[0].json()["record"]["imageId"] != plain[1].json()["record"]["imageId"]


async def test_a_fork_keeps_the_summary_only_when_it_covers_no_message_past_the_fork(world):
    image = await chat(world, TRIP)
    said = await history(world, image["imageId"])
    await world.rt.store.put_summary(
        SessionSummary(sessionId=image["sessionId"], upToSeq=2, text="They chose Lisbon.", model="x/y")
    )
    async with world.http("tenant-a") as http:
        url = f"/v1/sessions/{image['sessionId']}/fork"
        late = (await http.post(url, json={"messageId": said[3]["id"]})).json()["record"]
        early = (await http.post(url, json={"messageId": said[0]["id"]})).json()["record"]
    assert (await world.rt.store.get_summary(late["sessionId"])).text == "They chose Lisbon."
    assert await world.rt.store.get_summary(early["sessionId"]) is None


async def test_a_fork_of_a_built_image_holds_its_pinned_versions(world):
    async with world.http("tenant-a") as http:
        await http.post(
            "/v1/resources", json={"kind": "prompt", "name": "tone", "spec": {"template": "Be calm."}}
        )
        agent = {"kind": "agent", "name": "calm", "spec": {"prompt": {"uri": "resource://prompts/tone@1"}}}
        await http.post("/v1/resources", json=agent)
    image = await chat(world, TRIP[:1], {"agent": "resource://agents/calm"})
    first_id = (await history(world, image["imageId"]))[0]["id"]
    async with world.http("tenant-a") as http:
        fork = (
            await http.post(f"/v1/sessions/{image['sessionId']}/fork", json={"messageId": first_id})
        ).json()
        assert fork["record"]["build"]["pins"] == image["build"]["pins"]
        a = await world.connect(world.tokens["tenant-a"])
        await a.request("image_delete", imageId=image["imageId"])
        held = await http.delete("/v1/resources/prompts/tone@1")
    assert held.status_code == 409 and held.json()["error"]["code"] == "resource_in_use"


# -- titles ---------------------------------------------------------------------------------------------
async def test_a_title_is_set_explicitly_and_shown_as_the_image_name(world):
    image = await chat(world, TRIP[:1])
    async with world.http("tenant-a") as http:
        url = f"/v1/sessions/{image['sessionId']}/title"
        r = await http.put(url, json={"title": "  Lisbon   in May "})
        assert r.status_code == 200 and r.json()["record"]["name"] == "Lisbon in May"
        for bad in ({"title": "   "}, {"title": "x" * 201}, {"title": 3}, {}):
            refused = await http.put(url, json=bad)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bad_request"), bad
        missing = await http.put("/v1/sessions/sess_missing/title", json={"title": "x"})
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    a = await world.connect(world.tokens["tenant-a"])
    [listed] = (await a.request("image_list", containerId="user-alice"))["records"]
    assert listed["name"] == "Lisbon in May"


async def opt_in(world: World, **values: Any) -> None:
    async with world.http("tenant-a") as http:
        r = await http.put("/v1/config", json={"values": {"sessions.autoTitle": True, **values}})
        assert r.status_code == 200, r.text


async def test_an_opted_in_tenant_gets_a_title_after_the_first_turn_billed_as_usage(world):
    await opt_in(world, **{"sessions.titleModel": "scripted/cheap-1"})
    async with world.http("tenant-a") as http:  # a budget: its counters get the title's tokens too
        assert (await http.put("/v1/budgets/tenant", json={"monthly_tokens": 10**6})).status_code == 200
    image = await chat(
        world, [("Where should I go in May?", "Lisbon is lovely in May.", '"Lisbon in May."')], {}
    )
    titling = world.model.requests[-1]
    assert (titling.system, titling.model, titling.max_tokens) == (TITLE_SYSTEM, "cheap-1", 24)
    assert "Where should I go in May?" in titling.messages[0].text
    assert "Lisbon is lovely in May." in titling.messages[0].text
    a = await world.connect(world.tokens["tenant-a"])
    assert (await a.request("image_get", imageId=image["imageId"]))["record"]["name"] == "Lisbon in May"

    async with world.http("tenant-a") as http:
        usage = (await http.get("/v1/usage")).json()["records"]
        budget = (await http.get("/v1/budgets/tenant")).json()["usage"]
    kinds = [(u["kind"], u["model"]) for u in usage]
    assert kinds == [("turn", "scripted/test-1"), ("title", "scripted/cheap-1")]
    title_tokens = sum(u["inputTokens"] + u["outputTokens"] for u in usage if u["kind"] == "title")
    assert title_tokens > 0 and budget["day"] == sum(u["inputTokens"] + u["outputTokens"] for u in usage)

    calls = len(world.model.requests)
    await say(world, image["imageId"], "And in June?", "Also fine.")
    assert len(world.model.requests) == calls + 1  # titled once: the next turn makes no titling call


@pytest.mark.parametrize(
    ("config", "titled_by"),
    [
        ({"model": "anthropic/claude-sonnet-4-6"}, "anthropic/claude-haiku-5-5"),  # the cheap sibling
        ({"model": "anthropic/claude-sonnet-4-6", "sideModel": ""}, "anthropic/claude-sonnet-4-6"),
        ({"model": "anthropic/claude-opus-4-6", "sideModel": "scripted/side-1"}, "scripted/side-1"),
    ],
)
async def test_titles_run_on_the_images_side_model_and_usage_names_it(world, config, titled_by):
    await opt_in(world)  # no sessions.titleModel: the image's side model names it
    await chat(world, [("Where should I go in May?", "Lisbon is lovely in May.", "Lisbon in May")], config)
    turn, titling = world.model.requests[-2:]
    assert (turn.model, titling.system) == (config["model"].partition("/")[2], TITLE_SYSTEM)
    assert titling.model == titled_by.partition("/")[2]
    async with world.http("tenant-a") as http:
        usage = (await http.get("/v1/usage")).json()["records"]
    assert [(u["kind"], u["model"]) for u in usage] == [("turn", config["model"]), ("title", titled_by)]


async def test_an_images_side_model_is_stored_and_updated(world):
    a = await world.connect(world.tokens["tenant-a"])
    config = {"model": "anthropic/claude-sonnet-4-6", "sideModel": "scripted/side-1"}
    image = (await a.request("image_create", containerId="user-alice", config=config))["record"]
    stored = await world.rt.store.get_image("tenant-a", image["imageId"])
    assert stored is not None and stored.sideModel == "scripted/side-1"
    await a.request("image_update", imageId=image["imageId"], updates={"sideModel": ""})
    stored = await world.rt.store.get_image("tenant-a", image["imageId"])
    assert stored is not None and stored.sideModel == ""


async def test_a_fast_model_answers_short_first_messages_and_usage_shows_the_routing(world):
    config = {"model": "scripted/big-1", "fastModel": "scripted/fast-1", "fastMaxChars": 20}
    image = await chat(world, [("Hi!", "Hello.")], config)
    assert world.model.requests[-1].model == "fast-1"
    await say(world, image["imageId"], "Plan a week in Lisbon for two, with a budget.", "Here is a plan.")
    assert world.model.requests[-1].model == "big-1"  # not short: the image's model
    async with world.http("tenant-a") as http:
        usage = (await http.get("/v1/usage")).json()["records"]
    assert [(u["model"], u.get("routedBy")) for u in usage] == [
        ("scripted/fast-1", "short-first-message"),
        ("scripted/big-1", None),
    ]


async def test_without_a_fast_model_every_turn_uses_the_images_model(world):
    image = await chat(world, [("Hi!", "Hello.")], {"model": "scripted/big-1"})
    await say(world, image["imageId"], "Ok", "Fine.")
    assert {r.model for r in world.model.requests} == {"big-1"}


async def test_no_title_is_generated_without_opting_in_or_over_a_given_name(world):
    plain = await chat(world, TRIP[:1], {})
    assert len(world.model.requests) == 1
    await opt_in(world)
    named = await chat(world, TRIP[:1], {"name": "My trip"})
    assert len(world.model.requests) == 2
    a = await world.connect(world.tokens["tenant-a"])
    assert (await a.request("image_get", imageId=plain["imageId"]))["record"]["name"] == "New Conversation"
    assert (await a.request("image_get", imageId=named["imageId"]))["record"]["name"] == "My trip"


async def test_a_failed_title_never_fails_the_turn_and_the_next_turn_tries_again(world):
    await opt_in(world)
    image = await chat(world, [("Hello?", "Hi.", ProviderUnavailable("overloaded"))], {})
    said = await history(world, image["imageId"])
    assert [m["subtype"] for m in said] == ["user", "assistant"]  # the turn completed
    a = await world.connect(world.tokens["tenant-a"])
    assert (await a.request("image_get", imageId=image["imageId"]))["record"]["name"] == "New Conversation"
    await say(world, image["imageId"], "Still there?", "Yes.", "Greetings")
    assert (await a.request("image_get", imageId=image["imageId"]))["record"]["name"] == "Greetings"
