"""The stock AgentX 1.9.0 UI, headless, for the suite: its official client and UI reducer.

``agentxjs`` 1.9.0 is built from its public source, Deepractice/AgentX at tag ``v1.9.0``
(``eb1a32f3814fac87659635bafa6d5554de18b812``, MIT): the files the remote client and the UI's
conversation reducer are made of are kept verbatim in ``agentx_ui/vendor`` (npm does not serve
``agentxjs``/``@agentxjs/ui`` here: the registry answers 404, and their published ``@agentxjs/ui`` is a
React component bundle anyway). On first use the build tools and the client's own runtime
dependencies (``ws``, ``reconnecting-websocket``, at the versions below, within the ranges its
``package.json`` names) are installed with npm into ``.cache/agentx-1.9.0`` (git-ignored) and the
source is bundled there with esbuild, as its own build does. ``agentx_ui/driver.mjs`` then runs
the client and the reducer the way the UI's ``useAgent`` hook wires them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.node_bundle import missing_node, source_digest

HERE = Path(__file__).parent / "agentx_ui"
VENDOR = HERE / "vendor" / "packages"
DRIVER = HERE / "driver.mjs"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "agentx-1.9.0"
NPM_PACKAGES = ("esbuild@0.24.2", "ws@8.18.3", "reconnecting-websocket@4.4.0")
ENTRY = """\
export { createRemoteAgentX } from "VENDOR/agentx/src/createRemoteAgentX";
export {
  conversationReducer,
  initialConversationState,
} from "VENDOR/ui/src/hooks/useAgent/conversationReducer";
"""


def missing_tools() -> str | None:
    """Why the client cannot be built here, or None."""
    return missing_node("AgentX 1.9.0")


def _source_digest() -> str:
    return source_digest(VENDOR, NPM_PACKAGES)


def ensure_client() -> Path:
    """The bundled client + reducer (an ES module), built on first use and when the source changes."""
    bundle = CACHE / f"agentx-ui-{_source_digest()}.mjs"
    if bundle.exists():
        return bundle
    CACHE.mkdir(parents=True, exist_ok=True)
    if not (CACHE / "package.json").exists():
        (CACHE / "package.json").write_text('{"name": "agentx-ui-cache", "private": true}\n')
    installed = CACHE / "node_modules"
    if not all((installed / spec.rsplit("@", 1)[0]).is_dir() for spec in NPM_PACKAGES):
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--save-exact", *NPM_PACKAGES],
            cwd=CACHE,
            check=True,
            capture_output=True,
        )
    entry = CACHE / "entry.ts"
    entry.write_text(ENTRY.replace("VENDOR", VENDOR.as_posix()))
    aliases = {
        "@agentxjs/types": VENDOR / "types" / "src",
        "@agentxjs/common": VENDOR / "common" / "src",
        "@agentxjs/network": VENDOR / "network" / "src",
        "agentxjs": VENDOR / "agentx" / "src",
    }
    subprocess.run(
        [
            str(installed / ".bin" / "esbuild"),
            str(entry),
            "--bundle",
            "--platform=node",
            "--format=esm",
            f"--outfile={bundle}",
            "--external:ws",
            "--external:reconnecting-websocket",
            *(f"--alias:{name}={path}" for name, path in aliases.items()),
        ],
        cwd=CACHE,
        check=True,
        capture_output=True,
    )
    return bundle


def run_ui(scenario: dict, workdir: Path, timeout: float = 120) -> dict:
    """Run one scenario of ``driver.mjs`` with the bundled client; its JSON result."""
    bundle = ensure_client()
    output = workdir / f"{scenario['name']}-result.json"
    spec = workdir / f"{scenario['name']}-scenario.json"
    spec.write_text(json.dumps({**scenario, "output": str(output)}))
    done = subprocess.run(
        ["node", str(DRIVER), bundle.as_uri(), str(spec)],
        cwd=CACHE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(f"the AgentX UI driver failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(output.read_text())
