"""A package's public names, each imported from its module on first use (PEP 562).

Every domain package re-exports its public names (``from agentvm.security import Budgets``), but a
Lambda handler that needs one module of a package must not pay for importing all of them at cold
start. So a package ``__init__`` lists its names in a literal ``__all__`` (what ruff, mypy, the
docs and ``tests/unit/package/test_exports.py`` read), imports them for type checkers only, and
hands ``lazy_exports`` where each name lives:

    __getattr__, __dir__ = lazy_exports(__name__, {"budgets": ["Budgets", "Scope"]})

The ``lazy_loader`` package does the same, but builds ``__all__`` at run time, where static
tools cannot see it; these few lines keep it literal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


def lazy_exports(
    package: str, names_by_module: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a listed name is looked up in its module
    (imported then, once: Python caches it), any other name is an ``AttributeError``."""
    where = {name: module for module, names in names_by_module.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
