"""A cluster node's id: ``AVM_NODE_ID`` when set, else unique per process, and always a valid
name for the node's push channel (``adapters/postgres/push.py``)."""

from __future__ import annotations

import pytest

from agentvm.adapters.postgres.notifications import MAX_CHANNEL_BYTES
from agentvm.adapters.postgres.push import push_channel
from agentvm.hosts.cluster import node_id


def test_the_node_id_is_avm_node_id_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AVM_NODE_ID", "agentvm-7d9f-0")

    assert node_id() == "agentvm-7d9f-0"


def test_without_avm_node_id_each_process_start_is_a_new_node_with_a_valid_channel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AVM_NODE_ID", raising=False)
    monkeypatch.setattr("socket.gethostname", lambda: "a very/long host name.example.internal-" * 3)

    first, second = node_id(), node_id()

    assert first != second
    assert len(push_channel(first).encode()) <= MAX_CHANNEL_BYTES


def test_a_node_id_that_cannot_name_a_channel_is_refused() -> None:
    with pytest.raises(ValueError, match="node id"):
        push_channel("node with spaces")
    with pytest.raises(ValueError, match="node id"):
        push_channel("n" * 49)
