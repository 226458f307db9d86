"""The ``SandboxJobs`` port on an SQS FIFO queue: the AWS host's path from a turn to the sandbox
worker (``functions/sandbox_worker``).

``MessageGroupId``: the container's workspace (a hash of tenant and container), so the jobs of one
workspace run one at a time, in order: each job's workspace is synced from S3 before it runs and
back after, and two at once would overwrite each other's files. ``MessageDeduplicationId``: the
wait the job answers, so a redelivered turn that submits its job again within SQS's five-minute
window sends it once (beyond it, the worker drops a job whose wait was answered).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from agentvm.records import SandboxJob, workspace_digest


class SqsSandboxJobs:
    def __init__(self, queue_url: str, *, client: Any | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self._client = client
        self.queue_url = queue_url

    async def submit(self, job: SandboxJob) -> None:
        await asyncio.to_thread(
            self._client.send_message,
            QueueUrl=self.queue_url,
            MessageBody=job.model_dump_json(),
            MessageGroupId=workspace_digest(job.tenantId, job.containerId),
            MessageDeduplicationId=hashlib.sha256(f"{job.turnId}\0{job.waitId}".encode()).hexdigest(),
        )


def sandbox_job_from_body(body: str) -> SandboxJob:
    return SandboxJob.model_validate_json(body)


__all__ = ["SqsSandboxJobs", "sandbox_job_from_body"]
