"""What tokens cost and what to charge for them: a price per model, and the platform's markup.

**The list prices** below are the providers' standard (pay-as-you-go, non-batch) prices in US
dollars per million tokens, as published on their pricing pages, taken on ``PRICES_AS_OF``:

* Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing: base input, output, "cache
  hits & refreshes" (``cacheRead``, 0.1 x input) and 5-minute cache writes (``cacheWrite``, 1.25 x
  input). Sonnet's long-context rate (over 200K input tokens) is not modelled.
* OpenAI, https://platform.openai.com/docs/pricing: input, output and "cached input"
  (``cacheRead``). OpenAI charges no premium for writing its cache and reports no cache writes, so
  ``cacheWrite`` is the input price.

The date is the date the figures were checked, not a promise: providers change prices. Override
any model (or add one: Bedrock, an OpenAI-compatible server, a negotiated rate) with the config
centre's ``billing.prices`` (docs/usage.md); overrides replace the list price of that model.

**Matching a usage record's model** (``provider/name`` as the turn resolved it): the exact key,
else a known name of the same provider followed by a snapshot date or ``-latest``
(``anthropic/claude-haiku-4-5-20251001`` is Haiku 4.5, ``openai/gpt-4o-mini-2024-07-18`` is
gpt-4o-mini); any other suffix is another model (``claude-opus-4-7`` is not Opus 4, whose price
is three times Opus 4.5's). Bedrock's Anthropic ids (``bedrock/us.anthropic.claude-...-v1:0``)
are priced as Anthropic's. A model that matches nothing is **unpriced**: its tokens are counted in
``unpricedTokens`` and cost nothing, so a report never hides that its total is incomplete (add
its price to ``billing.prices``).

**Cost and charge.** Cost = (input - cache reads - cache writes) x input price + cache reads x
cacheRead + cache writes x cacheWrite + output x output price, per million. Charge = cost x the
markup (``billing.markup``, default 1.05). Both are computed exactly (decimals) per sum and
rounded to micro-dollars (6 decimals) only when shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.observability.usage import Sums
    from agentvm.ports import UsageCell

PRICES_AS_OF = "2026-03-21"
CURRENCY = "USD"
DEFAULT_MARKUP = 1.05
_MILLION = Decimal(1_000_000)
_MICRO = Decimal("0.000001")


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


def _p(input_: str, output: str, cache_read: str, cache_write: str | None = None) -> ModelPrice:
    return ModelPrice(Decimal(input_), Decimal(output), Decimal(cache_read), Decimal(cache_write or input_))


LIST_PRICES: dict[str, ModelPrice] = {
    # Anthropic: input, output, cache hits, 5-minute cache writes
    "anthropic/claude-opus-4-6": _p("5", "25", "0.50", "6.25"),
    "anthropic/claude-opus-4-5": _p("5", "25", "0.50", "6.25"),
    "anthropic/claude-opus-4-1": _p("15", "75", "1.50", "18.75"),
    "anthropic/claude-opus-4": _p("15", "75", "1.50", "18.75"),
    "anthropic/claude-sonnet-4-6": _p("3", "15", "0.30", "3.75"),
    "anthropic/claude-sonnet-4-5": _p("3", "15", "0.30", "3.75"),
    "anthropic/claude-sonnet-4": _p("3", "15", "0.30", "3.75"),
    "anthropic/claude-3-7-sonnet": _p("3", "15", "0.30", "3.75"),
    "anthropic/claude-haiku-4-5": _p("1", "5", "0.10", "1.25"),
    "anthropic/claude-3-5-haiku": _p("0.80", "4", "0.08", "1"),
    "anthropic/claude-3-haiku": _p("0.25", "1.25", "0.03", "0.30"),
    # OpenAI: input, output, cached input (no cache-write premium)
    "openai/gpt-5": _p("1.25", "10", "0.125"),
    "openai/gpt-5-mini": _p("0.25", "2", "0.025"),
    "openai/gpt-5-nano": _p("0.05", "0.40", "0.005"),
    "openai/gpt-4.1": _p("2", "8", "0.50"),
    "openai/gpt-4.1-mini": _p("0.40", "1.60", "0.10"),
    "openai/gpt-4.1-nano": _p("0.10", "0.40", "0.025"),
    "openai/gpt-4o": _p("2.50", "10", "1.25"),
    "openai/gpt-4o-mini": _p("0.15", "0.60", "0.075"),
    "openai/o3": _p("2", "8", "0.50"),
    "openai/o4-mini": _p("1.10", "4.40", "0.275"),
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


@dataclass
class Pricing:
    """A price table (list prices with the overrides laid over) and the markup."""

    table: dict[str, ModelPrice] = field(default_factory=lambda: dict(LIST_PRICES))
    markup: Decimal = Decimal(str(DEFAULT_MARKUP))
    overridden: frozenset[str] = frozenset()
    _found: dict[str, ModelPrice | None] = field(default_factory=dict)

    @classmethod
    def of(cls, markup: float | None, overrides: Mapping[str, Mapping[str, float]] | None) -> Pricing:
        table = dict(LIST_PRICES)
        table.update({model: price_of(p) for model, p in (overrides or {}).items()})
        chosen = DEFAULT_MARKUP if markup is None else markup
        return cls(table, Decimal(str(chosen)), frozenset(overrides or {}))

    def price(self, model: str) -> ModelPrice | None:
        if model not in self._found:
            self._found[model] = self._match(model)
        return self._found[model]

    def _match(self, model: str) -> ModelPrice | None:
        if model in self.table:
            return self.table[model]
        provider, _, name = model.partition("/")
        if provider == "bedrock" and (anthropic := _bedrock_as_anthropic(name)) is not None:
            provider, name = "anthropic", anthropic
        for key, price in self.table.items():
            known_provider, _, known = key.partition("/")
            if known_provider == provider and (name == known or _dated(name, known)):
                return price
        return None

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

    def add(self, sums: Sums, cell: UsageCell) -> None:
        """Add the cell's cost (or its unpriced tokens) to a row's sums."""
        cost = self.cost(cell)
        extra = sums.extra
        extra.setdefault("cost", Decimal(0))
        extra.setdefault("unpricedTokens", 0)
        if cost is None:
            extra["unpricedTokens"] += cell.input_tokens + cell.output_tokens
        else:
            extra["cost"] += cost

    def finish(self, sums: Sums, *, with_cost: bool = True) -> None:
        """The row's charge (and, for the platform, its cost), as shown: dollars rounded to
        micro-dollars. Tenants are shown the charge only: the cost and the markup are the
        platform's business."""
        cost: Decimal = sums.extra.get("cost", Decimal(0))
        shown: dict[str, Any] = {"cost": micro(cost)} if with_cost else {}
        sums.extra = {
            **shown,
            "charge": micro(cost * self.markup),
            "unpricedTokens": sums.extra.get("unpricedTokens", 0),
        }

    def to_wire(self, *, with_cost: bool = True) -> dict[str, Any]:
        """The price table: list prices and the markup (platform), or the prices charged (tenants)."""
        if with_cost:
            prices = {model: price.to_wire() for model, price in sorted(self.table.items())}
            return {
                "currency": CURRENCY,
                "markup": float(self.markup),
                "pricesAsOf": PRICES_AS_OF,
                "prices": prices,
                "overridden": sorted(self.overridden),
            }
        charged = {
            model: {name: micro(Decimal(str(v)) * self.markup) for name, v in price.to_wire().items()}
            for model, price in sorted(self.table.items())
        }
        return {"currency": CURRENCY, "pricesAsOf": PRICES_AS_OF, "prices": charged}


_LIST = Pricing()


def list_price(model: str) -> ModelPrice | None:
    """A model's list price (no overrides), matched as billing matches it; None: unknown."""
    return _LIST.price(model)


def micro(amount: Decimal) -> float:
    return float(amount.quantize(_MICRO, rounding=ROUND_HALF_EVEN))


__all__ = [
    "CURRENCY",
    "DEFAULT_MARKUP",
    "LIST_PRICES",
    "PRICES_AS_OF",
    "ModelPrice",
    "PriceSetting",
    "PriceTable",
    "Pricing",
    "list_price",
    "micro",
    "price_of",
]
