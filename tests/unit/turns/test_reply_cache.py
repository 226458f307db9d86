"""The reply cache of an image's common first questions (``turns/reply_cache.py``), through the
runtime: the scripted model's request count tells whether the model was called."""

from __future__ import annotations

from typing import Any

import pytest

from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.agent.context import TurnContext
from agentvm.messages import ImagePart, TextPart, UserMessage
from agentvm.ports import CachedReply, SeqMessage
from agentvm.records import ImageRecord, SessionSummary, TurnJob
from agentvm.security.storage_quota import StorageQuota
from agentvm.turns.reply_cache import first_question, normalise_question, reply_bytes
from tests.security_harness import ManualClock, secure
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES

CACHED = {"name": "Help desk", "systemPrompt": "You answer shop questions.", "replyCache": {"enabled": True}}


async def _image(client: Any, config: dict[str, Any], container: str = "user-alice") -> dict[str, Any]:
    image = (await client.request("image_create", containerId=container, config=config))["record"]
    await client.subscribe(image["sessionId"])
    return image


async def _ask(harness: Any, client: Any, image: dict[str, Any], text: str) -> None:
    await client.request("message_send", imageId=image["imageId"], content=text)
    await harness.run_turns()


def _reply_frames(client: Any, image: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in client.session_events() if f["context"]["imageId"] == image["imageId"]]


def _text(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"]["text"] for f in frames if f["type"] == "text_delta")


def test_questions_are_compared_normalised():
    assert normalise_question("  What are your\tOPENING   hours?? ") == "what are your opening hours"
    assert normalise_question("Ｗhat is ＡgentVM？！") == "what is agentvm"  # NFKC: full-width forms
    assert normalise_question("Straße…") == normalise_question("STRASSE")  # casefold; "…" is punctuation
    assert normalise_question("?!") == ""
    assert normalise_question("what is 2+2?") != normalise_question("what is 2-2?")


def test_only_a_sessions_first_text_question_qualifies():
    image = ImageRecord(
        tenantId="t",
        imageId="img",
        containerId="c",
        sessionId="s",
        name="A",
        replyCache={"enabled": True},
        createdAt=1,
        updatedAt=1,
    )
    job = TurnJob(
        turnId="turn",
        tenantId="t",
        containerId="c",
        imageId="img",
        sessionId="s",
        agentId="a",
        userMessageId="u",
        requestId="r",
        enqueuedAt=0,
    )
    ask = UserMessage(id="u", timestamp=1, content="Opening hours?")

    def context(seq: int, message: UserMessage = ask, summary: SessionSummary | None = None) -> TurnContext:
        return TurnContext(summary, (SeqMessage(seq, message),), 1)

    assert first_question(image, context(1), job) == "opening hours"
    assert first_question(image, context(7), job) is None  # a window of one hides the history
    summary = SessionSummary(sessionId="s", upToSeq=6, text="earlier", model="x/y")
    assert first_question(image, context(1, summary=summary), job) is None
    picture = ImagePart(data="https://example.com/a.png", mediaType="image/png")
    attached = ask.model_copy(update={"content": [TextPart(text="What is this?"), picture]})
    assert first_question(image, context(1, attached), job) is None
    assert (
        first_question(image.model_copy(update={"replyCache": {"enabled": False}}), context(1), job) is None
    )
    tooled = image.model_copy(update={"tools": [{"type": "builtin", "name": "calculator"}]})
    assert first_question(tooled, context(1), job) is None
    assert first_question(image.model_copy(update={"mcpServers": {"x": {}}}), context(1), job) is None


async def test_a_second_sessions_same_first_question_is_answered_from_the_cache(harness):
    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    harness.model.add("We open at nine and close at five.")
    await _ask(harness, client, first, "What are your opening hours?")
    await _ask(harness, client, second, "  what are your OPENING hours ")
    assert len(harness.model.requests) == 1  # the second turn never called the model
    frames = _reply_frames(client, second)
    types = [f["type"] for f in frames]
    assert types[:4] == ["message_start", "conversation_start", "text_delta", "conversation_responding"]
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert _text(frames) == "We open at nine and close at five."
    assert frames[-1]["data"] == {"reason": "completed"}
    stored = await harness.store.list_messages(second["sessionId"])
    assert [m.subtype for m in stored] == ["user", "assistant"]
    assert stored[-1].content[0].text == "We open at nine and close at five."
    assert frames[-2]["data"]["id"] == stored[-1].id


async def test_a_hit_is_billed_as_a_free_reply_cache_hit_with_the_tokens_it_saved(harness):
    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    harness.model.add("We open at nine and close at five.")
    await _ask(harness, client, first, "Opening hours?")
    await _ask(harness, client, second, "opening hours")
    usage = {u.sessionId: u for u in await harness.store.list_usage("tenant-a")}
    paid, hit = usage[first["sessionId"]], usage[second["sessionId"]]
    assert (paid.kind, hit.kind) == ("turn", "reply_cache")
    assert paid.outputTokens == 8 and paid.inputTokens > 0
    assert (hit.inputTokens, hit.outputTokens) == (0, 0)
    assert (hit.savedInputTokens, hit.savedOutputTokens) == (paid.inputTokens, paid.outputTokens)
    assert hit.model == paid.model and hit.status == "completed"
    reply = (await harness.store.list_messages(second["sessionId"]))[-1]
    assert reply.usage.totalTokens == 0


async def test_a_question_with_history_is_never_answered_from_the_cache(harness):
    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    harness.model.add("Hello!", "We open at nine.", "Hello again!", "Nine to five.")
    await _ask(harness, client, first, "Hi")
    await _ask(harness, client, first, "Opening hours?")  # has history: neither read nor stored
    await _ask(harness, client, second, "Hi")  # a first question: a hit
    assert len(harness.model.requests) == 2
    await _ask(harness, client, second, "Opening hours?")  # has history: the model answers
    assert len(harness.model.requests) == 3
    assert _text(_reply_frames(client, second)).endswith("Hello again!")


async def test_an_image_with_tools_never_caches(harness):
    client = await harness.client()
    tooled = {
        **CACHED,
        "tools": [{"type": "http", "name": "lookup", "description": "d", "url": "https://shop.example/api"}],
    }
    first, second = await _image(client, tooled), await _image(client, tooled, "user-bob")
    harness.model.add("Nine to five.", "Nine to five.")
    await _ask(harness, client, first, "Opening hours?")
    await _ask(harness, client, second, "Opening hours?")
    assert len(harness.model.requests) == 2
    assert all(u.kind == "turn" for u in await harness.store.list_usage("tenant-a"))


async def test_the_cache_is_off_unless_the_image_opts_in(harness):
    client = await harness.client()
    plain = {"name": "Help desk", "systemPrompt": "You answer shop questions."}
    first, second = await _image(client, plain), await _image(client, plain, "user-bob")
    harness.model.add("Nine to five.", "Nine to five.")
    await _ask(harness, client, first, "Opening hours?")
    await _ask(harness, client, second, "Opening hours?")
    assert len(harness.model.requests) == 2


async def test_an_image_update_invalidates_its_cached_replies(harness):
    client = await harness.client()
    first = await _image(client, CACHED)
    harness.model.add("Nine to five.", "Ten to six, since the update.")
    await _ask(harness, client, first, "Opening hours?")
    updates = {"systemPrompt": "You answer shop questions. We now open at ten."}
    await client.request("image_update", imageId=first["imageId"], updates=updates)
    second = await _image(client, {**CACHED, **updates}, "user-bob")
    await _ask(harness, client, second, "Opening hours?")  # the updated config: a miss
    assert len(harness.model.requests) == 2
    assert _text(_reply_frames(client, second)) == "Ten to six, since the update."
    third = await _image(client, {**CACHED, **updates}, "user-carol")
    await _ask(harness, client, third, "opening hours")  # and the new reply is what it caches
    assert len(harness.model.requests) == 2
    assert _text(_reply_frames(client, third)) == "Ten to six, since the update."


async def test_another_tenant_never_gets_a_tenants_cached_reply(harness):
    alice, mallory = await harness.client(), await harness.client("tenant-b")
    mine, theirs = await _image(alice, CACHED), await _image(mallory, CACHED)
    harness.model.add("Tenant A's secret answer.", "Tenant B's own answer.")
    await _ask(harness, alice, mine, "Opening hours?")
    await _ask(harness, mallory, theirs, "Opening hours?")
    assert len(harness.model.requests) == 2
    assert _text(_reply_frames(mallory, theirs)) == "Tenant B's own answer."
    assert [u.kind for u in await harness.store.list_usage("tenant-b")] == ["turn"]


async def test_a_failed_or_cut_reply_is_not_cached(harness):
    from agentvm.adapters.llm.scripted import Fail
    from agentvm.errors import ProviderUnavailable

    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    harness.model.add(Fail(ProviderUnavailable("down"), after_words="We open"), "Nine to five.")
    await _ask(harness, client, first, "Opening hours?")
    await _ask(harness, client, second, "Opening hours?")
    assert len(harness.model.requests) == 2  # the failed turn was not cached: the model answers
    assert _text(_reply_frames(client, second)) == "Nine to five."


async def test_an_image_update_turns_the_cache_on_and_off(harness):
    client = await harness.client()
    plain = {"name": "Help desk", "systemPrompt": "You answer shop questions."}
    images = [await _image(client, plain, f"user-{n}") for n in range(4)]
    for image in images:
        await client.request("image_update", imageId=image["imageId"], updates={"replyCache": {}})
    stored = await harness.store.get_image("tenant-a", images[0]["imageId"])
    assert stored.replyCache == {"enabled": True, "ttlS": 86_400}  # the defaults, stored whole
    harness.model.add("Nine to five.", "Nine to five.")
    await _ask(harness, client, images[0], "Opening hours?")
    await _ask(harness, client, images[1], "Opening hours?")
    assert len(harness.model.requests) == 1
    await client.request(
        "image_update", imageId=images[2]["imageId"], updates={"replyCache": {"enabled": False}}
    )
    await _ask(harness, client, images[2], "Opening hours?")  # off: the model answers
    assert len(harness.model.requests) == 2


async def test_a_reply_cache_policy_of_the_wrong_shape_is_refused(harness):
    client = await harness.client()
    for policy in ({"ttlS": 10}, {"enabled": "yes"}, {"enabled": True, "maxEntries": 5}):
        config = {"name": "Help desk", "replyCache": policy}
        answer = await client.request("image_create", containerId="user-alice", config=config)
        assert answer["code"] == "bad_request" and "config.replyCache" in answer["error"], answer


async def test_a_reply_too_long_to_keep_is_not_cached(harness):
    from agentvm.turns.reply_cache import MAX_CACHED_CHARS

    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    long_reply = " ".join(["word"] * (MAX_CACHED_CHARS // 4))  # 5 characters a word: over the limit
    harness.model.add(long_reply, "A summary.", "Short now.")  # the long reply is compacted after
    await _ask(harness, client, first, "Tell me everything")
    await _ask(harness, client, second, "Tell me everything")
    assert _text(_reply_frames(client, second)) == "Short now."  # the model answered again
    usage = [u for u in await harness.store.list_usage("tenant-a") if u.sessionId == second["sessionId"]]
    assert [u.kind for u in usage] == ["turn"]


async def test_purging_a_deleted_tenant_purges_its_cached_replies(harness):
    alice, bob = await harness.client(), await harness.client("tenant-b")
    harness.model.add("A's answer.", "B's answer.")
    await _ask(harness, alice, await _image(alice, CACHED), "Opening hours?")
    await _ask(harness, bob, await _image(bob, CACHED), "Opening hours?")
    assert (harness.rt.replies.count("tenant-a"), harness.rt.replies.count("tenant-b")) == (1, 1)
    await harness.rt.tenant_purge.purge_tenant("tenant-a")
    assert (harness.rt.replies.count("tenant-a"), harness.rt.replies.count("tenant-b")) == (0, 1)


async def test_a_tenant_that_turns_the_reply_cache_off_neither_reads_nor_writes_it(harness):
    client, other = await harness.client(), await harness.client("tenant-b")
    await harness.rt.config.set(  # type: ignore[union-attr]
        {"turns.replyCache": False}, tenant_id="tenant-a", by="admin", platform_admin=False
    )
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")
    harness.model.add("Nine to five.", "Nine to five, again.")
    await _ask(harness, client, first, "Opening hours?")
    await _ask(harness, client, second, "Opening hours?")
    assert len(harness.model.requests) == 2  # no hit: the tenant's cache is off
    assert [u.kind for u in await harness.store.list_usage("tenant-a")] == ["turn", "turn"]
    assert harness.rt.replies.count("tenant-a") == 0  # type: ignore[union-attr]
    # Another tenant's switch is its own: tenant-b still caches.
    theirs, again = await _image(other, CACHED), await _image(other, CACHED, "user-carol")
    harness.model.add("Ten to six.")
    await _ask(harness, other, theirs, "Opening hours?")
    await _ask(harness, other, again, "Opening hours?")
    assert len(harness.model.requests) == 3
    assert [u.kind for u in await harness.store.list_usage("tenant-b")] == ["turn", "reply_cache"]


# -- the storage quota: cached replies are not charged; a put past the quota is skipped ------------
@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        if w.rt.storage_quota is None:  # the local world has no quota unless given one
            w.rt.storage_quota = StorageQuota(SqliteCounters(tmp_path / "counters.db"), limit_bytes=1 << 30)
        yield w


async def test_a_put_past_the_tenants_storage_quota_is_skipped_never_failing_the_turn(world):
    quota, replies = world.rt.storage_quota, world.rt.replies
    client = await world.connect(world.tokens["tenant-a"])
    images = []
    for user in ("user-alice", "user-bob", "user-carol"):
        image = (await client.request("image_create", containerId=user, config=CACHED))["record"]
        await client.subscribe(image["sessionId"])
        images.append(image)
    long_reply = "We open at nine. " * 200  # 3,400 bytes: more than the room left below
    world.model.add(long_reply, long_reply)
    limit = await quota.limit_of("tenant-a")
    assert limit > 0
    filler = limit - await quota.used("tenant-a") - 2_000  # room for the message, not the reply
    await quota.charge("tenant-a", filler)
    before = await quota.used("tenant-a")

    async def ask(image: dict[str, Any]) -> str:
        answer = await client.request("message_send", imageId=image["imageId"], content="Opening hours?")
        assert "code" not in answer, answer
        await world.run_turns()
        frames = _reply_frames(client, image)
        assert frames[-1]["type"] == "conversation_end" and frames[-1]["data"] == {"reason": "completed"}
        return _text(frames)

    assert await ask(images[0]) == long_reply  # answered by the model, as usual
    assert replies.count("tenant-a") == 0  # ... but not kept: it would not fit the account
    one_turn = await quota.used("tenant-a") - before  # its message and reply, charged as always
    assert one_turn > len(long_reply)
    stored = await world.rt.store.list_messages(images[0]["sessionId"])
    assert [m.subtype for m in stored] == ["user", "assistant"]

    await quota.give_back("tenant-a", filler)  # room again
    used = await quota.used("tenant-a")
    assert await ask(images[1]) == long_reply  # a miss again: the model is called and the reply kept
    assert replies.count("tenant-a") == 1
    assert await ask(images[2]) == long_reply  # a hit
    assert len(world.model.requests) == 2
    # the cached copy is not in the account: bob's and carol's turns were charged as alice's was
    charged = await quota.used("tenant-a") - used
    assert abs(charged - 2 * one_turn) < 200 < len(long_reply)
    kinds = [u.kind for u in await world.rt.store.list_usage("tenant-a")]
    assert sorted(kinds) == ["reply_cache", "turn", "turn"]


async def test_a_quota_that_cannot_be_read_skips_the_put_and_the_turn_completes(harness, monkeypatch):
    secure(harness, ManualClock(), storage_bytes=1 << 30)
    client = await harness.client()
    first, second = await _image(client, CACHED), await _image(client, CACHED, "user-bob")

    async def unreadable(tenant_id: str) -> int:
        raise ConnectionError("the counters table is unreachable")

    monkeypatch.setattr(harness.rt.storage_quota, "used", unreadable)
    harness.model.add("We open at nine.", "We open at nine, still.")
    await _ask(harness, client, first, "Opening hours?")
    assert _text(_reply_frames(client, first)) == "We open at nine."
    assert harness.rt.replies.count("tenant-a") == 0
    monkeypatch.undo()
    await _ask(harness, client, second, "Opening hours?")
    assert len(harness.model.requests) == 2  # nothing was cached: the model answered again
    assert harness.rt.replies.count("tenant-a") == 1


def test_a_replys_bytes_are_its_text_key_and_model_in_utf8():
    reply = CachedReply(
        key="k" * 64,
        text="Grüße",
        model="anthropic/x",
        input_tokens=1,
        output_tokens=1,
        created_at=0,
        expires_at=1,
    )
    assert reply_bytes(reply) == 7 + 64 + 11
