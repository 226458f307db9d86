"""The official Anthropic TypeScript SDK (``@anthropic-ai/sdk``) for the suite, installed from npm.

``anthropic_ts_sdk/package.json`` pins the exact version and ``package-lock.json`` every package
it pulls in (with their npmjs URLs and integrity hashes). ``npm ci`` installs exactly that into
``.cache/anthropic-ts-sdk/<digest of the two files>/`` (git-ignored; npm's own cache keeps the
tarballs), once: by ``.ci/run`` before the suite (``python -m tests.npm_tools``), or by the first test
that needs it. ``anthropic_ts_sdk/driver.mjs`` is copied there and runs as an application does,
importing ``@anthropic-ai/sdk`` from its own ``node_modules``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.integration.node_bundle import missing_node

HERE = Path(__file__).parent / "anthropic_ts_sdk"
DRIVER = HERE / "driver.mjs"
MANIFESTS = ("package.json", "package-lock.json")
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "anthropic-ts-sdk"
SDK = "@anthropic-ai/sdk"
NODE_MAJOR = 20  # the oldest Node.js the SDK's README supports ("Node.js 20 LTS or later")


def pinned_version() -> str:
    """The SDK version ``package.json`` pins."""
    return json.loads((HERE / "package.json").read_text())["dependencies"][SDK]


def missing_tools() -> str | None:
    """Why the SDK cannot be installed and run here, or None."""
    client = f"{SDK} {pinned_version()} (Anthropic's TypeScript SDK)"
    missing = missing_node(client)
    if missing is not None:
        return missing
    version = subprocess.run(
        ["node", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < NODE_MAJOR:
        return (
            f"node {version or '(no version)'} is too old: the {client} needs Node.js {NODE_MAJOR} or later"
        )
    return None


def _digest() -> str:
    digest = hashlib.sha256()
    for name in MANIFESTS:
        digest.update(name.encode() + (HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def ensure_installed() -> Path:
    """The directory whose ``node_modules`` holds the locked SDK, installed with ``npm ci`` on first
    use and when a manifest changes; one install at a time (test workers starting together wait)."""
    home = CACHE / f"sdk-{_digest()}"
    if (home / "node_modules" / SDK / "package.json").exists():
        return home
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "node_modules" / SDK / "package.json").exists():
            _install(home)
    return home


def _install(home: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".install-"))  # renamed into place once complete
    try:
        for name in MANIFESTS:
            shutil.copyfile(HERE / name, staging / name)
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts"],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci could not install {SDK}:\n{done.stderr[-3000:]}")
        shutil.rmtree(home, ignore_errors=True)  # a half-made one from an interrupted run
        os.rename(staging, home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def run_driver(env: dict[str, str], timeout: float = 120) -> dict[str, Any]:
    """Run ``driver.mjs`` with the installed SDK and ``env`` (AVM_URL, AVM_KEY, AVM_RIVAL_KEY,
    AVM_MODEL); the JSON summary it printed. A driver failure fails with what it said."""
    home = ensure_installed()
    driver = home / f"driver-{hashlib.sha256(DRIVER.read_bytes()).hexdigest()[:12]}.mjs"
    if not driver.exists():  # next to node_modules, so its bare import resolves there
        for stale in home.glob("driver-*.mjs"):  # an edited driver's earlier copies
            stale.unlink(missing_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=home, suffix=".tmp", delete=False) as staged:
            staged.write(DRIVER.read_bytes())
        os.replace(staged.name, driver)
    done = subprocess.run(
        ["node", str(driver)],
        cwd=home,
        # without ANTHROPIC_* (the SDK reads a key, a base URL and extra headers from there)
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = done.stdout.strip().splitlines()
    summary: dict[str, Any] = {}
    with contextlib.suppress(ValueError, IndexError):
        summary = json.loads(lines[-1])
    if done.returncode != 0 or "error" in summary or not summary:
        raise AssertionError(
            f"the TypeScript SDK driver failed (exit {done.returncode}):\n"
            f"{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
        )
    return summary


def main() -> None:
    print(ensure_installed())


if __name__ == "__main__":
    main()
