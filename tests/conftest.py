"""Shared fixtures: dummy AWS credentials, no provider keys, and the in-process harness."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import pytest

from tests.harness import Harness

if TYPE_CHECKING:
    from collections.abc import Iterator

# Tests never reach a real provider or AWS: dummy credentials, no provider keys.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
for _key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AVM_DEFAULT_MODEL"):
    os.environ.pop(_key, None)


@pytest.fixture
async def harness(tmp_path: Any) -> Harness:
    h = Harness(tmp_path)
    yield h
    h.queue.close()
    h.store.close()


@pytest.fixture(scope="session", autouse=True)
def _postgres_server_stops() -> Iterator[None]:
    """The test PostgreSQL (tests/postgres_server.py) starts on first use and stops here, at the
    session's end; a session that never needed it never imported psycopg."""
    yield
    module = sys.modules.get("tests.postgres_server")
    if module is not None:
        module.stop_shared_server()
