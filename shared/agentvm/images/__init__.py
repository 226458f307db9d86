"""Images, the application service: an image's config, its lifecycle (create, built from an agent
resource, update, rebuild, delete), its agent (start/stop), its container, and lookups.

Use cases of ``(rt: Runtime, tenant_id: str, …)`` that the WebSocket commands (``gateway``), the
HTTP routes (``api``), sessions and the CLI call; nothing here knows a protocol.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.images.agents import (
        start_agent,
        stop_agent,
    )
    from agentvm.images.built import (
        create_built,
        rebuild,
    )
    from agentvm.images.config import (
        ContextDietPolicy,
        ImageConfig,
        ReplyCachePolicy,
        check_built,
        check_tool_sources,
        context_diet_policy,
        reply_cache_policy,
        tool_decls,
    )
    from agentvm.images.containers import (
        ensure_container,
    )
    from agentvm.images.lifecycle import (
        create,
        delete,
        update,
    )
    from agentvm.images.lookup import (
        image_by_agent,
        image_for,
        image_of,
    )
    from agentvm.images.quota import (
        create_counted,
        give_back_deleted,
        put_counted,
    )

__all__ = [
    "ContextDietPolicy",
    "ImageConfig",
    "ReplyCachePolicy",
    "check_built",
    "check_tool_sources",
    "context_diet_policy",
    "create",
    "create_built",
    "create_counted",
    "delete",
    "ensure_container",
    "give_back_deleted",
    "image_by_agent",
    "image_for",
    "image_of",
    "put_counted",
    "rebuild",
    "reply_cache_policy",
    "start_agent",
    "stop_agent",
    "tool_decls",
    "update",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "agents": [
            "start_agent",
            "stop_agent",
        ],
        "built": [
            "create_built",
            "rebuild",
        ],
        "config": [
            "ContextDietPolicy",
            "ImageConfig",
            "ReplyCachePolicy",
            "check_built",
            "check_tool_sources",
            "context_diet_policy",
            "reply_cache_policy",
            "tool_decls",
        ],
        "containers": [
            "ensure_container",
        ],
        "lifecycle": [
            "create",
            "delete",
            "update",
        ],
        "lookup": [
            "image_by_agent",
            "image_for",
            "image_of",
        ],
        "quota": [
            "create_counted",
            "give_back_deleted",
            "put_counted",
        ],
    },
)
