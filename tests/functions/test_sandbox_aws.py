"""Sandbox turns on the AWS host (moto): the turn worker suspends on each sandbox job, the job
goes over the sandbox queue to ``functions/sandbox_worker`` (workspace synced from S3 into a
fresh directory every time), and its result continues the turn in a new turn-worker invocation.
While a job is pending no turn-worker invocation runs or holds a job."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agentvm.adapters.aws.sqs_sandbox_jobs import SqsSandboxJobs
from agentvm.adapters.llm.scripted import Calls, ScriptedModelClient, SingleModelResolver
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces
from agentvm.agent.tools.sources import ToolSources
from agentvm.hosts.aws import run_sync
from functions.sandbox_worker import app as sandbox_worker
from tests.functions.aws_host import aws_host, frame
from tests.functions.conftest import FakeLambdaContext
from tests.integration.test_sandbox_hostile_files import SWAPPER

pytestmark = pytest.mark.aws

BUCKET = "agentvm-workspaces"
SANDBOX = {"type": "sandbox", "wallS": 5, "cpuS": 5, "memoryMb": 256, "outputBytes": 4096}


class Sandboxes:
    """The AWS host plus the sandbox queue, the workspace bucket and the sandbox worker."""

    def __init__(self, host, tmp_path) -> None:
        self.host = host
        self.sqs = host.sqs
        self.url = self.sqs.create_queue(
            QueueName="agentvm-sandbox.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
        )["QueueUrl"]
        self.arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.s3 = boto3.client("s3", region_name="us-east-1")
        self.s3.create_bucket(Bucket=BUCKET)
        self.jobs = SqsSandboxJobs(self.url, client=self.sqs)
        self.tmp = tmp_path
        self.runs = 0
        self.sandbox_factory = LocalSandbox  # isolated with bubblewrap where it runs (not on Lambda)
        self.leftovers = False  # a test whose job leaves a process behind (its directory may stay)

    def turn_runtime(self):
        return self.host.runtime(tools=ToolSources(remote_sandbox=True), sandbox_jobs=self.jobs)

    def turn_worker(self) -> None:
        """One turn-worker invocation (its own runtime) for what the turn queue holds."""
        self.host.run_turns(self.host.worker(self.turn_runtime()))

    def sandbox_worker(self) -> int:
        """One sandbox-worker invocation per queued job, each in a fresh scratch directory."""
        from agentvm.adapters.aws.sqs_queue import lambda_sqs_event

        done = 0
        while messages := self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=1, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages"):
            self.runs += 1
            scratch = self.tmp / f"lambda-{self.runs}"
            scratch.mkdir()
            handler = sandbox_worker.build_handler(
                self.host.runtime(),
                workspaces=S3Workspaces(BUCKET, client=self.s3),
                scratch=scratch,
                sandbox_factory=self.sandbox_factory,
            )
            response = handler(lambda_sqs_event(messages, self.arn), FakeLambdaContext())
            assert response == {"batchItemFailures": []}
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=messages[0]["ReceiptHandle"])
            if not self.leftovers:  # outside Lambda nothing kills a detached leftover before the removal
                assert list(scratch.iterdir()) == []  # the job's directory is gone after the job
            done += 1
        return done

    def run(self) -> None:
        """Turn worker and sandbox worker, as the queues drive them, until both are empty."""
        while True:
            self.turn_worker()
            _nothing_runs_or_waits(self.host)  # the turn is suspended: no turn worker holds it
            if not self.sandbox_worker():
                return


def _nothing_runs_or_waits(host) -> None:
    attrs = host.sqs.get_queue_attributes(QueueUrl=host.queue_url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.fixture
def model():
    return ScriptedModelClient()


@pytest.fixture
def world(model, tmp_path):
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        yield Sandboxes(host, tmp_path)


def _image(host, conn: str, tenant: str = "default", container: str = "user-alice") -> dict:
    host.connect(conn, tenant)
    host.request(conn, "container_create", containerId=container)
    config = {"name": "Coder", "tools": [SANDBOX]}
    record = host.request(conn, "image_create", containerId=container, config=config)["record"]
    host.send(conn, {"type": "subscribe", "sessionId": record["sessionId"]})
    return record


def _results(host, conn: str) -> list[dict]:
    return [f["data"] for f in host.session_events(conn) if f["type"] == "tool_result"]


def test_the_model_writes_runs_and_reads_a_file_and_it_persists_to_the_next_turn(world, model):
    host = world.host
    img = _image(host, "conn-a")
    model.add(
        Calls(("write", {"path": "hi.py", "content": "print(6*7)"})),
        Calls(("sh", {"command": "python3 hi.py > out.txt; cat out.txt"})),
        Calls(("read", {"path": "out.txt"})),
        "It printed 42.",
    )
    host.send("conn-a", frame("message_send", "req_1", imageId=img["imageId"], content="compute"))
    world.run()

    results = _results(host, "conn-a")
    assert results[0]["result"] == "wrote 10 bytes to hi.py"
    assert results[1]["result"].startswith("42\n") and "[exit code 0]" in results[1]["result"]
    assert results[2]["result"] == "42\n"
    ends = [f["data"]["reason"] for f in host.session_events("conn-a") if f["type"] == "conversation_end"]
    assert ends == ["completed"] and world.runs == 3
    kinds = [
        w["kind"]
        for f in host.session_events("conn-a")
        if f["type"] == "turn_suspended"
        for w in f["data"]["waitingFor"]
    ]
    assert kinds == ["sandbox"] * 3
    keys = sorted(o["Key"].rsplit("/", 1)[1] for o in world.s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["hi.py", "out.txt"]
    changed = [
        (f["data"]["path"], f["data"]["change"]) for f in host.frames("conn-a") if f["type"] == "file_changed"
    ]
    assert changed == [("hi.py", "created"), ("out.txt", "created")]  # the worker's changes, sent by the turn

    # The next turn, in new invocations with new scratch directories, finds the file in S3.
    model.add(Calls(("sh", {"command": "python3 hi.py && ls"})), "Still there.")
    host.send("conn-a", frame("message_send", "req_2", imageId=img["imageId"], content="again"))
    world.run()
    assert "hi.py" in _results(host, "conn-a")[3]["result"]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("while true; do :; done", "wall-time limit"),
        ("yes spam", "printed more than 4096 bytes"),
        ("python3 -c 'x = bytearray(1024 * 1024 * 1024)'", "out of memory (limit 256 MB)"),
    ],
)
def test_a_job_past_its_limit_is_stopped_and_the_model_is_told(world, model, command, why):
    host = world.host
    img = _image(host, "conn-a")
    model.add(Calls(("sh", {"command": command})), "That failed.")
    host.send("conn-a", frame("message_send", "req_1", imageId=img["imageId"], content="go"))
    world.run()
    [result] = _results(host, "conn-a")
    assert result["isError"] is True
    assert why in result["result"]


def test_one_tenants_sandbox_cannot_read_anothers_workspace(world, model):
    host = world.host
    a = _image(host, "conn-a", tenant="tenant-a")
    model.add(Calls(("write", {"path": "secret.txt", "content": "A's secret"})), "Saved.")
    host.send("conn-a", frame("message_send", "req_1", imageId=a["imageId"], content="save"))
    world.run()

    b = _image(host, "conn-b", tenant="tenant-b")  # the same container id, another tenant
    model.add(
        Calls(
            ("read", {"path": "secret.txt"}),
            ("sh", {"command": "cat ../*/secret.txt; ls -a ..; find / -name secret.txt 2>/dev/null"}),
            (
                "read",
                {"path": "../" + S3Workspaces.prefix("tenant-a", "user-alice").split("/")[1] + "/secret.txt"},
            ),
        ),
        "Nothing.",
    )
    host.send("conn-b", frame("message_send", "req_2", imageId=b["imageId"], content="steal"))
    world.run()
    results = _results(host, "conn-b")
    assert len(results) == 3
    assert not any("A's secret" in r["result"] for r in results)
    assert results[0]["isError"] and results[2]["isError"]
    prefixes = {o["Key"].split("/")[1] for o in world.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert len(prefixes) == 1  # B wrote nothing, and into no other prefix


def test_a_job_answered_already_is_dropped_without_running(world, model):
    host = world.host
    img = _image(host, "conn-a")
    model.add(Calls(("write", {"path": "late.txt", "content": "x"})))
    host.send("conn-a", frame("message_send", "req_1", imageId=img["imageId"], content="go"))
    world.turn_worker()
    host.request("conn-a", "agent_interrupt", imageId=img["imageId"])  # cancels the wait
    world.sandbox_worker()
    assert world.s3.list_objects_v2(Bucket=BUCKET).get("Contents") is None  # the job never ran
    world.turn_worker()
    ends = [f["data"]["reason"] for f in host.session_events("conn-a") if f["type"] == "conversation_end"]
    assert ends == ["interrupted"]
    assert run_sync(host.runtime().waits.list_waits("default")) == []


def test_a_symlink_out_of_the_workspace_is_never_stored(world, model):
    host = world.host
    img = _image(host, "conn-a")
    model.add(
        Calls(("sh", {"command": "ln -s /etc/passwd leak; ln -s /proc/self/environ env; echo ok > kept"})),
        "Done.",
    )
    host.send("conn-a", frame("message_send", "req_1", imageId=img["imageId"], content="go"))
    world.run()
    keys = [o["Key"].rsplit("/", 1)[1] for o in world.s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == ["kept"]


def test_a_leftover_process_swapping_links_during_the_push_never_uploads_a_worker_file(
    world, model, tmp_path
):
    """On Lambda a job is a plain process of the worker's user: one that detaches (``setsid``)
    lives on while the workspace is pushed, swapping files and directories with links to the
    worker's files. The push stores decoys or nothing, never the worker's bytes."""
    world.sandbox_factory = lambda root: LocalSandbox(root, isolate=False)
    world.leftovers = True
    worker_files = tmp_path / "worker"
    worker_files.mkdir()
    (worker_files / "secret.txt").write_text("WORKER SECRET")
    (tmp_path / "swapper.py").write_text(SWAPPER)
    targets = " ".join([str(worker_files)] * 20)
    command = f"setsid python3 {tmp_path}/swapper.py 4 {targets} >/dev/null 2>&1 & sleep 0.5; echo started"
    host = world.host
    img = _image(host, "conn-a")
    for n in range(3):
        model.add(Calls(("sh", {"command": command})), "Started.")
        host.send("conn-a", frame("message_send", f"req_{n}", imageId=img["imageId"], content="go"))
        world.run()
    assert all("started" in r["result"] for r in _results(host, "conn-a"))
    stored = world.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    bodies = [world.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in stored]
    assert stored and not any(b"WORKER SECRET" in body for body in bodies)


def test_an_interrupt_stops_a_running_job_and_kills_what_it_started(world, model, tmp_path, monkeypatch):
    """The turn is interrupted while its job runs on the sandbox worker: the worker sees the wait
    cancelled, kills the job (a plain process, as on Lambda) and its child, and answers nothing."""
    from agentvm.hosts import aws as aws_hosts
    from agentvm.turns import sandbox_jobs

    monkeypatch.setattr(sandbox_jobs, "WAIT_POLL_S", 0.2)
    world.sandbox_factory = lambda root: LocalSandbox(root, isolate=False)
    marker = tmp_path / "survived.txt"
    host = world.host
    img = _image(host, "conn-a")
    command = f"(sleep 2; echo child > {marker}.child) & sleep 2; echo survived > {marker}"
    model.add(Calls(("sh", {"command": command})), "Done.")
    host.send("conn-a", frame("message_send", "req_1", imageId=img["imageId"], content="go"))
    world.turn_worker()  # the turn suspends on the job
    main_loop = aws_hosts.event_loop()
    worker_loop = asyncio.new_event_loop()  # the sandbox worker is another Lambda: its own loop
    monkeypatch.setattr(
        aws_hosts, "event_loop", lambda: worker_loop if threading.current_thread() is worker else main_loop
    )
    worker = threading.Thread(target=world.sandbox_worker)
    worker.start()
    time.sleep(0.8)  # the job is running
    host.request("conn-a", "agent_interrupt", imageId=img["imageId"])
    worker.join(30)
    assert not worker.is_alive()
    worker_loop.close()
    time.sleep(2.5)  # past the moment the job and its child would have written
    assert not marker.exists() and not Path(f"{marker}.child").exists()
    world.turn_worker()
    ends = [f["data"]["reason"] for f in host.session_events("conn-a") if f["type"] == "conversation_end"]
    assert ends == ["interrupted"]
    results = _results(host, "conn-a")  # the cancelled call's own answer, from the turn, not the job
    assert all(r["isError"] and "interrupted" in r["result"] for r in results), results
