"""OpenAI embeddings (``client.embeddings.create``), batched to the API's per-request limits.

One request carries at most ``max_inputs`` texts (OpenAI: 2,048) and an estimated
``max_request_tokens`` (OpenAI: 300,000 per request; the estimate, half a token per UTF-8 byte
plus one, is above the count of English prose and code, whose tokens run ~4 bytes). Text that
tokenises worse than that (punctuation soup) can still pass the limit: a batch the provider
refuses with a 400 is split in half and each half sent again, down to single texts, so the
limit is met and a bad text is found (its own 400 is raised). A text longer than the model's
input limit (8,192 tokens) is refused by the provider (``ProviderRejected``): cutting documents
into chunks is the indexer's work. Retries (429, 5xx, timeouts, connection errors,
with backoff and ``retry-after``) are the SDK's own, ``max_retries`` of them. Vectors come as
base64 float32 (the SDK's default, a quarter of the JSON), in input order.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from agentvm.adapters.llm.errors import (
    error_for_status,
    retry_after_seconds,
    safe_error_type,
    transport_errors,
)
from agentvm.errors import ProviderError, ProviderRejected, ProviderUnavailable
from agentvm.llm import EmbeddingCall

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

OPENAI_MAX_INPUTS = 2048
OPENAI_MAX_REQUEST_TOKENS = 300_000
# OpenAI's embedding models: their size, and whether ``dimensions`` may shorten them (ada-002 refuses it)
OPENAI_EMBEDDING_MODELS = {
    "text-embedding-3-small": (1536, True),
    "text-embedding-3-large": (3072, True),
    "text-embedding-ada-002": (1536, False),
}
_SHORTENS = ("text-embedding-3",)


def estimated_tokens(text: str) -> int:
    """An upper bound of ``text``'s tokens good enough to size requests (see the module docstring)."""
    return len(text.encode()) // 2 + 1


def batches(texts: Sequence[str], max_inputs: int, max_tokens: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` slices of ``texts``, each within both limits (a lone text may exceed
    ``max_tokens``: the provider then says so)."""
    start = 0
    while start < len(texts):
        end, tokens = start, 0
        while end < len(texts) and end - start < max_inputs:
            cost = estimated_tokens(texts[end])
            if end > start and tokens + cost > max_tokens:
                break
            tokens += cost
            end += 1
        yield start, end
        start = end


class BadInput(ProviderRejected):
    """The provider refused the request's input (HTTP 400): a batch of it is sent again in halves."""


class OpenAIEmbedder:
    """The ``Embedder`` of OpenAI's embedding models (or an OpenAI-compatible server's)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        dimensions: int | None = None,
        native_dimensions: int | None = None,
        provider: str = "openai",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        on_usage: Callable[[EmbeddingCall], None] | None = None,
        client: Any = None,
        max_inputs: int = OPENAI_MAX_INPUTS,
        max_request_tokens: int = OPENAI_MAX_REQUEST_TOKENS,
    ) -> None:
        if client is None:
            import openai

            client = openai.OpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
            )
        self._client = client
        self.model = model
        self.provider = provider
        self._send_dimensions = dimensions is not None and model.startswith(_SHORTENS)
        known = OPENAI_EMBEDDING_MODELS.get(model) if provider == "openai" else None
        size = dimensions or native_dimensions or (known[0] if known else None)
        if size is None:
            raise ValueError(f"say how many dimensions {provider}/{model} has")
        self.dimensions = size
        self._on_usage = on_usage
        self._max_inputs = max_inputs
        self._max_tokens = max_request_tokens

    def embed(self, texts: Sequence[str], *, purpose: Literal["document", "query"]) -> list[list[float]]:
        """One vector per text, in order (``purpose`` is not sent: OpenAI's models embed both alike)."""
        vectors: list[list[float]] = []
        for start, end in batches(texts, self._max_inputs, self._max_tokens):
            vectors += self._split_on_refusal(list(texts[start:end]))
        return vectors

    def _split_on_refusal(self, texts: list[str]) -> list[list[float]]:
        try:
            return self._request(texts)
        except BadInput:
            if len(texts) == 1:
                raise
        half = len(texts) // 2
        return self._split_on_refusal(texts[:half]) + self._split_on_refusal(texts[half:])

    def _request(self, texts: list[str]) -> list[list[float]]:
        # no encoding_format: the SDK then asks for base64 and decodes it (named, it would not decode)
        params: dict[str, Any] = {"model": self.model, "input": texts}
        if self._send_dimensions:
            params["dimensions"] = self.dimensions
        started = time.monotonic()
        try:
            response = self._client.embeddings.create(**params)
        except Exception as exc:
            raise self._translate(exc) from None
        ordered = sorted(response.data, key=lambda item: item.index)
        vectors = [list(item.embedding) for item in ordered]
        if len(vectors) != len(texts) or any(len(v) != self.dimensions for v in vectors):
            raise ProviderRejected(
                f"{self.provider}: {len(vectors)} vectors of {self.model} for {len(texts)} texts, "
                f"expected {self.dimensions} values each"
            )
        if self._on_usage is not None:
            tokens = response.usage.prompt_tokens if response.usage is not None else 0
            self._on_usage(
                EmbeddingCall(
                    model=f"{self.provider}/{self.model}",
                    input_tokens=tokens,
                    texts=len(texts),
                    duration_ms=int((time.monotonic() - started) * 1000),
                )
            )
        return vectors

    def _translate(self, exc: Exception) -> Exception:
        """A ProviderError for an SDK failure (messages never carry the key or the texts)."""
        import openai

        provider = self.provider
        if isinstance(exc, openai.APITimeoutError):
            return ProviderUnavailable(f"{provider}: embeddings request timed out")
        if isinstance(exc, (openai.APIConnectionError, *transport_errors())):
            return ProviderUnavailable(f"{provider}: connection failed ({type(exc).__name__})")
        if isinstance(exc, openai.APIStatusError):
            error_type = safe_error_type(exc.code) or safe_error_type(exc.type)
            if exc.status_code == 400:
                return BadInput(f"{provider}: request rejected (400 {error_type or 'bad_request'})")
            return error_for_status(
                provider, exc.status_code, error_type, retry_after_seconds(exc.response.headers)
            )
        if isinstance(exc, openai.APIError):
            return ProviderError(f"{provider}: embeddings failed ({type(exc).__name__})")
        return exc


__all__ = [
    "OPENAI_MAX_INPUTS",
    "BadInput",
    "OPENAI_MAX_REQUEST_TOKENS",
    "OpenAIEmbedder",
    "batches",
    "estimated_tokens",
]
