"""The server's pricing now, as the config centre says: ``billing.markup`` and ``billing.prices``
(set by a platform admin through the API, the config file or the environment), else the list
prices and the default markup (``observability.pricing``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.configcentre.keys import check
from agentvm.observability.pricing import Pricing

if TYPE_CHECKING:
    from agentvm.runtime import Runtime


async def pricing_for(runtime: Runtime) -> Pricing:
    """The server's pricing now: the config centre's ``billing.markup`` and ``billing.prices``
    (file, environment or API), else the list prices and the default markup."""
    if runtime.config is None:
        return Pricing.of(None, None)
    resolved = await runtime.config.resolved(None)
    # Values from the API and the config file were checked when set; the environment's are checked
    # here (a bad AVM_BILLING_PRICES is invalid_config, never a silently ignored price).
    prices = check("billing.prices", resolved["billing.prices"][0] or {})
    return Pricing.of(resolved["billing.markup"][0], prices)


__all__ = ["pricing_for"]
