"""Running one sandbox job for a suspended turn (the AWS sandbox worker): the tool call runs on
the container's workspace, its output answers the turn's wait, and that queues the turn's
continuation (``agent.waits.decide``).

A job whose wait is no longer pending (timed out, cancelled, or a duplicate delivery after it was
answered) is dropped without running: a job runs at most once per answer that can still count.
One whose wait stops being pending while it runs (the turn was interrupted) is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from agentvm.agent.tools.sandbox import SPECS, SandboxTool
from agentvm.ports import SandboxLimits, ToolOutput
from agentvm.turns.waits import decide

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.ports import Sandbox
    from agentvm.records import SandboxJob
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.sandbox_jobs")
WAIT_POLL_S = 2.0  # how often a running job's wait is read (one point read each, DynamoDB on AWS)


async def run_sandbox_job(
    rt: Runtime,
    job: SandboxJob,
    sandbox: Sandbox,
    *,
    after_run: Callable[[], Awaitable[object]] | None = None,
    poll_s: float | None = None,
) -> bool:
    """Run ``job`` and answer its wait. False: its wait was answered already, nothing ran.

    While the job runs its wait is read every ``poll_s``: once it is no longer pending (the turn
    was interrupted, or timed out) the job is stopped, its processes killed, and nothing answers.
    ``after_run`` (the worker's push of the workspace to storage) runs before the answer, so the
    turn never goes on while the job's files are not stored yet."""
    assert rt.waits is not None
    wait = await rt.waits.get_wait(job.turnId, job.waitId)
    if wait is None or wait.status != "pending" or wait.tenantId != job.tenantId:
        log.info("sandbox job dropped: its wait is not pending", extra={"turn_id": job.turnId})
        return False
    spec = SPECS.get(job.tool)
    output: ToolOutput | None
    if spec is None:
        output = ToolOutput(f"Error: there is no sandbox tool named {job.tool!r}", is_error=True)
    else:
        limits = SandboxLimits(**job.limits) if job.limits else SandboxLimits()
        tool = SandboxTool(spec, sandbox, job.tenantId, job.containerId, limits, rt.storage_quota)
        output = await _call_while_pending(rt, tool, job, poll_s or WAIT_POLL_S)
        if output is None:
            log.info("sandbox job stopped: its wait was decided while it ran", extra={"turn_id": job.turnId})
            if after_run is not None:
                await after_run()  # what it wrote before it was stopped is the workspace's now
            return True
    if after_run is not None:
        await after_run()
    files = [dataclasses.asdict(f) for f in output.files]
    await decide(rt, wait, "answered", output=output.text, is_error=output.is_error, files=files)
    return True


async def _call_while_pending(
    rt: Runtime, tool: SandboxTool, job: SandboxJob, poll_s: float
) -> ToolOutput | None:
    """The call's output, or None when its wait was decided elsewhere while it ran (the call
    is then cancelled: the sandbox kills the job's processes)."""
    assert rt.waits is not None
    call = asyncio.ensure_future(_call(tool, job))
    try:
        while True:
            done, _ = await asyncio.wait({call}, timeout=poll_s)
            if done:
                return call.result()
            wait = await rt.waits.get_wait(job.turnId, job.waitId)
            if wait is None or wait.status != "pending":
                return None
    finally:
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call


async def _call(tool: SandboxTool, job: SandboxJob) -> ToolOutput:
    try:
        return await asyncio.wait_for(tool.call(job.input), tool.timeout_s)
    except TimeoutError:
        return ToolOutput(f"Error: {job.tool} timed out after {tool.timeout_s:g} s", is_error=True)
    except ValueError as exc:  # a path outside the workspace, a file that is not text
        return ToolOutput(f"Error: {exc}", is_error=True)
    except OSError as exc:  # a missing file, a directory read as a file
        return ToolOutput(f"Error: {job.tool} failed: {exc.strerror or type(exc).__name__}", is_error=True)


async def answer_job(rt: Runtime, job: SandboxJob, text: str) -> None:
    """Answer a job that cannot run (its workspace is too large to sync) with an error result."""
    assert rt.waits is not None
    wait = await rt.waits.get_wait(job.turnId, job.waitId)
    if wait is not None and wait.status == "pending":
        await decide(rt, wait, "answered", output=text, is_error=True)


__all__ = ["answer_job", "run_sandbox_job"]
