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


# Files whose tests measure time (pacing and cadence windows, leases, deadlines, process kills, a
# terminal's timing): ``./dev test`` runs them after the parallel run, in one process, so that no
# other worker's load moves their clocks (AVM_TEST_PHASE: "parallel" leaves them out, "serial" runs
# only them; unset, as under a plain ``pytest``, runs everything).
SERIAL_FILES = frozenset(
    {
        "tests/contract/test_turn_queue_contract.py",
        "tests/functions/test_managed_agents_aws.py",  # an interrupt must land within a 12 s reply
        "tests/functions/test_mcp_tasks_aws.py",  # a 1 s inline follow against 1.5 s task stages
        "tests/functions/test_observability_aws.py",
        "tests/integration/test_chat.py",
        "tests/integration/test_cluster_acceptance.py",
        "tests/integration/test_disk_full.py",  # a queue retrying every 0.2 s against a 20 s bound
        "tests/integration/test_mcp_events.py",
        "tests/integration/test_mcp_sessions.py",
        "tests/integration/test_mcp_tasks.py",  # an interrupt must land within a 4 s task
        "tests/integration/test_paced_reads.py",
        "tests/integration/test_playground_browser.py",
        "tests/integration/test_sandbox_job_lifecycle.py",
        "tests/integration/test_serve_workers.py",
        "tests/unit/agent/test_pacing.py",
        "tests/unit/streaming/test_batch_cadence.py",
        "tests/unit/streaming/test_batched_frames.py",
        "tests/unit/streaming/test_cadence_choice.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get("AVM_TEST_PHASE")
    if phase not in ("parallel", "serial"):
        return
    keep, drop = [], []
    for item in items:
        serial = item.nodeid.split("::", 1)[0] in SERIAL_FILES
        (keep if serial == (phase == "serial") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session", autouse=True)
def _postgres_server_stops() -> Iterator[None]:
    """The test PostgreSQL (tests/postgres_server.py) starts on first use and stops here, at the
    session's end; a session that never needed it never imported psycopg."""
    yield
    module = sys.modules.get("tests.postgres_server")
    if module is not None:
        module.stop_shared_server()
