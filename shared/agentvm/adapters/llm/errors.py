"""Translating HTTP provider failures into ``ProviderError``s, shared by the SDK adapters.

Messages are built only from the status code and the provider's short error type, never from
response bodies or request objects, so they cannot carry an API key (OpenAI, for one, echoes a
partly masked key in its 401 message).
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from agentvm.errors import ProviderError, ProviderRateLimited, ProviderRejected, ProviderUnavailable

if TYPE_CHECKING:
    from collections.abc import Mapping

_ERROR_TYPE = re.compile(r"[A-Za-z_]{1,64}")


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def safe_error_type(value: object) -> str | None:
    """The provider's error type if it looks like one (``rate_limit_error``), else None."""
    return value if isinstance(value, str) and _ERROR_TYPE.fullmatch(value) else None


def error_for_status(
    provider: str, status: int, error_type: str | None = None, retry_after: float | None = None
) -> ProviderError:
    """429 is rate limiting, 5xx (and 529 overloaded) is unavailability, any other status a rejection."""
    detail = f"{status} {error_type}" if error_type else str(status)
    if status == 429:
        return ProviderRateLimited(f"{provider}: rate limited ({detail})", retry_after=retry_after)
    if status >= 500:
        return ProviderUnavailable(f"{provider}: unavailable ({detail})", retry_after=retry_after)
    return ProviderRejected(f"{provider}: request rejected ({detail})")


def transport_errors() -> tuple[type[Exception], ...]:
    """Network errors of the HTTP libraries already loaded: the SDKs use httpx2 (or httpx before)."""
    return tuple(
        module.TransportError
        for name in ("httpx2", "httpx")
        if (module := sys.modules.get(name)) is not None and hasattr(module, "TransportError")
    )


__all__ = ["error_for_status", "retry_after_seconds", "safe_error_type", "transport_errors"]
