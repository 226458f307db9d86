"""The ``Store`` port's contract, run against every implementation in ``STORE_FACTORIES``.

Only the port's public methods are used here, so any store can be plugged in; behaviour specific
to one implementation belongs in that implementation's own test file.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    TextPart,
    ThinkingPart,
    TokenUsage,
    ToolCallMessage,
    ToolCallPart,
    ToolResultMessage,
    ToolResultOutput,
    ToolResultPart,
    UserMessage,
)
from agentvm.records import (
    ContainerRecord,
    FrameMap,
    ImageRecord,
    SessionRecord,
    SessionSummary,
    TurnRecord,
    UsageRecord,
)

if TYPE_CHECKING:
    from agentvm.messages import Message
    from agentvm.ports import Store
    from agentvm.records import TurnStatus

TENANT_A = "tenant-a"
TENANT_B = "tenant-b"


# builders: the smallest valid records, with the fields a test cares about as arguments


def container(tenant: str = TENANT_A, container_id: str = "user-alice", at: int = 1000) -> ContainerRecord:
    return ContainerRecord(tenantId=tenant, containerId=container_id, createdAt=at, updatedAt=at)


def image(
    image_id: str = "img_1",
    *,
    tenant: str = TENANT_A,
    container_id: str = "user-alice",
    at: int = 1000,
    name: str = "helper",
) -> tuple[ImageRecord, SessionRecord]:
    session_id = f"ses_{image_id}"
    return (
        ImageRecord(
            tenantId=tenant,
            imageId=image_id,
            containerId=container_id,
            sessionId=session_id,
            name=name,
            createdAt=at,
            updatedAt=at,
        ),
        SessionRecord(
            tenantId=tenant,
            sessionId=session_id,
            imageId=image_id,
            containerId=container_id,
            createdAt=at,
            updatedAt=at,
        ),
    )


def user(text: str, message_id: str | None = None, at: int = 1000) -> UserMessage:
    return UserMessage(id=message_id or f"msg_{text}", timestamp=at, content=text)


def usage(
    turn_id: str,
    *,
    tenant: str = TENANT_A,
    container_id: str = "user-alice",
    at: int = 1000,
    input_tokens: int = 10,
) -> UsageRecord:
    return UsageRecord(
        turnId=turn_id,
        tenantId=tenant,
        containerId=container_id,
        imageId="img_1",
        sessionId="ses_img_1",
        model="fake/echo",
        inputTokens=input_tokens,
        outputTokens=5,
        createdAt=at,
    )


def turn(turn_id: str, status: TurnStatus, at: int = 1000) -> TurnRecord:
    return TurnRecord(turnId=turn_id, sessionId="ses_img_1", status=status, updatedAt=at)


async def append_texts(store: Store, session_id: str, *texts: str) -> None:
    for text in texts:
        await store.append_message(session_id, user(text))


def texts_of(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, UserMessage) and isinstance(m.content, str)]


# containers


async def test_put_container_returns_true_when_created_and_false_when_it_exists(store: Store) -> None:
    assert await store.put_container(container()) is True
    assert await store.put_container(container()) is False


async def test_put_container_never_overwrites_an_existing_container(store: Store) -> None:
    await store.put_container(container(at=1000))
    await store.put_container(container(at=2000))

    stored = await store.get_container(TENANT_A, "user-alice")

    assert stored == container(at=1000)


async def test_same_container_id_in_two_tenants_is_two_containers(store: Store) -> None:
    assert await store.put_container(container(TENANT_A, at=1000)) is True
    assert await store.put_container(container(TENANT_B, at=2000)) is True

    assert await store.get_container(TENANT_A, "user-alice") == container(TENANT_A, at=1000)
    assert await store.get_container(TENANT_B, "user-alice") == container(TENANT_B, at=2000)


async def test_get_container_of_another_tenant_is_none(store: Store) -> None:
    await store.put_container(container(TENANT_A))

    assert await store.get_container(TENANT_B, "user-alice") is None


async def test_list_containers_lists_only_the_tenants_containers(store: Store) -> None:
    await store.put_container(container(TENANT_A, "user-alice"))
    await store.put_container(container(TENANT_A, "user-bob"))
    await store.put_container(container(TENANT_B, "user-carol"))

    listed_a = await store.list_containers(TENANT_A)
    listed_b = await store.list_containers(TENANT_B)

    assert sorted(c.containerId for c in listed_a) == ["user-alice", "user-bob"]
    assert [c.containerId for c in listed_b] == ["user-carol"]
    assert await store.list_containers("tenant-nobody") == []


# images and sessions


async def test_create_image_stores_the_image_and_its_session(store: Store) -> None:
    img, ses = image("img_1")

    await store.create_image(img, ses)

    assert await store.get_image(TENANT_A, "img_1") == img
    assert await store.get_session(TENANT_A, ses.sessionId) == ses


async def test_missing_image_and_session_read_as_none(store: Store) -> None:
    assert await store.get_image(TENANT_A, "img_missing") is None
    assert await store.get_session(TENANT_A, "ses_missing") is None


async def test_image_and_session_of_another_tenant_read_as_none(store: Store) -> None:
    img, ses = image("img_1", tenant=TENANT_A)
    await store.create_image(img, ses)

    assert await store.get_image(TENANT_B, "img_1") is None
    assert await store.get_session(TENANT_B, ses.sessionId) is None
    assert await store.list_images(TENANT_B) == []
    assert await store.list_images(TENANT_B, "user-alice") == []


async def test_image_record_round_trips_every_field(store: Store) -> None:
    img, ses = image("img_1")
    full = img.model_copy(
        update={
            "description": "does things",
            "systemPrompt": "be brief",
            "model": "anthropic/claude-haiku-4-5",
            "mcpServers": {"files": {"command": "mcp-files", "args": ["--root", "/"]}},
            "concurrency": "interrupt",
            "agentId": "agt_1",
        }
    )

    await store.create_image(full, ses)

    assert await store.get_image(TENANT_A, "img_1") == full


async def test_list_images_returns_newest_first_with_image_id_breaking_ties(store: Store) -> None:
    for image_id, at in [("img_a", 1000), ("img_b", 3000), ("img_c", 2000), ("img_d", 2000)]:
        await store.create_image(*image(image_id, at=at))

    listed = await store.list_images(TENANT_A)

    assert [i.imageId for i in listed] == ["img_b", "img_d", "img_c", "img_a"]


async def test_list_images_without_container_lists_all_of_the_tenants_containers(store: Store) -> None:
    await store.create_image(*image("img_1", container_id="user-alice", at=1000))
    await store.create_image(*image("img_2", container_id="user-bob", at=2000))
    await store.create_image(*image("img_3", tenant=TENANT_B, container_id="user-alice", at=3000))

    listed = await store.list_images(TENANT_A)

    assert [i.imageId for i in listed] == ["img_2", "img_1"]


async def test_list_images_with_container_lists_only_that_container(store: Store) -> None:
    await store.create_image(*image("img_1", container_id="user-alice", at=1000))
    await store.create_image(*image("img_2", container_id="user-bob", at=2000))
    await store.create_image(*image("img_3", container_id="user-alice", at=3000))

    listed = await store.list_images(TENANT_A, "user-alice")

    assert [i.imageId for i in listed] == ["img_3", "img_1"]
    assert await store.list_images(TENANT_A, "user-nobody") == []


async def test_put_image_overwrites_the_image_record(store: Store) -> None:
    img, ses = image("img_1", name="before")
    await store.create_image(img, ses)
    updated = img.model_copy(update={"name": "after", "agentId": "agt_1", "updatedAt": 2000})

    await store.put_image(updated)

    assert await store.get_image(TENANT_A, "img_1") == updated
    assert [i.name for i in await store.list_images(TENANT_A)] == ["after"]


async def test_put_image_of_another_tenant_does_not_change_the_owners_image(store: Store) -> None:
    img, ses = image("img_1", tenant=TENANT_A, name="mine")
    await store.create_image(img, ses)

    await store.put_image(img.model_copy(update={"tenantId": TENANT_B, "name": "stolen"}))

    assert await store.get_image(TENANT_A, "img_1") == img


async def test_delete_image_removes_image_session_messages_and_cancel_mark(store: Store) -> None:
    img, ses = image("img_1")
    await store.create_image(img, ses)
    await append_texts(store, ses.sessionId, "one", "two")
    await store.request_cancel(ses.sessionId, "turn_1")

    await store.delete_image(TENANT_A, "img_1")

    assert await store.get_image(TENANT_A, "img_1") is None
    assert await store.get_session(TENANT_A, ses.sessionId) is None
    assert await store.list_images(TENANT_A) == []
    assert await store.list_messages(ses.sessionId) == []
    assert await store.recent_messages(ses.sessionId, 10) == []
    assert await store.is_cancel_requested(ses.sessionId, "turn_1") is False


async def test_delete_image_leaves_other_images_intact(store: Store) -> None:
    doomed, doomed_ses = image("img_1", at=1000)
    kept, kept_ses = image("img_2", at=2000)
    await store.create_image(doomed, doomed_ses)
    await store.create_image(kept, kept_ses)
    await append_texts(store, doomed_ses.sessionId, "bye")
    await append_texts(store, kept_ses.sessionId, "stay")
    await store.request_cancel(kept_ses.sessionId, "turn_2")

    await store.delete_image(TENANT_A, "img_1")

    assert await store.list_images(TENANT_A) == [kept]
    assert await store.get_session(TENANT_A, kept_ses.sessionId) == kept_ses
    assert texts_of(await store.list_messages(kept_ses.sessionId)) == ["stay"]
    assert await store.is_cancel_requested(kept_ses.sessionId, "turn_2") is True


async def test_delete_image_of_another_tenant_deletes_nothing(store: Store) -> None:
    img, ses = image("img_1", tenant=TENANT_A)
    await store.create_image(img, ses)
    await append_texts(store, ses.sessionId, "mine")

    await store.delete_image(TENANT_B, "img_1")

    assert await store.get_image(TENANT_A, "img_1") == img
    assert await store.get_session(TENANT_A, ses.sessionId) == ses
    assert texts_of(await store.list_messages(ses.sessionId)) == ["mine"]


async def test_delete_of_a_missing_image_is_a_no_op(store: Store) -> None:
    await store.delete_image(TENANT_A, "img_missing")

    assert await store.list_images(TENANT_A) == []


# messages


async def test_append_assigns_consecutive_seqs_starting_at_one(store: Store) -> None:
    results = [await store.append_message("ses_1", user(text)) for text in ("a", "b", "c")]

    assert [r.seq for r in results] == [1, 2, 3]
    assert all(r.created for r in results)
    assert [r.message for r in results] == [user("a"), user("b"), user("c")]


async def test_each_session_has_its_own_sequence(store: Store) -> None:
    await append_texts(store, "ses_1", "a", "b")

    result = await store.append_message("ses_2", user("x"))

    assert result.seq == 1
    assert texts_of(await store.list_messages("ses_1")) == ["a", "b"]
    assert texts_of(await store.list_messages("ses_2")) == ["x"]


async def test_list_messages_returns_the_history_oldest_first(store: Store) -> None:
    await append_texts(store, "ses_1", "first", "second", "third")

    assert texts_of(await store.list_messages("ses_1")) == ["first", "second", "third"]


async def test_list_messages_of_an_unknown_session_is_empty(store: Store) -> None:
    assert await store.list_messages("ses_missing") == []


async def test_every_message_kind_round_trips_unchanged(store: Store) -> None:
    messages: list[Message] = [
        UserMessage(id="m1", timestamp=1, content=[TextPart(text="hi ✓ — ünïcode")]),
        AssistantMessage(
            id="m2",
            timestamp=2,
            parentId="m1",
            content=[ThinkingPart(reasoning="hmm", tokenCount=3), TextPart(text="hello")],
            usage=TokenUsage(inputTokens=10, outputTokens=4, totalTokens=14),
        ),
        ToolCallMessage(
            id="m3",
            timestamp=3,
            toolCall=ToolCallPart(id="call_1", name="search", input={"q": "x", "n": [1, 2]}),
        ),
        ToolResultMessage(
            id="m4",
            timestamp=4,
            toolCallId="call_1",
            toolResult=ToolResultPart(
                id="call_1", name="search", output=ToolResultOutput(type="json", value={"hits": []})
            ),
        ),
        ErrorMessage(id="m5", timestamp=5, content="model unavailable", errorCode="MODEL_ERROR"),
    ]
    for message in messages:
        await store.append_message("ses_1", message)

    assert await store.list_messages("ses_1") == messages
    assert await store.recent_messages("ses_1", 5) == messages


async def test_append_with_same_idempotency_key_stores_one_message(store: Store) -> None:
    first = await store.append_message("ses_1", user("original", "msg_1"), idempotency_key="req_1")

    again = await store.append_message("ses_1", user("retry", "msg_2"), idempotency_key="req_1")

    assert first.created is True
    assert again.created is False
    assert again.seq == first.seq == 1
    assert again.message == user("original", "msg_1")
    assert await store.list_messages("ses_1") == [user("original", "msg_1")]


async def test_a_repeated_key_does_not_consume_a_seq(store: Store) -> None:
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")

    result = await store.append_message("ses_1", user("b"), idempotency_key="req_2")

    assert result.seq == 2
    assert result.created is True


async def test_a_repeated_key_returns_its_own_message_not_the_latest(store: Store) -> None:
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")
    await store.append_message("ses_1", user("b"), idempotency_key="req_2")

    again = await store.append_message("ses_1", user("a2"), idempotency_key="req_1")

    assert (again.seq, again.message, again.created) == (1, user("a"), False)


async def test_idempotency_keys_are_scoped_to_their_session(store: Store) -> None:
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")

    other = await store.append_message("ses_2", user("b"), idempotency_key="req_1")

    assert other.created is True
    assert texts_of(await store.list_messages("ses_2")) == ["b"]


async def test_appends_without_a_key_are_never_deduplicated(store: Store) -> None:
    await store.append_message("ses_1", user("same"))
    await store.append_message("ses_1", user("same"))

    assert texts_of(await store.list_messages("ses_1")) == ["same", "same"]


async def test_concurrent_appends_get_distinct_consecutive_seqs(store: Store) -> None:
    results = await asyncio.gather(*(store.append_message("ses_1", user(f"m{i}")) for i in range(20)))

    assert sorted(r.seq for r in results) == list(range(1, 21))
    assert len(await store.list_messages("ses_1")) == 20


async def test_concurrent_appends_with_one_key_create_exactly_once(store: Store) -> None:
    results = await asyncio.gather(
        *(store.append_message("ses_1", user(f"m{i}"), idempotency_key="req_1") for i in range(5))
    )

    assert sum(r.created for r in results) == 1
    assert {r.seq for r in results} == {1}
    assert len(await store.list_messages("ses_1")) == 1


async def test_recent_messages_returns_the_last_n_oldest_first(store: Store) -> None:
    await append_texts(store, "ses_1", "a", "b", "c", "d", "e")

    assert texts_of(await store.recent_messages("ses_1", 3)) == ["c", "d", "e"]
    assert texts_of(await store.recent_messages("ses_1", 1)) == ["e"]


async def test_recent_messages_with_a_limit_beyond_the_history_returns_all(store: Store) -> None:
    await append_texts(store, "ses_1", "a", "b")

    assert texts_of(await store.recent_messages("ses_1", 50)) == ["a", "b"]


async def test_recent_messages_with_a_zero_limit_or_no_history_is_empty(store: Store) -> None:
    await append_texts(store, "ses_1", "a")

    assert await store.recent_messages("ses_1", 0) == []
    assert await store.recent_messages("ses_missing", 10) == []


async def test_recent_messages_is_the_tail_of_list_messages_for_every_limit(store: Store) -> None:
    await append_texts(store, "ses_1", *(f"m{i}" for i in range(12)))
    await append_texts(store, "ses_2", "noise")
    history = await store.list_messages("ses_1")

    for limit in range(1, 15):
        assert await store.recent_messages("ses_1", limit) == history[-limit:]


async def test_recent_messages_after_is_the_tail_after_a_seq_with_seqs(store: Store) -> None:
    await append_texts(store, "ses_1", *(f"m{i}" for i in range(1, 13)))  # seqs 1..12
    await append_texts(store, "ses_2", "noise")
    history = await store.list_messages("ses_1")

    for after in (0, 1, 5, 11, 12, 20):
        for limit in range(1, 15):
            got = await store.recent_messages_after("ses_1", after, limit)
            expected = list(enumerate(history, start=1))[after:][-limit:]
            assert [(e.seq, e.message) for e in got] == expected, (after, limit)


async def test_recent_messages_after_with_a_zero_limit_or_no_history_is_empty(store: Store) -> None:
    await append_texts(store, "ses_1", "a")

    assert await store.recent_messages_after("ses_1", 0, 0) == []
    assert await store.recent_messages_after("ses_missing", 0, 10) == []


# turns


async def test_get_turn_returns_the_last_put(store: Store) -> None:
    await store.put_turn(turn("turn_1", "queued", at=1))
    await store.put_turn(turn("turn_1", "completed", at=2))

    assert await store.get_turn("turn_1") == turn("turn_1", "completed", at=2)
    assert await store.get_turn("turn_missing") is None


async def test_a_continued_turns_frame_map_keeps_the_maps_of_its_suspended_attempts(store: Store) -> None:
    suspended = FrameMap(firstSeq=100_001, kinds=["message_persisted", 15, "turn_suspended"], agentId="ag_1")
    ended = FrameMap(
        firstSeq=100_004,
        kinds=["tool_result", 24, "conversation_end"],
        data={"2": {"reason": "completed"}},
        agentId="ag_1",
        earlier=[suspended],
    )
    await store.put_turn(turn("turn_1", "running").model_copy(update={"frames": suspended}))
    assert (await store.get_turn("turn_1")).frames == suspended
    done = turn("turn_1", "completed", at=2).model_copy(update={"frames": ended})
    await store.put_turn(done)

    assert await store.get_turn("turn_1") == done


# usage


async def test_put_usage_twice_with_the_same_turn_id_keeps_the_first(store: Store) -> None:
    assert await store.put_usage(usage("turn_1", input_tokens=10)) is True
    assert await store.put_usage(usage("turn_1", input_tokens=999)) is False

    assert await store.list_usage(TENANT_A) == [usage("turn_1", input_tokens=10)]


async def test_list_usage_is_ordered_by_created_at(store: Store) -> None:
    await store.put_usage(usage("turn_b", at=3000))
    await store.put_usage(usage("turn_a", at=1000))
    await store.put_usage(usage("turn_c", at=2000))

    assert [u.turnId for u in await store.list_usage(TENANT_A)] == ["turn_a", "turn_c", "turn_b"]


async def test_list_usage_filters_by_container(store: Store) -> None:
    await store.put_usage(usage("turn_1", container_id="user-alice", at=1))
    await store.put_usage(usage("turn_2", container_id="user-bob", at=2))
    await store.put_usage(usage("turn_3", container_id="user-alice", at=3))

    assert [u.turnId for u in await store.list_usage(TENANT_A, "user-alice")] == ["turn_1", "turn_3"]
    assert [u.turnId for u in await store.list_usage(TENANT_A)] == ["turn_1", "turn_2", "turn_3"]


async def test_list_usage_since_a_time_leaves_out_older_records(store: Store) -> None:
    await store.put_usage(usage("turn_1", at=1000))
    await store.put_usage(usage("turn_2", at=2000))
    await store.put_usage(usage("turn_3", container_id="user-bob", at=3000))
    assert [u.turnId for u in await store.list_usage(TENANT_A, since_ms=2000)] == ["turn_2", "turn_3"]
    assert [u.turnId for u in await store.list_usage(TENANT_A, "user-alice", since_ms=2000)] == ["turn_2"]
    assert [u.turnId for u in await store.list_usage(TENANT_A, since_ms=0)] == ["turn_1", "turn_2", "turn_3"]


async def test_list_usage_of_another_tenant_is_empty(store: Store) -> None:
    await store.put_usage(usage("turn_1", tenant=TENANT_A))

    assert await store.list_usage(TENANT_B) == []
    assert await store.list_usage(TENANT_B, "user-alice") == []


# compaction summaries


def summary(session_id: str = "ses_img_1", up_to: int = 10, text: str = "so far") -> SessionSummary:
    return SessionSummary(sessionId=session_id, upToSeq=up_to, text=text, model="fake/x", messages=up_to)


async def test_a_summary_round_trips_and_is_scoped_to_its_session(store: Store) -> None:
    assert await store.get_summary("ses_img_1") is None

    assert await store.put_summary(summary(text="Alice likes tea. " * 200)) is True

    assert await store.get_summary("ses_img_1") == summary(text="Alice likes tea. " * 200)
    assert await store.get_summary("ses_other") is None


async def test_a_summary_is_replaced_only_by_one_covering_more(store: Store) -> None:
    await store.put_summary(summary(up_to=10, text="ten"))

    assert await store.put_summary(summary(up_to=9, text="older")) is False
    assert await store.put_summary(summary(up_to=10, text="same")) is False
    assert (await store.get_summary("ses_img_1")).text == "ten"

    assert await store.put_summary(summary(up_to=30, text="thirty")) is True
    assert await store.get_summary("ses_img_1") == summary(up_to=30, text="thirty")


async def test_delete_image_deletes_its_summary(store: Store) -> None:
    img, ses = image("img_1")
    await store.create_image(img, ses)
    await store.put_summary(summary(ses.sessionId))

    await store.delete_image(TENANT_A, "img_1")

    assert await store.get_summary(ses.sessionId) is None


async def test_usage_kind_and_estimate_round_trip(store: Store) -> None:
    record = usage("turn_1:compact:10").model_copy(update={"kind": "compaction", "estimated": True})
    await store.put_usage(record)

    assert await store.list_usage(TENANT_A) == [record]


# cancel marks


async def test_cancel_mark_is_set_only_for_the_named_turn(store: Store) -> None:
    assert await store.is_cancel_requested("ses_1", "turn_1") is False

    await store.request_cancel("ses_1", "turn_1")

    assert await store.is_cancel_requested("ses_1", "turn_1") is True
    assert await store.is_cancel_requested("ses_1", "turn_2") is False


async def test_cancel_mark_is_scoped_to_its_session(store: Store) -> None:
    await store.request_cancel("ses_1", "turn_1")

    assert await store.is_cancel_requested("ses_2", "turn_1") is False


async def test_several_turns_of_a_session_can_be_cancelled_at_once(store: Store) -> None:
    await store.request_cancel("ses_1", "turn_1")

    await store.request_cancel("ses_1", "turn_2")
    await store.request_cancel("ses_1", "turn_2")  # again: the same mark

    assert await store.is_cancel_requested("ses_1", "turn_2") is True
    assert await store.is_cancel_requested("ses_1", "turn_1") is True
    assert await store.is_cancel_requested("ses_1", "turn_3") is False


# a worker's cancel poll: one read for the turns running under its poller id (turns/cancel_poll.py)


def running(turn_id: str, poller: str | None, session_id: str = "ses_1") -> TurnRecord:
    return TurnRecord(turnId=turn_id, sessionId=session_id, status="running", updatedAt=1, poller=poller)


async def test_a_cancel_of_a_running_turn_is_among_its_pollers_cancel_requests(store: Store) -> None:
    await store.put_turn(running("turn_1", "poll_a"))
    await store.put_turn(running("turn_2", "poll_a", session_id="ses_2"))
    await store.put_turn(running("turn_3", "poll_b", session_id="ses_3"))

    await store.request_cancel("ses_1", "turn_1")
    await store.request_cancel("ses_3", "turn_3")

    assert await store.cancel_requests("poll_a") == {"turn_1"}  # not turn_2, still running
    assert await store.cancel_requests("poll_b") == {"turn_3"}
    assert await store.cancel_requests("poll_c") == set()


async def test_several_running_turns_of_a_session_cancelled_at_once_are_all_polled(store: Store) -> None:
    await store.put_turn(running("turn_1", "poll_a"))
    await store.put_turn(running("turn_2", "poll_a"))

    await store.request_cancel("ses_1", "turn_1")
    await store.request_cancel("ses_1", "turn_2")

    assert await store.cancel_requests("poll_a") == {"turn_1", "turn_2"}


async def test_a_cancel_before_the_running_write_is_seen_by_the_start_check(store: Store) -> None:
    """The race: the interrupt reads the turn record before the worker's running write names its
    poller (no poller mark), so the worker's strongly consistent check after that write sees it."""
    await store.put_turn(turn("turn_1", "queued").model_copy(update={"sessionId": "ses_1"}))
    await store.request_cancel("ses_1", "turn_1")

    await store.put_turn(running("turn_1", "poll_a"))  # the worker's write, then its check

    assert await store.is_cancel_requested("ses_1", "turn_1") is True


async def test_a_cancel_of_a_turn_that_is_not_running_is_for_no_poller(store: Store) -> None:
    suspended = running("turn_1", "poll_a").model_copy(update={"status": "suspended"})
    await store.put_turn(suspended)
    await store.put_turn(turn("turn_2", "completed").model_copy(update={"sessionId": "ses_1"}))

    await store.request_cancel("ses_1", "turn_1")
    await store.request_cancel("ses_1", "turn_2")
    await store.request_cancel("ses_1", "turn_9")  # no record at all

    assert await store.cancel_requests("poll_a") == set()
    assert await store.is_cancel_requested("ses_1", "turn_1") is True  # its continuation's check
