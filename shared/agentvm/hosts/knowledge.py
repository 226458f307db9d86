"""The knowledge centre's embedder on a host: each tenant's embedding model, its tokens billed.

``tenant_embedders(runtime, settings)`` is what the hosts give ``ResourceCentre(embedder=...)``:
for a tenant it answers the embedder of its ``embeddings.*`` choice (else the server's
``AVM_EMBEDDINGS_MODEL``; None when neither is set: knowledge is then indexed and searched by
words alone, and says so), built through the provider keys the config centre resolves for it
(``adapters/embeddings``). The tokens its calls use are billed to the tenant after each indexing or
search (``agent.side_calls.bill_embeddings``: usage kind ``embedding``, counted in its budget). A
runtime with a host-wide ``embedder`` set (tests) answers that one, unbilled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.resources.indexing import EmbedderFor, MeteredEmbedder, Unmetered

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.config import Settings
    from agentvm.llm import EmbeddingCall
    from agentvm.ports import Embedder
    from agentvm.runtime import Runtime


class TenantEmbedding:
    """One tenant's embedder for one indexing or search, and the bill for its calls."""

    def __init__(self, rt: Runtime, tenant_id: str, embedder: Embedder, calls: list[EmbeddingCall]) -> None:
        self.embedder = embedder
        self._rt = rt
        self._tenant_id = tenant_id
        self._calls = calls  # appended by the embedder's on_usage, from its threads

    async def bill(self, usage_id: str) -> None:
        from agentvm.agent.side_calls import bill_embeddings

        calls, self._calls[:] = list(self._calls), []
        if calls:
            await bill_embeddings(self._rt, calls, tenant_id=self._tenant_id, usage_id=usage_id)


def tenant_embedders(rt: Runtime, settings: Settings | Callable[[], Settings]) -> EmbedderFor:
    """``settings``: the server's, or a function answering them as they are now (the AWS host's
    carry the provider keys read from SSM)."""

    async def embedder_for(tenant_id: str) -> MeteredEmbedder | None:
        current = settings() if callable(settings) else settings
        return await _embedder_for(rt, current, tenant_id)

    return embedder_for


async def _embedder_for(rt: Runtime, settings: Settings, tenant_id: str) -> MeteredEmbedder | None:
    if rt.embedder is not None:
        return Unmetered(rt.embedder)
    if rt.config is None and not settings.embeddings_model:
        return None
    from agentvm.adapters.embeddings import embedder_for as server_embedder
    from agentvm.adapters.embeddings import tenant_embedder

    calls: list[EmbeddingCall] = []
    if rt.config is not None:
        embedder = tenant_embedder(settings, await rt.config.resolved(tenant_id), on_usage=calls.append)
    else:
        embedder = server_embedder(settings, on_usage=calls.append)
    return None if embedder is None else TenantEmbedding(rt, tenant_id, embedder, calls)


__all__ = ["TenantEmbedding", "tenant_embedders"]
