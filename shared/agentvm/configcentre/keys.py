"""The settings tree of the config centre: every key, its type, its default, who may set it.

A key is dotted (``llm.defaultModel``) and maps onto a field of ``agentvm.config.Settings``, which
gives its built-in default and its environment variable. Every key here applies without a restart
(``ConfigCentre``); settings read only at start (ports, table names, slot counts...) stay in the
environment and are not part of the tree.

* ``tenant``: a tenant's admin may set it for the tenant (it beats the server's value for that
  tenant's turns); otherwise only a platform admin may set it, for the whole server.
* ``secret``: write-only: shown as ``"********"`` when set, never returned, logged or audited,
  and stored sealed (``configcentre.sealing``).
* ``platform``: the platform's own business (its markup and prices, its providers' keys and
  URLs): shown to platform admins only. A tenant's admin sees every other setting's effective
  value (what shapes its turns), and sets the ``tenant`` ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from agentvm.errors import InvalidConfig
from agentvm.observability.pricing import PriceTable

MASK = "********"
MODEL_KEYS = ("llm.defaultModel", "compaction.model", "sessions.titleModel", "embeddings.model")
NO_EMBEDDINGS = ("echo", "anthropic")  # providers with no embedding models  # provider/model values


@dataclass(frozen=True)
class Key:
    name: str
    field: str  # the Settings field (its default, its environment variable)
    type: Any  # a type pydantic validates values against (strict)
    description: str
    tenant: bool = False
    secret: bool = False
    platform: bool = False
    env: str | None = None  # the environment variable, when not AVM_<FIELD>

    @property
    def env_name(self) -> str:
        return self.env or f"AVM_{self.field.upper()}"

    def validate(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            return TypeAdapter(self.type).validate_python(value, strict=True)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InvalidConfig(f"{self.name}: {err['msg']}", key=self.name) from None


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "llm.defaultModel",
            "default_model",
            str,  # the centre checks that its provider exists
            "the model of images that name none: provider/model",
            tenant=True,
        ),
        Key("llm.maxOutputTokens", "max_output_tokens", int, "output tokens per model call", tenant=True),
        Key(
            "llm.promptCaching",
            "prompt_caching",
            bool,
            "mark each turn's stable prefix (tools, system prompt, conversation) for the provider's "
            "prompt cache; false sends no breakpoints",
            tenant=True,
        ),
        Key("llm.timeoutS", "provider_timeout_s", float, "seconds a provider call may take"),
        Key(
            "llm.anthropic.apiKey",
            "anthropic_api_key",
            str,
            "Anthropic API key",
            secret=True,
            platform=True,
            env="ANTHROPIC_API_KEY",
        ),
        Key(
            "llm.anthropic.baseUrl",
            "anthropic_base_url",
            str,
            "Anthropic API base URL",
            platform=True,
            env="ANTHROPIC_BASE_URL",
        ),
        Key(
            "llm.openai.apiKey",
            "openai_api_key",
            str,
            "OpenAI API key",
            secret=True,
            platform=True,
            env="OPENAI_API_KEY",
        ),
        Key(
            "llm.openai.baseUrl",
            "openai_base_url",
            str,
            "OpenAI API base URL",
            platform=True,
            env="OPENAI_BASE_URL",
        ),
        Key(
            "turns.deadlineS",
            "turn_deadline_s",
            float,
            "seconds a whole turn may take (0 = none)",
            tenant=True,
        ),
        Key("turns.historyWindow", "history_window", int, "messages a turn reads"),
        Key(
            "turns.historyWindowStep",
            "history_window_step",
            int,
            "messages the window's start moves by at once (0 = slides by every message)",
        ),
        Key(
            "turns.replyCache",
            "reply_cache",
            bool,
            "answer the common first questions of images that opt in (replyCache) from their "
            "reply cache; false: no turn reads or writes it",
            tenant=True,
        ),
        Key(
            "compaction.thresholdTokens",
            "compaction_threshold_tokens",
            int,
            "estimated context tokens past which older history is summarised (0 = never)",
            tenant=True,
        ),
        Key(
            "compaction.model",
            "compaction_model",
            str,
            "the model that summarises (provider/model; unset = the image's model)",
            tenant=True,
        ),
        Key(
            "billing.markup",
            "billing_markup",
            float,
            "the charge is the list-price cost times this",
            platform=True,
        ),
        Key(
            "billing.prices",
            "billing_prices",
            PriceTable,
            "per-model prices over the list prices, USD per million tokens: "
            '{"provider/model": {"input", "output", "cacheRead", "cacheWrite"}}',
            platform=True,
        ),
        Key(
            "streaming.cadence",
            "stream_cadence",
            Literal["live", "economy"],
            "batched connections' text cadence when neither they (?cadence=) nor the image name one: "
            "live (text every 250 ms) or economy (every 2 s, fewer billed WebSocket messages)",
            tenant=True,
        ),
        Key(
            "sessions.autoTitle",
            "auto_title",
            bool,
            "name a session after its first turn with sessions.titleModel (billed as usage kind title)",
            tenant=True,
        ),
        Key(
            "embeddings.model",
            "embeddings_model",
            str,
            "the model that embeds knowledge for search (provider/model, e.g. "
            "openai/text-embedding-3-small; unset = search on words alone); a change needs a re-index",
            tenant=True,
        ),
        Key(
            "embeddings.dimensions",
            "embeddings_dimensions",
            int,
            "the length of the embedding vectors (unset = the model's own); a change needs a re-index",
            tenant=True,
        ),
        Key(
            "sessions.titleModel",
            "title_model",
            str,
            "the model that names sessions (provider/model; unset = the image's model)",
            tenant=True,
        ),
    )
}

# Bounds beyond the type (checked after it), so an error names the key and the rule.
BOUNDS: dict[str, tuple[float, float]] = {
    "llm.maxOutputTokens": (1, 200_000),
    "llm.timeoutS": (1, 900),
    "turns.deadlineS": (0, 86_400),
    "turns.historyWindow": (2, 10_000),
    "turns.historyWindowStep": (0, 10_000),
    "compaction.thresholdTokens": (0, 10_000_000),
    "billing.markup": (0, 100),
    "embeddings.dimensions": (1, 8192),
}


def key(name: str) -> Key:
    found = KEYS.get(name)
    if found is None:
        raise InvalidConfig(f"{name}: unknown setting (known: {', '.join(KEYS)})", key=name)
    return found


def check(name: str, value: Any) -> Any:
    """``value`` as stored for ``name``; ``InvalidConfig`` naming the key when it is not valid."""
    k = key(name)
    if isinstance(value, bool) and k.type is not bool:
        raise InvalidConfig(
            f"{name}: must be a {getattr(k.type, '__name__', 'value')}, not a boolean", key=name
        )
    if k.type is float and isinstance(value, int):
        value = float(value)
    checked = k.validate(value)
    if checked is None:
        return None
    bounds = BOUNDS.get(name)
    if bounds is not None and not bounds[0] <= checked <= bounds[1]:
        raise InvalidConfig(f"{name}: must be between {bounds[0]:g} and {bounds[1]:g}", key=name)
    if isinstance(checked, str):
        if not checked.strip() or len(checked) > 2000:
            raise InvalidConfig(f"{name}: must be 1-2000 characters", key=name)
        if name.endswith("baseUrl") and not checked.startswith(("http://", "https://")):
            raise InvalidConfig(f"{name}: must be an http:// or https:// URL", key=name)
        if name in MODEL_KEYS and "/" not in checked:
            raise InvalidConfig(f"{name}: must be provider/model, e.g. anthropic/claude-haiku-4-5", key=name)
        if name == "embeddings.model" and checked.partition("/")[0] in NO_EMBEDDINGS:
            raise InvalidConfig(
                f"{name}: {checked.partition('/')[0]} has no embedding models "
                "(openai, bedrock or an OpenAI-compatible server do)",
                key=name,
            )
    return checked


__all__ = ["KEYS", "MASK", "MODEL_KEYS", "Key", "check", "key"]
