"""Which embedding model a tenant embeds with, and ``embedder_for``: the embedder the host calls.

The choice is ``embeddings.model`` (``provider/model``) and ``embeddings.dimensions`` (None: the
model's own size): the server's from ``AVM_EMBEDDINGS_MODEL`` / ``AVM_EMBEDDINGS_DIMENSIONS``,
a tenant's through the config centre (both keys are tenant-settable). Providers and their keys
are the chat models' (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, ``AVM_BEDROCK_REGION``,
``AVM_OPENAI_COMPATIBLE``): ``openai/text-embedding-3-small``, ``bedrock/amazon.titan-embed-text-v2:0``,
``bedrock/cohere.embed-english-v3``, or ``<compatible name>/<model>`` (dimensions then required).
No model chosen: no embedder (knowledge search runs on words alone).

The SDK clients are made once per (provider, key, URL) and shared: an embedder is cheap to make
per tenant and per job, so each carries its own ``on_usage`` (who pays for its tokens).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from agentvm.adapters.embeddings.openai import OPENAI_EMBEDDING_MODELS, OpenAIEmbedder
from agentvm.configcentre.keys import KEYS
from agentvm.errors import BadRequest, InvalidConfig
from agentvm.llm import ModelRef

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentvm.config import Settings
    from agentvm.llm import EmbeddingCall
    from agentvm.ports import Embedder

_PROVIDER_KEYS = ("llm.timeoutS", "llm.openai.apiKey", "llm.openai.baseUrl")
MODEL_KEY = "embeddings.model"
DIMENSIONS_KEY = "embeddings.dimensions"


@dataclass(frozen=True, slots=True)
class EmbeddingsChoice:
    model: str | None  # provider/model; None: no embeddings
    dimensions: int | None = None  # None: the model's own size

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbeddingsChoice:
        """The server's choice (``AVM_EMBEDDINGS_MODEL``, ``AVM_EMBEDDINGS_DIMENSIONS``)."""
        return cls(settings.embeddings_model, settings.embeddings_dimensions)

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, tuple[Any, str]]) -> EmbeddingsChoice:
        """A tenant's choice from ``await ConfigCentre.resolved(tenant_id)`` (its value, else the
        server's, else the environment's)."""
        return cls(resolved[MODEL_KEY][0], resolved[DIMENSIONS_KEY][0])


def embedder_for(
    settings: Settings,
    choice: EmbeddingsChoice | None = None,
    *,
    on_usage: Callable[[EmbeddingCall], None] | None = None,
) -> Embedder | None:
    """The embedder of ``choice`` (default: the server's), through ``settings``' provider keys;
    None when no model is chosen. ``on_usage`` is called with each provider request's tokens, to
    bill them (``agent.side_calls.bill_embeddings``), from the thread that made the request (Titan's
    run on a small pool: ``list.append`` is safe).

    Raises ``InvalidConfig`` (naming the key) when the model's provider is not configured, the
    model is unknown to this server and no dimensions are given, or the dimensions do not fit it."""
    choice = choice or EmbeddingsChoice.from_settings(settings)
    if not choice.model:
        return None
    try:
        ref = ModelRef.parse(choice.model)
    except BadRequest as exc:
        raise InvalidConfig(f"{MODEL_KEY}: {exc.message}", key=MODEL_KEY) from None
    provider, name, dimensions = ref.provider, ref.name, choice.dimensions
    timeout, attempts = settings.provider_timeout_s, max(settings.provider_max_attempts, 1)
    if provider == "bedrock":
        region = settings.bedrock_region or settings.aws_region  # a Lambda's own region
        if not region:
            raise _not_configured(provider, "set AVM_BEDROCK_REGION")
        from agentvm.adapters.embeddings.bedrock import BEDROCK_MODELS, BedrockEmbedder

        sizes = BEDROCK_MODELS.get(name)
        if sizes is None:
            names = ", ".join(f"bedrock/{m}" for m in BEDROCK_MODELS)
            raise InvalidConfig(
                f"{MODEL_KEY}: {choice.model} is not a Bedrock embedding model ({names})", key=MODEL_KEY
            )
        if dimensions is not None and dimensions not in sizes:
            shown = ", ".join(str(s) for s in sorted(sizes))
            raise InvalidConfig(
                f"{DIMENSIONS_KEY}: {choice.model} gives {shown}, not {dimensions}", key=DIMENSIONS_KEY
            )
        client = _bedrock_client(region, timeout, attempts)
        return BedrockEmbedder(name, region=region, dimensions=dimensions, on_usage=on_usage, client=client)
    if provider == "openai":
        if settings.openai_api_key is None:
            raise _not_configured(provider, "set OPENAI_API_KEY")
        key, base_url = settings.openai_api_key.get_secret_value(), settings.openai_base_url
        known = OPENAI_EMBEDDING_MODELS.get(name)
        if known is None:
            raise InvalidConfig(
                f"{MODEL_KEY}: {choice.model} is not an OpenAI embedding model "
                f"({', '.join(OPENAI_EMBEDDING_MODELS)})",
                key=MODEL_KEY,
            )
        size, shortens = known
        if dimensions is not None and (dimensions > size or (not shortens and dimensions != size)):
            allowed = f"1 to {size}" if shortens else str(size)
            raise InvalidConfig(
                f"{DIMENSIONS_KEY}: {choice.model} gives {allowed}, not {dimensions}", key=DIMENSIONS_KEY
            )
        native: int | None = size
    else:
        compat = settings.openai_compatible.get(provider)
        if compat is None:
            raise InvalidConfig(
                f"{MODEL_KEY}: unknown embeddings provider {provider!r} (openai, bedrock, or an "
                "AVM_OPENAI_COMPATIBLE name)",
                key=MODEL_KEY,
            )
        if dimensions is None:
            raise InvalidConfig(
                f"{DIMENSIONS_KEY}: say how many dimensions {choice.model} gives "
                "(its server is not known here)",
                key=DIMENSIONS_KEY,
            )
        key = compat.api_key.get_secret_value() if compat.api_key else "unused"
        base_url, native = compat.base_url, None
    return OpenAIEmbedder(
        name,
        api_key=key,
        base_url=base_url,
        dimensions=dimensions,
        native_dimensions=native,
        provider=provider,
        on_usage=on_usage,
        client=_openai_client(key, base_url, timeout, attempts - 1),
    )


def tenant_embedder(
    settings: Settings,
    resolved: Mapping[str, tuple[Any, str]],
    *,
    on_usage: Callable[[EmbeddingCall], None] | None = None,
) -> Embedder | None:
    """The embedder of a tenant's turns and knowledge, from ``await ConfigCentre.resolved(tenant_id)``:
    its ``embeddings.*`` choice (else the server's), through the provider keys, URLs and timeout the
    server's settings file or ``/v1/config`` set over ``settings`` (as the chat models get them)."""
    return embedder_for(
        with_provider_settings(settings, resolved),
        EmbeddingsChoice.from_resolved(resolved),
        on_usage=on_usage,
    )


def with_provider_settings(settings: Settings, resolved: Mapping[str, tuple[Any, str]]) -> Settings:
    """``settings`` with the OpenAI key and URL and the provider timeout that the settings file or
    the API set (the config centre's layers over the environment)."""
    updates: dict[str, Any] = {}
    for name in _PROVIDER_KEYS:
        value, source = resolved.get(name, (None, "default"))
        if source in ("file", "server") and value is not None:
            field = KEYS[name].field
            updates[field] = SecretStr(value) if field.endswith("api_key") else value
    return settings.model_copy(update=updates) if updates else settings


def _not_configured(provider: str, hint: str) -> InvalidConfig:
    return InvalidConfig(f"{MODEL_KEY}: provider {provider!r} is not configured: {hint}", key=MODEL_KEY)


_clients: dict[tuple[Any, ...], Any] = {}
_clients_lock = threading.Lock()


def _openai_client(key: str, base_url: str | None, timeout: float, retries: int) -> Any:
    with _clients_lock:
        found = _clients.get(("openai", key, base_url, timeout, retries))
        if found is None:
            import openai

            found = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=retries)
            _clients[("openai", key, base_url, timeout, retries)] = found
        return found


def _bedrock_client(region: str, timeout: float, attempts: int) -> Any:
    # boto3 reads the endpoint from the environment when it makes the client (tests: the fake)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or os.environ.get("AWS_ENDPOINT_URL")
    with _clients_lock:
        found = _clients.get(("bedrock", region, timeout, attempts, endpoint))
        if found is None:
            import boto3
            from botocore.config import Config

            config = Config(
                read_timeout=timeout,
                connect_timeout=min(timeout, 10.0),
                retries={"total_max_attempts": attempts, "mode": "standard"},
                max_pool_connections=10,
            )
            found = boto3.client("bedrock-runtime", region_name=region, config=config)
            _clients[("bedrock", region, timeout, attempts, endpoint)] = found
        return found


__all__ = [
    "DIMENSIONS_KEY",
    "MODEL_KEY",
    "EmbeddingsChoice",
    "embedder_for",
    "tenant_embedder",
    "with_provider_settings",
]
