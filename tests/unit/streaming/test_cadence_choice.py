"""Who chooses a batched connection's text cadence (streaming/batch_cadence.py): the connection at
the upgrade (``?cadence=``), else its turn's image (``cadence``), else its tenant (config key
``streaming.cadence``), else the server (live). Through the gateway and a worker, as the local
host wires them; the economy window is shortened to 0.2 s so a turn of ~0.6 s shows it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tests.harness import Harness

if TYPE_CHECKING:
    from tests.harness import ProtocolClient

WORDS = " ".join(f"w{i}" for i in range(150))


def _harness(tmp_path: Any) -> Harness:
    harness = Harness(tmp_path)
    harness.rt.turns = dataclasses.replace(
        harness.rt.turns,
        flush_s=0.02,
        batch_flush_s=0.02,
        batch_flush_max_s=0.02,
        economy_flush_s=0.2,
        economy_flush_max_s=0.2,
    )
    harness.model.word_delay_s = 0.004  # ~0.6 s of text
    return harness


def _text_messages(client: ProtocolClient) -> int:
    return sum('"text_delta"' in m for m in client.messages)


async def _turn(
    harness: Harness, clients: dict[str, ProtocolClient], config: dict[str, Any]
) -> dict[str, int]:
    """One streamed reply on a new image with ``config``: each client's count of messages with text."""
    first = next(iter(clients.values()))
    img = (await first.request("image_create", containerId="u", config={"name": "A", **config}))["record"]
    for client in clients.values():
        await client.subscribe(img["sessionId"])
    harness.model.add(WORDS)
    await first.request("message_send", imageId=img["imageId"], content="go")
    await harness.run_turns()
    frames = [c.turn_frames() for c in clients.values()]
    assert all(f == frames[0] for f in frames)  # every cadence: the same frames, seqs and order
    return {name: _text_messages(client) for name, client in clients.items()}


async def test_a_batched_connection_is_live_by_default_and_economy_when_it_asks(tmp_path):
    harness = _harness(tmp_path)
    clients = {
        "plain": await harness.client(),
        "batched": await harness.client(batch=True),
        "economy": await harness.client(batch=True, cadence="economy"),
    }
    counts = await _turn(harness, clients, {})
    assert counts["batched"] > 10  # live: text every 0.02 s window, as the plain client gets it
    assert counts["economy"] * 3 < counts["batched"]  # 0.2 s windows: a few messages
    assert counts["economy"] <= 6


async def test_an_images_economy_cadence_paces_connections_unless_they_ask_for_live(tmp_path):
    harness = _harness(tmp_path)
    clients = {
        "batched": await harness.client(batch=True),
        "live": await harness.client(batch=True, cadence="live"),
    }
    counts = await _turn(harness, clients, {"cadence": "economy"})
    assert counts["batched"] <= 6
    assert counts["batched"] * 3 < counts["live"]


async def test_a_tenants_streaming_cadence_paces_its_turns_and_an_image_may_choose_otherwise(tmp_path):
    harness = _harness(tmp_path)
    await harness.rt.config.set(  # type: ignore[union-attr]
        {"streaming.cadence": "economy"}, tenant_id="tenant-a", by="admin", platform_admin=False
    )
    economy = await _turn(harness, {"batched": await harness.client(batch=True)}, {})
    live = await _turn(harness, {"batched": await harness.client(batch=True)}, {"cadence": "live"})
    assert economy["batched"] <= 6
    assert economy["batched"] * 3 < live["batched"]


async def test_an_images_cadence_is_checked_and_can_be_changed(tmp_path):
    harness = _harness(tmp_path)
    client = await harness.client()
    created = await client.send_raw(
        '{"type": "image_create_request", "data": {"requestId": "r1", "containerId": "u",'
        ' "config": {"cadence": "slow"}}}'
    )
    (answer,) = [f for f in created if f["type"] == "image_create_response"]
    assert answer["data"]["code"] == "bad_request" and "config.cadence" in answer["data"]["error"]
    img = (await client.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await client.request("image_update", imageId=img["imageId"], updates={"cadence": "economy"})
    stored = await harness.rt.store.get_image("tenant-a", img["imageId"])
    assert stored is not None and stored.cadence == "economy"
