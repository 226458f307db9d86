"""Embedding models through their providers' official SDKs (the ``Embedder`` port).

``openai``: OpenAI (and OpenAI-compatible servers) ``embeddings.create``; ``bedrock``: Bedrock
``InvokeModel`` for Titan Text Embeddings and Cohere Embed; ``choice``: which model a tenant
embeds with (settings and the config centre) and ``embedder_for``, the one way the host makes
an embedder. The SDKs are imported when an embedder is made, never by importing this package.
"""

from __future__ import annotations

from agentvm.adapters.embeddings.choice import EmbeddingsChoice, embedder_for

__all__ = ["EmbeddingsChoice", "embedder_for"]
