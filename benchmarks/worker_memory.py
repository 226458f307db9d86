"""How much memory the turn worker needs: the evidence for template.yaml's ``TurnWorkerMemoryMb``.

The worker is billed per GB-second of its wait on the models (docs/cost.md), so its memory size is
the main lever of its cost, and the one risk of going lower is running out: Lambda kills an
invocation at its limit, and with it every turn of its batch. Two measurements, added up:

1. **The environment after init** (a fresh interpreter, its peak RSS: ``VmHWM``): the handler module imported
   as Lambda imports it, its runtime built (every boto3 client the worker holds), and the provider
   SDKs a turn loads on first use (``anthropic`` and ``openai``, imported and a client made).
2. **A batch at work**: the Python heap a worker invocation of ``--batch`` standard turns allocates
   above what it held before (``tracemalloc`` peak), through the real handler on moto
   (``benchmarks/moto_turns.py``). moto serves requests in the same process: its allocations are
   included, so this is an upper bound.

Lambda's own Python runtime (its bootstrap and runtime interface client) runs in the same process:
``LAMBDA_RUNTIME_MB`` is an assumed allowance for it on top of the interpreter measured here (AWS
publishes no figure; a bare ``python3.11`` function reports about 35-40 MB of "Max Memory Used", an
empty interpreter here takes 10-15 MB).

Run: ``./dev python -m benchmarks.worker_memory [--batch 10]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_RUNTIME_MB = 25  # assumed: Lambda's Python runtime in the function's process (see above)

# Run in a fresh interpreter: the worker's init as in Lambda, then the provider SDKs.
_INIT = r"""
import json, os, resource, sys
sys.path[:0] = [ROOT, ROOT + "/shared"]
def rss():  # this process's peak RSS (VmHWM: not the parent's, which ru_maxrss may carry over a fork)
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
bare = rss()
os.environ.update({
    "AVM_TABLE_NAME": "agentvm", "AVM_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/t.fifo",
    "AVM_WS_ENDPOINT": "https://a.execute-api.us-east-1.amazonaws.com/prod",
    "AVM_AUTH_SECRET": "x" * 48, "AVM_AUTH_SECRET_PARAMETER": "/agentvm/auth-secret",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x", "POWERTOOLS_SERVICE_NAME": "agentvm",
})
from functions.turn_worker import app
app.lambda_handler.prime()  # what Lambda's init does (AWS_LAMBDA_FUNCTION_NAME set)
worker = rss()
import anthropic, openai
anthropic.AsyncAnthropic(api_key="x"); openai.AsyncOpenAI(api_key="x")
print(json.dumps({"bare": bare, "worker": worker, "sdks": rss()}))
"""


@dataclass(frozen=True)
class Memory:
    bare_mb: float  # an empty interpreter here
    init_mb: float  # after the worker's init (handler imported, runtime and clients built)
    sdks_mb: float  # ... and the provider SDKs loaded
    batch: int
    batch_heap_mb: float  # the heap a worker invocation of ``batch`` turns adds at its peak

    @property
    def peak_mb(self) -> float:
        """The estimate of Lambda's "Max Memory Used" for such an invocation."""
        return self.sdks_mb + self.batch_heap_mb + LAMBDA_RUNTIME_MB


def init_rss() -> dict[str, float]:
    code = _INIT.replace("ROOT", repr(str(ROOT)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def batch_heap_mb(batch: int) -> float:
    """The ``tracemalloc`` peak above the start of each worker invocation, the largest of two rounds."""
    from benchmarks import cost_meter, moto_turns

    cost_meter._import_as_in_lambda()
    d = cost_meter.read_template()
    peaks: list[float] = []
    invoke = moto_turns.Host.invoke

    def traced(self: moto_turns.Host, name: str, event: dict, bucket: str, *, turns: int = 0):  # type: ignore[no-untyped-def]
        if name != "turn_worker":
            return invoke(self, name, event, bucket, turns=turns)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            return invoke(self, name, event, bucket, turns=turns)
        finally:
            peaks.append((tracemalloc.get_traced_memory()[1] - before) / 2**20)
            tracemalloc.stop()

    standard = dataclasses.replace(moto_turns.StandardTurn(), batch=True)
    moto_turns.Host.invoke = traced  # type: ignore[method-assign]
    try:
        moto_turns.run_scenario(
            "memory",
            batch,
            2 * batch,
            standard=standard,
            memory_mb=d.memory_mb,
            schema=d.schema,
            environment=d.powertools_env,
        )
    finally:
        moto_turns.Host.invoke = invoke  # type: ignore[method-assign]
    return max(peaks)


def measure(batch: int = 10) -> Memory:
    rss = init_rss()
    return Memory(rss["bare"], rss["worker"], rss["sdks"], batch, batch_heap_mb(batch))


def render(m: Memory, memory_mb: int) -> str:
    return (
        f"Turn worker memory (`benchmarks/worker_memory.py`): {m.init_mb:.0f} MB after its init "
        f"({m.bare_mb:.0f} MB an empty interpreter), {m.sdks_mb:.0f} MB with the Anthropic and OpenAI SDKs "
        f"loaded, and a batch of {m.batch} standard turns adds at most {m.batch_heap_mb:.0f} MB of heap "
        f"(moto's included): with ~{LAMBDA_RUNTIME_MB} MB for Lambda's runtime, about {m.peak_mb:.0f} MB "
        f"at the peak, against the {memory_mb} MB template.yaml gives it."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=10, help="turns per worker invocation")
    args = parser.parse_args()
    from benchmarks.cost_meter import read_template

    print(render(measure(args.batch), read_template().memory_mb["turn_worker"]))


if __name__ == "__main__":
    main()
