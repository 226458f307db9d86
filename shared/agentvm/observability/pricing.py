"""What tokens cost and what to charge for them: a price per model, and the platform's markup.

**Where list prices come from: genai-prices** (pydantic's ``genai-prices`` on PyPI, MIT,
https://github.com/pydantic/genai-prices). Chosen over ``tokencost`` and litellm's price JSON
because it is maintained against the providers' pricing pages with per-provider model matching
(dated snapshots, Bedrock's ``us.``/``global.`` inference profiles and their regional premium),
carries cache-read and cache-write prices as first-class fields, is typed, and ships its data in
the wheel. We read **only the bundled data** (``genai_prices.data``, built into our own
``DataSnapshot``): its auto-updater (``UpdatePrices``, a background HTTP fetch) is never started,
so pricing never touches the network, at runtime or in tests. The library costs ~0.35 s to import
(1.6 MB of price data), so it is imported **lazily**, on the first price looked up by a usage
report, an export or ``/v1/usage/prices``; never on the turn path (the dashboards' estimate,
``estimate_price``, reads the small ``DASHBOARD_PRICES`` instead, which a test keeps equal to the
library). Prices change with a new library release: ``pricesAsOf`` names it.

**Matching a usage record's model** (``provider/name`` as the turn resolved it) in the library:
``anthropic/...`` is looked up among Anthropic's models, ``openai/...`` among OpenAI's, and
``bedrock/...`` (``anthropic.claude-...-v1:0``, ``us.anthropic...``) among AWS Bedrock's; a
trailing ``-latest`` is dropped. Any other provider (echo, scripted, an OpenAI-compatible
server) and any name the library does not know is **unpriced**: its tokens are counted in
``unpricedTokens`` and cost nothing, so a report never hides that its total is incomplete. Tiered
(long-context) prices are taken at their base tier; the prices are the library's current ones.
An embedding model (``embed`` in its name) the library prices by input alone has output at 0:
genai-prices 0.2.3 knows OpenAI's text-embedding-3-small/-large and ada-002 and Bedrock's Titan
Text Embeddings v1 and v2, not Cohere Embed v3 on Bedrock (unpriced unless overridden).

**Overrides win.** The config centre's ``billing.prices`` (docs/usage.md, "Prices") gives a model
its price (a negotiated rate, a model the library does not know, an OpenAI-compatible server);
an override is matched as before the library is asked: the exact key, or a name of the same
provider followed by a snapshot date or ``-latest``, or a Bedrock Anthropic id as Anthropic's.

**Cost, charge and what caching saved.** Cost = (input - cache reads - cache writes) x input price
+ cache reads x cacheRead + cache writes x cacheWrite + output x output price, per million. Charge
= cost x the markup (``billing.markup``, default 1.05). ``cacheSavings`` = (cache reads x (input -
cacheRead) - cache writes x (cacheWrite - input)) per million, x the markup: how much less the
charge is than the same tokens uncached (negative when writes cost more than reads saved).
``replyCacheSavings`` = (saved input x input + saved output x output) per million, x the markup:
what the reply cache's hits would have been charged had the model been called again, their
``savedInputTokens`` / ``savedOutputTokens`` (the tokens of the call that wrote each reply) at the
hit's model's input and output prices (the cache-read and -write prices aside: the writing call's
cache split is not kept; a model with no price saves 0, as its tokens cost 0). All are
computed exactly (decimals) per sum and rounded to micro-dollars (6 decimals) only when shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from collections.abc import Mapping

    from genai_prices.data_snapshot import DataSnapshot

    from agentvm.observability.usage import Sums
    from agentvm.ports import UsageCell

PRICE_LIBRARY = "genai-prices"
CURRENCY = "USD"
DEFAULT_MARKUP = 1.05
_MILLION = Decimal(1_000_000)
_MICRO = Decimal("0.000001")
# Our provider -> the library's provider id. Other providers are priced by override only.
LIBRARY_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "bedrock": "aws"}

# The models ``/v1/usage/prices`` lists (with any overridden ones), priced by the library.
LISTED_MODELS = (
    "anthropic/claude-opus-4-6",
    "anthropic/claude-opus-4-5",
    "anthropic/claude-opus-4-1",
    "anthropic/claude-sonnet-4-6",
    "anthropic/claude-sonnet-4-5",
    "anthropic/claude-sonnet-4",
    "anthropic/claude-haiku-4-5",
    "anthropic/claude-3-5-haiku",
    "anthropic/claude-3-haiku",
    "openai/gpt-5",
    "openai/gpt-5-mini",
    "openai/gpt-5-nano",
    "openai/gpt-4.1",
    "openai/gpt-4.1-mini",
    "openai/gpt-4o",
    "openai/gpt-4o-mini",
    "openai/o4-mini",
    "bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0",
    "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0",
    "bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
)

# The dashboards' per-turn estimate (input, output USD per million tokens; metrics.py), read on
# the turn path, where the library is too heavy to import. Not the bill: the bill is priced by
# the library. tests/unit/observability/test_pricing.py keeps these equal to the library's.
DASHBOARD_PRICES: dict[str, tuple[float, float]] = {
    "anthropic/claude-opus-4-6": (5.0, 25.0),
    "anthropic/claude-opus-4-5": (5.0, 25.0),
    "anthropic/claude-opus-4-1": (15.0, 75.0),
    "anthropic/claude-sonnet-4-6": (3.0, 15.0),
    "anthropic/claude-sonnet-4-5": (3.0, 15.0),
    "anthropic/claude-sonnet-4": (3.0, 15.0),
    "anthropic/claude-haiku-5-5": (0.1, 0.5),  # the cheap sibling side calls run on (agent/side_model.py)
    "anthropic/claude-haiku-4-5": (1.0, 5.0),
    "anthropic/claude-3-5-haiku": (0.8, 4.0),
    "anthropic/claude-3-haiku": (0.25, 1.25),
    "openai/gpt-5": (1.25, 10.0),
    "openai/gpt-5-mini": (0.25, 2.0),
    "openai/gpt-5-nano": (0.05, 0.4),
    "openai/gpt-4.1": (2.0, 8.0),
    "openai/gpt-4.1-mini": (0.4, 1.6),
    "openai/gpt-4o": (2.5, 10.0),
    "openai/gpt-4o-mini": (0.15, 0.6),
    "openai/o4-mini": (1.1, 4.4),
}


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal

    def to_wire(self) -> dict[str, float]:
        return {
            "input": float(self.input),
            "output": float(self.output),
            "cacheRead": float(self.cache_read),
            "cacheWrite": float(self.cache_write),
        }


class PriceSetting(BaseModel):
    """One model's price in ``billing.prices`` (USD per million tokens); cache prices default to
    the input price (no discount assumed)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, le=10_000)
    output: float = Field(ge=0, le=10_000)
    cacheRead: float | None = Field(default=None, ge=0, le=10_000)
    cacheWrite: float | None = Field(default=None, ge=0, le=10_000)


def _plain(prices: dict[str, PriceSetting]) -> dict[str, dict[str, float]]:
    for model in prices:
        provider, sep, name = model.partition("/")
        if not (sep and provider and name):
            raise ValueError(f"{model!r}: name models as provider/model")
    return {model: p.model_dump(exclude_none=True) for model, p in prices.items()}


# The config centre's type of ``billing.prices``: {"provider/model": {"input", "output", ...}}.
PriceTable = Annotated[dict[str, PriceSetting], AfterValidator(_plain)]


def price_of(setting: Mapping[str, float]) -> ModelPrice:
    input_ = Decimal(str(setting["input"]))
    return ModelPrice(
        input_,
        Decimal(str(setting["output"])),
        Decimal(str(setting.get("cacheRead", setting["input"]))),
        Decimal(str(setting.get("cacheWrite", setting["input"]))),
    )


T = TypeVar("T")
_DATE = re.compile(r"\d{8}|\d{4}-\d{2}-\d{2}|latest")


def _dated(name: str, known: str) -> bool:
    """``name`` is ``known`` with a snapshot date (``-20251001``, ``-2024-08-06``) or ``-latest``;
    any other suffix is another model (``claude-opus-4-7`` is not ``claude-opus-4``)."""
    return name.startswith(known + "-") and _DATE.fullmatch(name[len(known) + 1 :]) is not None


def _bedrock_as_anthropic(name: str) -> str | None:
    """``us.anthropic.claude-haiku-4-5-20251001-v1:0`` -> ``claude-haiku-4-5-20251001``."""
    vendor = name.split(".", 1)[1] if name.split(".", 1)[0] in ("us", "eu", "apac", "global") else name
    if not vendor.startswith("anthropic."):
        return None
    return vendor.removeprefix("anthropic.").split("-v", 1)[0].split(":", 1)[0]


def match_in(table: Mapping[str, T], model: str) -> T | None:
    """``model``'s entry in a table keyed ``provider/name``: the exact key, else a key of the same
    provider that the name extends with a date or ``-latest`` (Bedrock's Anthropic ids as
    Anthropic's)."""
    if model in table:
        return table[model]
    provider, _, name = model.partition("/")
    if provider == "bedrock" and (anthropic := _bedrock_as_anthropic(name)) is not None:
        if (entry := match_in(table, f"bedrock/{anthropic}")) is not None:
            return entry
        provider, name = "anthropic", anthropic
    for key, entry in table.items():
        known_provider, _, known = key.partition("/")
        if known_provider == provider and (name == known or _dated(name, known)):
            return entry
    return None


@cache
def _library() -> DataSnapshot:
    """The library's bundled price data, never its auto-updated copy (no network)."""
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


@cache
def prices_as_of() -> str:
    """The library release whose bundled data prices the models (``genai-prices 0.2.3``)."""
    from importlib.metadata import version

    return f"{PRICE_LIBRARY} {version(PRICE_LIBRARY)}"


def _base(value: Any) -> Decimal | None:
    """A library price in USD per million tokens: a decimal, or a tiered price's base tier."""
    if value is None:
        return None
    return Decimal(value.base) if hasattr(value, "base") else Decimal(value)


@cache
def library_price(model: str) -> ModelPrice | None:
    """The library's price of ``provider/name`` (None: a provider or model it does not price).
    A missing cache price is the input price (OpenAI charges no premium for its cache writes)."""
    from datetime import UTC, datetime

    provider, _, name = model.partition("/")
    library_provider = LIBRARY_PROVIDERS.get(provider)
    if library_provider is None or not name:
        return None
    name = name.removesuffix("-latest")
    try:
        _, info = _library().find_provider_model(name, None, library_provider, None)
    except LookupError:
        return None
    found = info.get_prices(datetime.now(UTC))
    input_ = _base(found.input_mtok)
    output = _base(found.output_mtok)
    if output is None and "embed" in name:  # an embedding model: input tokens only, no output
        output = Decimal(0)
    if input_ is None or output is None:
        return None
    read = _base(found.cache_read_mtok)
    write = _base(found.cache_write_mtok)
    return ModelPrice(input_, output, input_ if read is None else read, input_ if write is None else write)


@dataclass
class Pricing:
    """The overrides (``billing.prices``), the library's prices for every other model, and the
    markup."""

    overrides: dict[str, ModelPrice] = field(default_factory=dict)
    markup: Decimal = Decimal(str(DEFAULT_MARKUP))
    _found: dict[str, ModelPrice | None] = field(default_factory=dict)

    @classmethod
    def of(cls, markup: float | None, overrides: Mapping[str, Mapping[str, float]] | None) -> Pricing:
        table = {model: price_of(p) for model, p in (overrides or {}).items()}
        chosen = DEFAULT_MARKUP if markup is None else markup
        return cls(table, Decimal(str(chosen)))

    @property
    def overridden(self) -> frozenset[str]:
        return frozenset(self.overrides)

    def price(self, model: str) -> ModelPrice | None:
        if model not in self._found:
            override = match_in(self.overrides, model)
            self._found[model] = override if override is not None else library_price(model)
        return self._found[model]

    def cost(self, cell: UsageCell) -> Decimal | None:
        """What the cell's tokens cost at list price (None: its model has no price)."""
        price = self.price(cell.model)
        if price is None:
            return None
        uncached = max(cell.input_tokens - cell.cache_read_tokens - cell.cache_write_tokens, 0)
        total = (
            uncached * price.input
            + cell.cache_read_tokens * price.cache_read
            + cell.cache_write_tokens * price.cache_write
            + cell.output_tokens * price.output
        )
        return total / _MILLION

    def cache_savings(self, model: str, cache_read_tokens: int, cache_write_tokens: int) -> Decimal | None:
        """What cache reads saved less what cache writes cost extra, at list price (None: the
        model has no price)."""
        price = self.price(model)
        if price is None:
            return None
        saved = cache_read_tokens * (price.input - price.cache_read)
        premium = cache_write_tokens * (price.cache_write - price.input)
        return (saved - premium) / _MILLION

    def charged_cache_savings(
        self, model: str, cache_read_tokens: int, cache_write_tokens: int
    ) -> Decimal | None:
        """The cache savings at the charged prices (x the markup); None: the model has no price."""
        savings = self.cache_savings(model, cache_read_tokens, cache_write_tokens)
        return None if savings is None else savings * self.markup

    def reply_cache_savings(
        self, model: str, saved_input_tokens: int, saved_output_tokens: int
    ) -> Decimal | None:
        """What reply-cache hits saved, at list price: their saved tokens at the model's input
        and output prices (None: the model has no price)."""
        price = self.price(model)
        if price is None:
            return None
        return (saved_input_tokens * price.input + saved_output_tokens * price.output) / _MILLION

    def charged_reply_cache_savings(
        self, model: str, saved_input_tokens: int, saved_output_tokens: int
    ) -> Decimal | None:
        """The reply cache's savings at the charged prices (x the markup); None: no price."""
        savings = self.reply_cache_savings(model, saved_input_tokens, saved_output_tokens)
        return None if savings is None else savings * self.markup

    def add(self, sums: Sums, cell: UsageCell) -> None:
        """Add the cell's cost, cache savings and reply-cache savings (or its unpriced tokens) to
        a row's sums."""
        cost = self.cost(cell)
        extra = sums.extra
        extra.setdefault("cost", Decimal(0))
        extra.setdefault("cacheSavings", Decimal(0))
        extra.setdefault("unpricedTokens", 0)
        extra.setdefault("replyCacheSavings", Decimal(0))
        if cost is None:
            extra["unpricedTokens"] += cell.input_tokens + cell.output_tokens
        else:
            extra["cost"] += cost
            saved = self.cache_savings(cell.model, cell.cache_read_tokens, cell.cache_write_tokens)
            extra["cacheSavings"] += saved or Decimal(0)
            replies = self.reply_cache_savings(cell.model, cell.saved_input_tokens, cell.saved_output_tokens)
            extra["replyCacheSavings"] += replies or Decimal(0)

    def finish(self, sums: Sums, *, with_cost: bool = True) -> None:
        """The row's charge and cache savings at the charged prices (and, for the platform, its
        cost), as shown: dollars rounded to micro-dollars. Tenants are shown the charge only: the
        cost and the markup are the platform's business."""
        cost: Decimal = sums.extra.get("cost", Decimal(0))
        savings: Decimal = sums.extra.get("cacheSavings", Decimal(0))
        replies: Decimal = sums.extra.get("replyCacheSavings", Decimal(0))
        shown: dict[str, Any] = {"cost": micro(cost)} if with_cost else {}
        sums.extra = {
            **shown,
            "charge": micro(cost * self.markup),
            "cacheSavings": micro(savings * self.markup),
            "unpricedTokens": sums.extra.get("unpricedTokens", 0),
            "replyCacheSavings": micro(replies * self.markup),
        }

    def table(self) -> dict[str, ModelPrice]:
        """The listed models' prices (library) with every override laid over."""
        out = {model: price for model in LISTED_MODELS if (price := library_price(model)) is not None}
        out.update(self.overrides)
        return dict(sorted(out.items()))

    def to_wire(self, *, with_cost: bool = True) -> dict[str, Any]:
        """The price table: list prices and the markup (platform), or the prices charged (tenants)."""
        table = self.table()
        if with_cost:
            return {
                "currency": CURRENCY,
                "markup": float(self.markup),
                "pricesAsOf": prices_as_of(),
                "prices": {model: price.to_wire() for model, price in table.items()},
                "overridden": sorted(self.overrides),
            }
        charged = {
            model: {name: micro(Decimal(str(v)) * self.markup) for name, v in price.to_wire().items()}
            for model, price in table.items()
        }
        return {"currency": CURRENCY, "pricesAsOf": prices_as_of(), "prices": charged}


def list_price(model: str) -> ModelPrice | None:
    """A model's list price (the library's, no overrides); None: unknown. Imports the library."""
    return library_price(model)


def estimate_price(model: str) -> tuple[float, float] | None:
    """A model's (input, output) price for the dashboards' estimate, without importing the
    library (the turn path): ``DASHBOARD_PRICES``, matched as overrides are."""
    return match_in(DASHBOARD_PRICES, model)


def micro(amount: Decimal) -> float:
    return float(amount.quantize(_MICRO, rounding=ROUND_HALF_EVEN))


__all__ = [
    "CURRENCY",
    "DASHBOARD_PRICES",
    "DEFAULT_MARKUP",
    "LISTED_MODELS",
    "PRICE_LIBRARY",
    "ModelPrice",
    "PriceSetting",
    "PriceTable",
    "Pricing",
    "estimate_price",
    "list_price",
    "micro",
    "price_of",
    "prices_as_of",
]
