"""The config centre: every setting that applies without a restart (``keys``), its values per
server and tenant (``centre``), secrets sealed at rest (``sealing``), and the pricing it sets.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.configcentre.centre import (
        SERVER,
        ConfigCentre,
        DefaultModelResolver,
        read_config_file,
        tenant_scope,
    )
    from agentvm.configcentre.keys import (
        KEYS,
        MASK,
        MODEL_KEYS,
        Key,
        check,
        key,
    )
    from agentvm.configcentre.pricing import (
        pricing_for,
    )
    from agentvm.configcentre.sealing import (
        PREFIX,
        SecretSealer,
        SecretUnreadable,
        is_sealed,
    )

__all__ = [
    "ConfigCentre",
    "DefaultModelResolver",
    "KEYS",
    "Key",
    "MASK",
    "MODEL_KEYS",
    "PREFIX",
    "SERVER",
    "SecretSealer",
    "SecretUnreadable",
    "check",
    "is_sealed",
    "key",
    "pricing_for",
    "read_config_file",
    "tenant_scope",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "centre": [
            "ConfigCentre",
            "DefaultModelResolver",
            "SERVER",
            "read_config_file",
            "tenant_scope",
        ],
        "keys": [
            "KEYS",
            "Key",
            "MASK",
            "MODEL_KEYS",
            "check",
            "key",
        ],
        "pricing": [
            "pricing_for",
        ],
        "sealing": [
            "PREFIX",
            "SecretSealer",
            "SecretUnreadable",
            "is_sealed",
        ],
    },
)
