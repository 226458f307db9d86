"""Warming a provider SDK's client before a server takes traffic (``SettingsModelResolver.prepare``)."""

from __future__ import annotations

import contextlib
import sys


def warm_sdk_client(client: object) -> None:
    """Resolve now what a Stainless-built SDK client (Anthropic's, OpenAI's) resolves on its first
    request: the platform named in its headers, which it looks up in a worker thread. A burst of
    first requests (a thousand turns right after start) would queue a thread job each. Skipped
    quietly if the SDK no longer works this way."""
    if getattr(client, "_platform", False) is not None:
        return
    module = sys.modules.get(type(client).__module__.split(".")[0] + "._base_client")
    get_platform = getattr(module, "get_platform", None)
    if get_platform is not None:
        with contextlib.suppress(Exception):
            client._platform = get_platform()  # type: ignore[attr-defined]


__all__ = ["warm_sdk_client"]
