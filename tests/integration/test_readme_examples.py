"""The README's SDK examples, as written, run against a real ``avm serve`` (the echo model).

Each ```python block of the README that uses ``agentvm.client`` is run in a fresh interpreter,
with only the server's URL and the admin key put in place of ``ws://127.0.0.1:8080/ws`` and
``avm_...``; what it prints is what the README says it prints.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.avm_process import avm_serve, base_env, free_port

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED = ["Echo: Hello!\n", "tool: 42\nEcho: calculator returned: 42\n"]


def _sdk_examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    return [b for b in blocks if "from agentvm.client import" in b]


def test_the_readme_sdk_examples_run_and_print_what_the_readme_says(tmp_path):
    examples = _sdk_examples()
    assert len(examples) == len(EXPECTED)
    with avm_serve(tmp_path, free_port(), env=base_env()) as server:
        token = server.admin_token()
        for example, expected in zip(examples, EXPECTED, strict=True):
            assert example.count("ws://127.0.0.1:8080/ws") == 1 and example.count('"avm_..."') == 1
            code = example.replace("ws://127.0.0.1:8080/ws", server.url).replace('"avm_..."', repr(token))
            ran = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=base_env()
            )
            assert ran.returncode == 0, ran.stderr
            assert ran.stdout == expected
