"""The sandbox worker: sandbox jobs from their own SQS FIFO queue (one workspace's jobs in order),
each run on the container's workspace synced from S3, its result answering the suspended turn's
wait (which queues the turn's continuation on the turn queue).

Per job: the workspace is pulled from S3 into a fresh directory under /tmp, the job runs there as
a child process (``LocalSandbox``: limits on wall time, CPU, memory, file size and output; an
environment of four variables, no credentials), the workspace is pushed back, then the wait is
answered. Afterwards the directory is deleted and, in Lambda, every process a job left behind is
killed, so nothing of one tenant's job lives on into the next invocation of this execution
environment (docs/deploy.md, "Sandbox isolation on AWS").
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)

from agentvm.adapters.aws.s3_workspaces import S3Workspaces, WorkspaceTooLarge
from agentvm.adapters.aws.sqs_sandbox_jobs import sandbox_job_from_body
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.hosts.aws import LambdaEntry, run_sync
from agentvm.hosts.tools import workspace_quota
from agentvm.records import workspace_digest
from agentvm.turns.sandbox_jobs import answer_job, run_sandbox_job

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from agentvm.ports import Sandbox
    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "queue_url", "workspace_bucket")

logger = Logger()


class _Processor(AsyncBatchProcessor):
    def async_process(self) -> list[tuple[Any, ...]]:
        return run_sync(self._async_process())  # one record at a time: a job gets the whole CPU

    async def _async_process(self) -> list[tuple[Any, ...]]:
        return [await self._async_process_record(record) for record in self.records]


def build_handler(
    rt: Runtime,
    *,
    workspaces: S3Workspaces | None = None,
    scratch: Path | None = None,
    sandbox_factory: Callable[[Path], Sandbox] | None = None,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    from agentvm.config import Settings

    settings = Settings()
    quota = workspace_quota(settings)
    if sandbox_factory is None:
        sandbox_factory = functools.partial(LocalSandbox, quota=quota)
    if workspaces is None:
        assert settings.workspace_bucket is not None
        workspaces = S3Workspaces(settings.workspace_bucket, max_bytes=quota.max_bytes)
    store = workspaces
    processor = _Processor(event_type=EventType.SQS, raise_on_entire_batch_failure=False, logger=logger)

    async def record_handler(record: SQSRecord) -> None:
        job = sandbox_job_from_body(record.body)
        logger.append_keys(turn_id=job.turnId, tenant_id=job.tenantId, tool=job.tool)
        root = Path(tempfile.mkdtemp(prefix="avm-sandbox-", dir=scratch))
        try:
            sandbox = sandbox_factory(root)
            workspace = root / workspace_digest(job.tenantId, job.containerId)
            try:
                before = await store.pull(job.tenantId, job.containerId, workspace)
            except WorkspaceTooLarge as exc:
                await answer_job(rt, job, f"Error: the workspace cannot be loaded: {exc}")
                return

            async def push() -> None:
                await store.push(job.tenantId, job.containerId, workspace, before)

            ran = await run_sandbox_job(rt, job, sandbox, after_run=push)
            logger.info("sandbox job", extra={"ran": ran})
        finally:
            _kill_leftovers()  # first: a leftover could otherwise keep writing while it is removed
            shutil.rmtree(root, ignore_errors=True)

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return dict(async_process_partial_response(event, record_handler, processor, context))

    return handler


def _kill_leftovers() -> None:
    """In Lambda, kill every process of this user but this one and its ancestors: a job that
    detached a child (``setsid``, a double fork) must not outlive its invocation. Outside Lambda
    (tests, a developer's machine) this does nothing: the same user runs everything else there."""
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        return
    keep = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in keep:
        keep.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in keep or int(entry.name) == 1:
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)


def _not_dumpable() -> None:
    """In Lambda: make this process non-dumpable, so a job (same user) cannot read its memory or
    ``/proc/<pid>/environ``, where the function's credentials are."""
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


_not_dumpable()
lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
