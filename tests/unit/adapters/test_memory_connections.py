"""``InMemoryConnections``: the per-key connection cap of the local host."""

from __future__ import annotations

import pytest

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.errors import RateLimited
from agentvm.ports import ConnectionInfo


def conn(connection_id: str, key_id: str | None) -> ConnectionInfo:
    return ConnectionInfo(connection_id, "acme" if key_id else None, 0, key_id=key_id)


async def test_a_key_holds_at_most_max_per_key_connections_and_a_closed_one_frees_its_slot():
    connections = InMemoryConnections(max_per_key=2)
    await connections.register(conn("c1", "k1"))
    await connections.register(conn("c2", "k1"))
    await connections.register(conn("c2", "k1"))  # registering the same connection again is free
    with pytest.raises(RateLimited):
        await connections.register(conn("c3", "k1"))
    await connections.register(conn("c3", "k2"))  # other keys are not affected
    await connections.remove("c1")
    await connections.register(conn("c3", "k1"))  # c3 moves from k2 to k1: k2's slot is freed
    await connections.register(conn("c4", "k2"))
    await connections.register(conn("c5", "k2"))
    assert len(connections) == 4


async def test_connections_without_a_key_and_a_zero_cap_are_not_limited():
    connections = InMemoryConnections(max_per_key=0)
    for n in range(50):
        await connections.register(conn(f"c{n}", "k1"))
    capped = InMemoryConnections(max_per_key=1)
    for n in range(50):
        await capped.register(conn(f"a{n}", None))
