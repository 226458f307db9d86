"""The sandbox worker: sandbox jobs from their own SQS FIFO queue (one workspace's jobs in order),
one at a time (``hosts/lambda_entry.py``), each run on its container's workspace synced from and to
S3 (``adapters/sandbox/synced.py``: a fresh directory per job, leftover processes killed after it;
docs/deploy.md, "Sandbox isolation on AWS"); its result answers the suspended turn's wait (which
queues the turn's continuation on the turn queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

# First of the core, before pydantic is imported: see hosts/lambda_entry.py (cold start).
from agentvm.hosts.lambda_entry import sqs_batch_handler  # isort: skip
from agentvm.adapters.aws.sqs_sandbox_jobs import sandbox_job_from_body
from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces, WorkspaceTooLarge
from agentvm.adapters.sandbox.synced import SyncedSandbox, not_dumpable
from agentvm.hosts.aws import LambdaEntry
from agentvm.hosts.tools import workspace_quota
from agentvm.turns.sandbox_jobs import answer_job, run_sandbox_job

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from agentvm.ports import Sandbox
    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "queue_url", "workspace_bucket")

logger = Logger()


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
    synced = SyncedSandbox(
        quota, settings.workspace_bucket, workspaces=workspaces, factory=sandbox_factory, scratch=scratch
    )

    async def record_handler(record: SQSRecord) -> None:
        job = sandbox_job_from_body(record.body)
        logger.append_keys(turn_id=job.turnId, tenant_id=job.tenantId, tool=job.tool)
        async with synced.checkout(job.tenantId, job.containerId) as workspace:
            try:
                await workspace.pull()
            except WorkspaceTooLarge as exc:
                await answer_job(rt, job, f"Error: the workspace cannot be loaded: {exc}")
                return
            ran = await run_sandbox_job(rt, job, workspace.sandbox, after_run=workspace.push)
            logger.info("sandbox job", extra={"ran": ran})

    return sqs_batch_handler(record_handler, logger=logger)  # one job at a time: it gets the whole CPU


not_dumpable()  # a job (same user) cannot read this process's memory or environment
lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
