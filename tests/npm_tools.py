"""Third-party tools from npm that the suite drives (the MCP Inspector's CLI mode, dclint, the reference
MCP servers ``server-everything`` and ``server-filesystem``), pinned and
installed into ``.artifacts/npm/`` (git-ignored): by ``.ci/run`` before the suite, or by the first
test that needs one. ``python -m tests.npm_tools`` installs them all, builds the AgentX 1.9.0 and
2.9.0 clients from their vendored source into ``.cache/`` and installs Anthropic's TypeScript SDK
there from its lock file (``tests/integration/anthropic_ts_sdk.py``; nothing without node and npm)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NPM_ROOT = Path(__file__).resolve().parents[1] / ".artifacts" / "npm"
# The Inspector's 0.x CLI: its 2.x line needs Node >= 22.19; 0.21.1 asks for 22.7.5 and runs on 20.
INSPECTOR = ("@modelcontextprotocol/inspector", "0.21.1", "mcp-inspector")
# Docker Compose files against the compose-spec JSON schema it bundles (deploy/compose.yaml).
DCLINT = ("dclint", "3.1.0", "dclint")
# Reference MCP servers nobody here wrote, driven over stdio and Streamable HTTP by the MCP tests.
SERVER_EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
SERVER_FILESYSTEM = ("@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem")


def have_npm() -> bool:
    return shutil.which("node") is not None and shutil.which("npm") is not None


def installed(package: str, version: str, binary: str) -> Path:
    """The path of ``binary`` of ``package@version``, installed first if it is not yet."""
    home = NPM_ROOT / f"{package.rsplit('/', 1)[-1]}-{version}"
    launcher = home / "node_modules" / ".bin" / binary
    if launcher.exists():
        return launcher
    NPM_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=NPM_ROOT))  # renamed into place once complete
    try:
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(staging),
                f"{package}@{version}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        with contextlib.suppress(OSError):  # another run installed it meanwhile: use that one
            os.rename(staging, home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return launcher


def main() -> None:
    if not have_npm():
        print("node or npm missing: the MCP Inspector, compose schema and Node client tests will be skipped")
        return
    print(installed(*INSPECTOR))
    print(installed(*DCLINT))
    print(installed(*SERVER_EVERYTHING))
    print(installed(*SERVER_FILESYSTEM))
    # the AgentX clients built from their public source (agentxjs 1.9.0 and 2.9.0), before the
    # suite: a build that fails here fails CI instead of the first test that needs it
    from tests.integration import agentx2_client, agentx_ui_client, anthropic_ts_sdk

    print(agentx_ui_client.ensure_client())
    print(agentx2_client.ensure_client())
    # Anthropic's TypeScript SDK, `npm ci` from its package-lock.json (the version it pins, exactly)
    print(anthropic_ts_sdk.ensure_installed())


if __name__ == "__main__":
    main()
