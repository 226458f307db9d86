"""Fan-out to a session's subscribers: gone connections are pruned, failing ones skipped."""

from __future__ import annotations

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.errors import ConnectionGone
from agentvm.ports import ConnectionInfo
from agentvm.streaming.fanout import Fanout


class _Push:
    def __init__(self, fail: dict[str, Exception]) -> None:
        self.fail = fail
        self.sent: dict[str, list[str]] = {}

    async def send(self, connection_id: str, payload: str) -> None:
        if connection_id in self.fail:
            raise self.fail[connection_id]
        self.sent.setdefault(connection_id, []).append(payload)


async def _subscribed(*ids: str) -> InMemoryConnections:
    conns = InMemoryConnections()
    for cid in ids:
        await conns.register(ConnectionInfo(cid, "t", 0))
        await conns.subscribe(cid, "sess")
    return conns


async def test_gone_connection_is_pruned_and_others_still_receive():
    conns = await _subscribed("a", "gone", "b")
    push = _Push({"gone": ConnectionGone("410")})
    await Fanout(conns, push).publish("sess", ["f1", "f2"])
    assert push.sent == {"a": ["f1", "f2"], "b": ["f1", "f2"]}
    assert list(await conns.subscribers("sess")) == ["a", "b"]
    assert await conns.get("gone") is None


async def test_connection_that_fails_otherwise_is_skipped_not_pruned():
    conns = await _subscribed("slow", "ok")
    push = _Push({"slow": RuntimeError("LimitExceededException")})
    alive = await Fanout(conns, push).send_to(["slow", "ok"], ["f1"])
    assert alive == ["slow", "ok"]
    assert push.sent == {"ok": ["f1"]}
    assert list(await conns.subscribers("sess")) == ["slow", "ok"]


async def test_turn_completes_and_persists_with_no_subscriber_left(harness):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])
    await c.request("message_send", imageId=img["imageId"], content="hi")
    harness.push.detach(c.connection_id)  # the client went away before the turn ran
    harness.model.add("nobody is listening")
    await harness.run_turns()
    history = await harness.store.list_messages(img["sessionId"])
    assert [m.subtype for m in history] == ["user", "assistant"]
    assert await harness.rt.connections.get(c.connection_id) is None  # pruned on the first post
