"""Each domain package re-exports exactly its modules' public names, and loads none of them early.

As httpx pins its exports: a package's ``__all__`` is the union of its modules' ``__all__`` (a new
public name must be exported, a removed one unexported), every listed name resolves to the object
its module defines, no name is exported twice or shadows a module, and importing the package alone
imports none of its modules (``agentvm.lazy``: a Lambda handler that needs one module pays for one).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "shared" / "agentvm"
DOMAINS = [
    "agent",
    "agent.tools",
    "streaming",
    "security",
    "observability",
    "configcentre",
    "resources",
    "images",
    "turns",
    "sessions",
]


def _declared(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def _modules(package: str) -> dict[str, list[str]]:
    folder = PACKAGE.joinpath(*package.split("."))
    out = {}
    for path in sorted(folder.glob("*.py")):
        if path.name != "__init__.py":
            names = _declared(path)
            assert names is not None, f"{path.relative_to(PACKAGE)}: no literal __all__"
            out[path.stem] = names
    return out


@pytest.mark.parametrize("package", DOMAINS)
def test_the_package_exports_exactly_its_modules_public_names(package: str) -> None:
    init = PACKAGE.joinpath(*package.split("."), "__init__.py")
    exported = _declared(init)
    assert exported is not None, f"agentvm.{package} has no literal __all__"
    modules = _modules(package)
    public = [name for names in modules.values() for name in names]
    twice = sorted({name for name in public if public.count(name) > 1})
    assert not twice, f"exported by two modules of agentvm.{package}: {twice}"
    assert not set(public) & set(modules), "a name that is also a module's name"
    assert sorted(exported) == sorted(public), (
        f"agentvm.{package}.__all__ differs from its modules' public names: "
        f"missing {sorted(set(public) - set(exported))}, extra {sorted(set(exported) - set(public))}"
    )


@pytest.mark.parametrize("package", DOMAINS)
def test_every_exported_name_is_its_modules_object(package: str) -> None:
    namespace = importlib.import_module(f"agentvm.{package}")
    for module, names in _modules(package).items():
        source = importlib.import_module(f"agentvm.{package}.{module}")
        for name in names:
            assert getattr(namespace, name) is getattr(source, name), f"agentvm.{package}.{name}"
    with pytest.raises(AttributeError):
        namespace.no_such_name  # noqa: B018


def test_importing_a_package_imports_none_of_its_modules() -> None:
    code = (
        "import sys\n"
        f"packages = {[f'agentvm.{p}' for p in DOMAINS]!r}\n"
        "for p in packages: __import__(p)\n"
        "loaded = [m for m in sys.modules if any(m.startswith(p + '.') for p in packages)]\n"
        "print(sorted(m for m in loaded if m not in packages))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
