"""What the vendored AgentX clients' builds share (``agentx_ui_client.py``: 1.9.0,
``agentx2_client.py``: 2.9.0): whether Node.js can run them here, and the digest that names a
build after its sources and npm packages (a changed file makes a new bundle)."""

from __future__ import annotations

import hashlib
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def missing_node(client: str) -> str | None:
    """Why ``client`` cannot be built and run here, or None."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: the {client} client runs on Node.js"
    return None


def source_digest(vendor: Path, npm_packages: Sequence[str]) -> str:
    """16 hex digits over the npm packages' specs and every vendored ``.ts`` file (path and bytes)."""
    digest = hashlib.sha256(" ".join(npm_packages).encode())
    for path in sorted(vendor.rglob("*.ts")):
        digest.update(path.relative_to(vendor).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]
