"""``pip install agentvm-runtime[client]`` is light: a fresh venv gets the SDK without the server's
stack, under our own distribution name (``avm --version`` says it, and agrees with the metadata).

The venv is made here and filled offline from ``.venv/wheelhouse`` (the client extra's wheels, built
by ``./dev`` when it sets up ``.venv``): no network. The project is installed from a copy of its
sources, as a user's ``pip install`` would build it. Then, inside that venv: the SDK and ``avm
chat`` import, none of FastAPI, the AWS SDKs, the provider SDKs, MCP or uvicorn is installed, and
the SDK holds a typed turn with a real ``avm serve`` (run from the dev venv).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.avm_process import avm_serve, base_env, free_port

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
SERVER_PACKAGES = [
    "fastapi",
    "starlette",
    "uvicorn",
    "boto3",
    "botocore",
    "pynamodb",
    "aws_lambda_powertools",
    "mangum",
    "anthropic",
    "openai",
    "mcp",
    "pydantic_settings",
    "jsonschema",
]

CHECK = textwrap.dedent(
    """
    import importlib.util, json, sys
    import agentvm.client, agentvm.chat
    from agentvm.client import AgentVMClient, SyncAgentVMClient, TextDeltaEvent
    present = [m for m in json.loads(sys.argv[1]) if importlib.util.find_spec(m) is not None]
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
    print(json.dumps({"present": present, "loaded": loaded}))
    """
)

TURN = textwrap.dedent(
    """
    import sys
    from agentvm.client import SyncAgentVMClient, TextDeltaEvent
    with SyncAgentVMClient.connect(sys.argv[1], token=sys.argv[2]) as client:
        image = client.create_image("light", name="Light")
        text = "".join(e.data.text for e in client.send(image.imageId, "from a light install")
                       if isinstance(e, TextDeltaEvent))
    print(text)
    """
)


def _pip_env() -> dict[str, str]:
    """No pip configuration of this machine (indexes, find-links): only the wheelhouse."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    if not WHEELHOUSE.is_dir() or not any(WHEELHOUSE.glob("pydantic-*.whl")):
        pytest.skip(
            f"SKIPPED LOUDLY: no wheelhouse at {WHEELHOUSE} (./dev builds it when it sets up .venv; "
            "it could not download the client extra's wheels): the light install is not tested"
        )
    base = tmp_path_factory.mktemp("light")
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "shared" / "agentvm",
        source / "shared" / "agentvm",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(WHEELHOUSE),
            f"{source}[client]",
        ],
        env=_pip_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


LICENCE_CHECK = "import importlib.metadata as m; print(m.metadata('agentvm-runtime')['License-Expression'])"


def test_the_client_extra_installs_without_the_server_stack(light_venv):
    import json

    python = light_venv / "bin" / "python"
    checked = subprocess.run(
        [str(python), "-c", CHECK, json.dumps(SERVER_PACKAGES)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=light_venv,
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == {"present": [], "loaded": []}
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, env=_pip_env()
    )
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"agentvm-runtime", "pydantic", "websockets", "httpx"} <= names
    assert "agentvm" not in names  # the unrelated project of that name on the index
    assert not names & {"fastapi", "boto3", "pynamodb", "anthropic", "openai", "mcp", "uvicorn"}
    helped = subprocess.run(
        [str(light_venv / "bin" / "avm"), "chat", "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "--url" in helped.stdout, helped.stderr
    version = subprocess.run([str(light_venv / "bin" / "avm"), "--version"], capture_output=True, text=True)
    installed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('agentvm-runtime'))"],
        capture_output=True,
        text=True,
    )
    assert version.stdout.strip() == f"avm (agentvm-runtime {installed.stdout.strip()})", version
    licence = subprocess.run(
        [
            str(python),
            "-c",
            LICENCE_CHECK,
        ],
        capture_output=True,
        text=True,
    )
    assert licence.stdout.strip() == "MIT", licence
    # the server's commands without the server's extras: what to install, not a traceback
    for command in (["serve"], ["keys", "list", "--tenant", "t"]):
        refused = subprocess.run(
            [str(light_venv / "bin" / "avm"), *command], capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 2, refused
        assert "Traceback" not in refused.stderr, refused.stderr
        assert "pip install 'agentvm-runtime[local]'" in refused.stderr, refused.stderr


def test_the_light_install_holds_a_typed_turn_with_a_server(light_venv, tmp_path):
    port = free_port()
    with avm_serve(tmp_path, port, env=base_env()) as server:
        ran = subprocess.run(
            [str(light_venv / "bin" / "python"), "-c", TURN, server.url, server.admin_token()],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=light_venv,
        )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Echo: from a light install"
