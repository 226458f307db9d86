"""Bedrock embeddings (boto3 ``bedrock-runtime`` ``invoke_model``): Titan Text Embeddings and Cohere Embed.

* Titan v2 (``amazon.titan-embed-text-v2:0``): one text per request, ``dimensions`` 256, 512 or
  1,024, normalised; Titan v1 (``amazon.titan-embed-text-v1``): one text, 1,536 values. Their
  requests run ``concurrency`` at a time (boto3 clients are thread-safe), results in input order.
* Cohere Embed v3 (``cohere.embed-english-v3``, ``cohere.embed-multilingual-v3``): up to 96 texts
  per request, 1,024 values, ``input_type`` ``search_document`` or ``search_query`` from the
  ``purpose``: the one model here that embeds documents and queries differently.

Tokens billed are Bedrock's count: Titan's ``inputTextTokenCount``, else the
``X-Amzn-Bedrock-Input-Token-Count`` response header. Retries are botocore's (standard mode:
throttling, 5xx and connection errors with backoff), ``max_attempts`` in all; a failure left is a
``ProviderError`` (``adapters/llm/bedrock.py``'s mapping of Bedrock's error codes).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from agentvm.errors import ProviderRejected
from agentvm.llm import EmbeddingCall

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_V1 = "amazon.titan-embed-text-v1"
COHERE_MAX_TEXTS = 96
# model -> the dimension counts it can answer with (the first is its default)
BEDROCK_MODELS: dict[str, tuple[int, ...]] = {
    TITAN_V2: (1024, 512, 256),
    TITAN_V1: (1536,),
    "cohere.embed-english-v3": (1024,),
    "cohere.embed-multilingual-v3": (1024,),
}
_TOKEN_HEADER = "x-amzn-bedrock-input-token-count"


class BedrockEmbedder:
    """The ``Embedder`` of Bedrock's Titan and Cohere embedding models."""

    provider = "bedrock"

    def __init__(
        self,
        model: str,
        *,
        region: str,
        dimensions: int | None = None,
        timeout_s: float = 60.0,
        max_attempts: int = 4,
        concurrency: int = 4,
        endpoint_url: str | None = None,
        on_usage: Callable[[EmbeddingCall], None] | None = None,
        client: Any = None,
    ) -> None:
        sizes = BEDROCK_MODELS.get(model)
        if sizes is None:
            raise ValueError(f"bedrock embedding model {model!r} is not one of {', '.join(BEDROCK_MODELS)}")
        if dimensions is not None and dimensions not in sizes:
            shown = ", ".join(str(s) for s in sorted(sizes))
            raise ValueError(f"bedrock/{model} gives {shown} dimensions, not {dimensions}")
        if client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                read_timeout=timeout_s,
                connect_timeout=min(timeout_s, 10.0),
                retries={"total_max_attempts": max_attempts, "mode": "standard"},
                max_pool_connections=max(concurrency, 10),
            )
            client = boto3.client(
                "bedrock-runtime", region_name=region, config=config, endpoint_url=endpoint_url
            )
        self._client = client
        self.model = model
        self.dimensions = dimensions or sizes[0]
        self._concurrency = max(concurrency, 1)
        self._on_usage = on_usage

    def embed(self, texts: Sequence[str], *, purpose: Literal["document", "query"]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        if self.model.startswith("cohere."):
            input_type = "search_query" if purpose == "query" else "search_document"
            vectors: list[list[float]] = []
            for start in range(0, len(texts), COHERE_MAX_TEXTS):
                vectors += self._cohere(list(texts[start : start + COHERE_MAX_TEXTS]), input_type)
            return vectors
        if len(texts) == 1 or self._concurrency == 1:
            return [self._titan(text) for text in texts]
        with ThreadPoolExecutor(min(self._concurrency, len(texts)), thread_name_prefix="titan-embed") as pool:
            return list(pool.map(self._titan, texts))

    def _titan(self, text: str) -> list[float]:
        body: dict[str, Any] = {"inputText": text}
        if self.model == TITAN_V2:
            body |= {"dimensions": self.dimensions, "normalize": True}
        answer, tokens, started = self._invoke(body)
        if tokens is None:
            tokens = answer.get("inputTextTokenCount")
        found = answer.get("embedding")
        vectors = [found] if isinstance(found, list) else []
        self._check(vectors, 1)
        self._record(tokens, 1, started)
        return [float(v) for v in vectors[0]]

    def _cohere(self, texts: list[str], input_type: str) -> list[list[float]]:
        answer, tokens, started = self._invoke({"texts": texts, "input_type": input_type, "truncate": "NONE"})
        vectors = answer.get("embeddings")
        if isinstance(vectors, dict):  # asked by type
            vectors = vectors.get("float")
        vectors = vectors if isinstance(vectors, list) else []
        self._check(vectors, len(texts))
        self._record(tokens, len(texts), started)
        return [[float(v) for v in vector] for vector in vectors]

    def _invoke(self, body: dict[str, Any]) -> tuple[dict[str, Any], int | None, float]:
        from agentvm.adapters.llm.bedrock import translate_error

        started = time.monotonic()
        try:
            response = self._client.invoke_model(
                modelId=self.model,
                body=json.dumps(body),
                contentType="application/json",
                accept="application/json",
            )
            answer = json.loads(response["body"].read())
        except Exception as exc:
            raise translate_error(exc) from None
        headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        counted = headers.get(_TOKEN_HEADER)
        return answer, int(counted) if counted is not None and str(counted).isdigit() else None, started

    def _check(self, vectors: list[Any], expected: int) -> None:
        if len(vectors) != expected or any(len(v) != self.dimensions for v in vectors):
            raise ProviderRejected(
                f"bedrock: {len(vectors)} vectors of {self.model} for {expected} texts, "
                f"expected {self.dimensions} values each"
            )

    def _record(self, tokens: object, texts: int, started: float) -> None:
        if self._on_usage is None:
            return
        self._on_usage(
            EmbeddingCall(
                model=f"bedrock/{self.model}",
                input_tokens=tokens if isinstance(tokens, int) else 0,
                texts=texts,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        )


__all__ = ["BEDROCK_MODELS", "COHERE_MAX_TEXTS", "TITAN_V1", "TITAN_V2", "BedrockEmbedder"]
