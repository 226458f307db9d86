"""Embedding models through their providers' official SDKs (the ``Embedder`` port).

``openai``: OpenAI (and OpenAI-compatible servers) ``embeddings.create``; ``bedrock``: Bedrock
``InvokeModel`` for Titan Text Embeddings and Cohere Embed; ``choice``: which model a tenant
embeds with (settings and the config centre), ``embedder_for`` and ``tenant_embedder``, the ways
the host makes an embedder. The SDKs are imported when an embedder is made, never by importing this package.
"""

from __future__ import annotations

from agentvm.adapters.embeddings.choice import EmbeddingsChoice, embedder_for, tenant_embedder

__all__ = ["EmbeddingsChoice", "embedder_for", "tenant_embedder"]
