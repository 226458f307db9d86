"""The official AgentX 2.9.0 client (``agentxjs``), built from its public source, for the suite.

``agentxjs`` 2.9.0 is built from Deepractice/AgentX at tag ``v2.9.0``
(``b0bcc43f3707c77d9409cee6aabd1c6e0a9263df``, MIT): the files ``createAgentX`` (its
``packages/agentx/src/index.ts``) and the ``@agentxjs/core`` modules it imports are made of are kept
verbatim in ``agentx2_client/vendor``, with the logger and id modules of ``commonxjs`` 0.1.1
(Deepractice/CommonX ``e8e17ea``, MIT), which are also the source of ``@deepracticex/logger`` 1.2.0
and ``@deepracticex/id`` 0.2.0 blob for blob (``vendor/README.md``). None of these is served by the
npm registry here (404). On first use the build tool and the client's runtime dependencies on
npm (``jsonrpc-lite``, ``rxjs``, at versions within the ranges its ``package.json`` names) are
installed into ``.cache/agentx-2.9.0`` (git-ignored) and the source is bundled there with esbuild,
as its own build (tsup: esbuild, ESM, code splitting) does. ``agentx2_client/driver.mjs`` runs
the client as an application does: ``createAgentX().connect(url, {headers})``, ``chat.create``,
``send``, the event stream, ``history``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.integration.node_bundle import missing_node, source_digest

HERE = Path(__file__).parent / "agentx2_client"
VENDOR = HERE / "vendor"
DRIVER = HERE / "driver.mjs"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "agentx-2.9.0"
NPM_PACKAGES = ("esbuild@0.24.2", "jsonrpc-lite@2.2.0", "rxjs@7.8.2")
ENTRY = 'export { createAgentX } from "VENDOR/packages/agentx/src/index";\n'
NODE_MAJOR_WITH_WEBSOCKET = 22  # Node 22+ has the WHATWG WebSocket global the client uses


def missing_tools() -> str | None:
    """Why the client cannot be built here, or None."""
    return missing_node("AgentX 2.9.0")


def _source_digest() -> str:
    return source_digest(VENDOR, NPM_PACKAGES)


def ensure_client() -> Path:
    """The bundled client's entry module (ESM), built on first use and when the source changes;
    one build at a time (test workers starting together wait for the first one's)."""
    outdir = CACHE / f"agentx-{_source_digest()}"
    entry_module = outdir / "entry.js"
    if entry_module.exists():
        return entry_module
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry_module.exists():
            _build(outdir)
    return entry_module


def _build(outdir: Path) -> None:
    """npm installs the build tool and the runtime dependencies; esbuild bundles into ``outdir``."""
    if not (CACHE / "package.json").exists():
        (CACHE / "package.json").write_text('{"name": "agentx-2-cache", "private": true, "type": "module"}\n')
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
    commonx = VENDOR / "commonxjs" / "src"
    aliases = {
        "@agentxjs/core": VENDOR / "packages" / "core" / "src",
        "commonxjs": commonx,
        "@deepracticex/logger": commonx / "logger",
        "@deepracticex/id": commonx / "id",
    }
    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".build-"))  # renamed into place once complete
    try:
        built = subprocess.run(
            [
                str(installed / ".bin" / "esbuild"),
                str(entry),
                "--bundle",
                "--splitting",
                "--platform=node",
                "--format=esm",
                "--target=es2022",
                f"--outdir={staging}",
                *(f"--alias:{name}={path}" for name, path in aliases.items()),
            ],
            cwd=CACHE,
            env={**os.environ, "NODE_PATH": str(installed)},  # the vendored source imports these
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise RuntimeError(f"esbuild could not bundle the AgentX 2.9.0 client:\n{built.stderr[-3000:]}")
        with contextlib.suppress(OSError):  # another run built it meanwhile: use that one
            os.rename(staging, outdir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def node_command() -> list[str]:
    """``node``, with the WebSocket global switched on where it is still behind a flag (Node 20/21)."""
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    major = int(version.strip().lstrip("v").split(".")[0])
    return ["node"] if major >= NODE_MAJOR_WITH_WEBSOCKET else ["node", "--experimental-websocket"]


def run_client(scenario: dict, workdir: Path, timeout: float = 120) -> list[dict]:
    """Run one scenario of ``driver.mjs`` with the bundled client; the JSON lines it wrote."""
    entry = ensure_client()
    output = workdir / f"{scenario['name']}-steps.jsonl"
    spec = workdir / f"{scenario['name']}-scenario.json"
    spec.write_text(json.dumps({**scenario, "output": str(output)}))
    done = subprocess.run(
        [*node_command(), str(DRIVER), entry.as_uri(), str(spec)],
        cwd=CACHE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    steps = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
    if done.returncode != 0:
        raise AssertionError(
            f"the AgentX 2.9.0 driver failed after {[s.get('step') for s in steps]}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return steps
