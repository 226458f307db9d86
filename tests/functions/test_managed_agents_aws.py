"""Anthropic's Managed Agents API (``/anthropic/v1``, docs/managed-agents.md) on the AWS host, driven
by the official ``anthropic`` SDK (``client.beta.agents / environments / sessions /
sessions.events``) through the HTTP API handler (Mangum, the same app as ``avm serve``) on moto,
each request an API Gateway payload 2.0 event; the turns run on the turn worker handler, fed from
the SQS FIFO queue (and the sandbox calls on the sandbox worker, fed from its own queue). A tool
confirmation and ``user.interrupt`` run through the same handlers.

API Gateway's HTTP API answers a Lambda's response whole, so the events stream cannot follow a turn
live: opened while a turn is queued or running, it waits for the turn's end (within the wait, 25 s
on AWS) and answers the stored events after its cursor as one body; ``Last-Event-ID`` resumes."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import anthropic
import boto3
import httpx2
import pytest
from anthropic.types.beta.sessions import BetaManagedAgentsStreamSessionEvents
from pydantic import TypeAdapter

from agentvm.adapters.llm.scripted import Calls
from agentvm.hosts.aws import run_sync
from agentvm.records import turn_id_for
from agentvm.runtime import TurnSettings
from functions.sandbox_worker import app as sandbox_worker
from tests.functions.aws_stack import Stack, moto_resources
from tests.functions.lambda_http import Httpx2LambdaTransport, one_loop_per_thread, sqs_event_source

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.aws

SERVER = "https://h7g6f5e4d3.execute-api.us-east-1.amazonaws.com"  # the events' host
MODEL = "scripted/test-1"  # an AgentVM model reference: the stack's scripted model
SANDBOX_QUEUE = "agentvm-sandbox.fifo"
STRICT = TypeAdapter(BetaManagedAgentsStreamSessionEvents)


def _stack(monkeypatch, context, push, wait_s: float, *, sandbox: bool = False):
    one_loop_per_thread(monkeypatch)
    # cancel_poll_s: the worker's poll of its turns' cancel marks (AVM_CANCEL_POLL_MS, 1 s on AWS),
    # which an interrupt sent through the HTTP API reaches the worker Lambda by
    turns = TurnSettings(flush_s=0.01, mcp_call_deadline_s=wait_s, mcp_poll_s=0.05, cancel_poll_s=0.05)
    with moto_resources(monkeypatch) as resources:
        if sandbox:
            sqs = resources.sqs
            queue = sqs.create_queue(QueueName=SANDBOX_QUEUE, Attributes={"FifoQueue": "true"})["QueueUrl"]
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="agentvm-workspaces")
            monkeypatch.setenv("AVM_SANDBOX_QUEUE_URL", queue)
            monkeypatch.setenv("AVM_WORKSPACE_BUCKET", "agentvm-workspaces")
        yield Stack(resources, context, push, turns=turns)


@pytest.fixture
def stack(monkeypatch, context, push):
    yield from _stack(monkeypatch, context, push, wait_s=20.0)


@pytest.fixture
def short_wait_stack(monkeypatch, context, push):
    """The HTTP API waits 0.3 s for a turn (25 s on AWS): a turn no worker took outlasts it."""
    yield from _stack(monkeypatch, context, push, wait_s=0.3)


@pytest.fixture
def transports():
    made: list[Httpx2LambdaTransport] = []
    yield made
    for transport in made:
        transport.close()


def sdk(stack: Stack, transports: list[Httpx2LambdaTransport], key: str) -> anthropic.Anthropic:
    transport = Httpx2LambdaTransport(stack.http_api, stack.context)
    transports.append(transport)
    return anthropic.Anthropic(
        base_url=f"{SERVER}/anthropic",
        api_key=key,
        max_retries=0,
        http_client=httpx2.Client(transport=transport, timeout=60),
    )


def new_session(client: anthropic.Anthropic) -> str:
    agent = client.beta.agents.create(name="Helper", model=MODEL, system="Be brief.")
    env = client.beta.environments.create(name="dev")
    session = client.beta.sessions.create(agent=agent.id, environment_id=env.id, title="first")
    assert (session.status, session.environment_id, session.agent.id) == ("idle", env.id, agent.id)
    return session.id


def say(text: str) -> list[Any]:
    return [{"type": "user.message", "content": [{"type": "text", "text": text}]}]


def streamed(client: anthropic.Anthropic, session_id: str, **kw: Any) -> list[Any]:
    """Every event of one stream, each checked against the API's own types (the SDK only constructs)."""
    with client.beta.sessions.events.stream(session_id, **kw) as stream:
        events = list(stream)
    for event in events:
        STRICT.validate_python(event.to_dict())
    return events


def stream_ids(client: anthropic.Anthropic, session_id: str, after: str) -> list[str]:
    """The SSE ids of one stream's body, as a client resuming later keeps the last one."""
    with client.beta.sessions.events.with_streaming_response.stream(
        session_id, extra_headers={"Last-Event-ID": after}
    ) as raw:
        return [line[4:] for line in raw.iter_lines() if line.startswith("id: ")]


def test_the_sdk_runs_a_session_turn_through_the_lambda_handlers(stack, transports):
    key = stack.new_key("acme", "admin")
    client = sdk(stack, transports, key)
    session_id = new_session(client)
    stack.model.add("Hello from the worker Lambda.")

    with sqs_event_source(stack) as source:
        sent = client.beta.sessions.events.send(session_id, events=say("hello"))
        assert [e.type for e in sent.data] == ["user.message"]
        # Opened while the turn is queued or running: one body once it has ended.
        events = streamed(client, session_id, extra_headers={"Last-Event-ID": "0"})
    assert source.delivered == 1
    kinds = [e.type for e in events]
    assert kinds[0] == "user.message" and kinds[-1] == "session.status_idle"
    assert "session.status_running" in kinds and "span.model_request_end" in kinds
    [message] = [e for e in events if e.type == "agent.message"]
    assert message.content[0].text == "Hello from the worker Lambda."
    assert events[-1].stop_reason.type == "end_turn"
    assert events[0].id == sent.data[0].id

    listed = client.beta.sessions.events.list(session_id)
    for event in listed.data:
        STRICT.validate_python(event.to_dict())
    assert [e.type for e in listed.data if e.type in ("user.message", "agent.message")] == [
        "user.message",
        "agent.message",
    ]
    assert [e.type for e in listed.data][-1] == "session.status_idle"
    session = client.beta.sessions.retrieve(session_id)
    assert session.status == "idle" and session.usage.output_tokens > 0
    assert len(stack.model.requests) == 1


def test_a_stream_on_aws_answers_what_is_stored_and_resumes_after_last_event_id(short_wait_stack, transports):
    stack = short_wait_stack
    client = sdk(stack, transports, stack.new_key("acme", "admin"))
    session_id = new_session(client)
    stack.model.add("First reply.", "Second reply.")

    client.beta.sessions.events.send(session_id, events=say("one"))
    assert client.beta.sessions.retrieve(session_id).status == "running"  # queued on SQS
    assert streamed(client, session_id) == []  # no worker took it within the wait: nothing stored yet
    assert client.beta.sessions.events.list(session_id).data == []

    stack.run_turns()  # the SQS event source mapping hands the job to the worker Lambda
    first = streamed(client, session_id, extra_headers={"Last-Event-ID": "0"})
    assert [e.content[0].text for e in first if e.type == "agent.message"] == ["First reply."]
    assert first[-1].type == "session.status_idle"
    assert streamed(client, session_id) == []  # opened now, with no live turn: from now on

    with client.beta.sessions.events.with_streaming_response.stream(
        session_id, extra_headers={"Last-Event-ID": "0"}
    ) as raw:
        ids = [int(line[4:]) for line in raw.iter_lines() if line.startswith("id: ")]
    client.beta.sessions.events.send(session_id, events=say("two"))
    stack.run_turns()
    rest = streamed(client, session_id, extra_headers={"Last-Event-ID": str(max(ids))})
    assert [e.type for e in rest][0] == "user.message"
    assert [e.content[0].text for e in rest if e.type == "agent.message"] == ["Second reply."]
    assert len(stack.model.requests) == 2


def test_a_wrong_key_and_another_tenants_session_on_aws(stack, transports):
    client = sdk(stack, transports, stack.new_key("acme", "admin"))
    session_id = new_session(client)
    wrong = sdk(stack, transports, "avm_000000000000_wrong")
    with pytest.raises(anthropic.AuthenticationError):
        wrong.beta.sessions.retrieve(session_id)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.beta.agents.list()

    rival = sdk(stack, transports, stack.new_key("rival", "client"))
    for sid in (session_id, "sess_missing_000000000000"):
        with pytest.raises(anthropic.NotFoundError) as retrieved:
            rival.beta.sessions.retrieve(sid)
        with pytest.raises(anthropic.NotFoundError):
            rival.beta.sessions.events.list(sid)
        with pytest.raises(anthropic.NotFoundError):
            rival.beta.sessions.events.send(sid, events=say("hijack"))
        with pytest.raises(anthropic.NotFoundError):
            streamed(rival, sid)
        assert retrieved.value.body["error"]["type"] == "not_found_error"
    stack.run_turns()
    assert stack.model.requests == []  # nothing the rival sent ran
    assert client.beta.sessions.events.list(session_id).data == []


def test_a_custom_tool_round_trip_through_the_lambda_handlers(stack, transports):
    """The turn suspends on the custom tool (its wait in DynamoDB); the result, sent through the HTTP
    API, enqueues the continuation the worker runs."""
    client = sdk(stack, transports, stack.new_key("acme", "admin"))
    tool = {
        "type": "custom",
        "name": "lookup",
        "description": "Look an order up",
        "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}},
    }
    agent = client.beta.agents.create(name="Helper", model=MODEL, tools=[tool])
    env = client.beta.environments.create(name="dev")
    session_id = client.beta.sessions.create(agent=agent.id, environment_id=env.id).id
    stack.model.add(Calls(("lookup", {"order": "42"})), "Order 42 has shipped.")

    with sqs_event_source(stack):
        client.beta.sessions.events.send(session_id, events=say("Where is order 42?"))
        first = streamed(client, session_id, extra_headers={"Last-Event-ID": "0"})
        [use] = [e for e in first if e.type == "agent.custom_tool_use"]
        assert (use.name, use.input) == ("lookup", {"order": "42"})
        assert first[-1].type == "session.status_idle"
        assert first[-1].stop_reason.type == "requires_action" and first[-1].stop_reason.event_ids == [use.id]
        last_seen = max(int(i) for i in stream_ids(client, session_id, "0"))  # the suspension's
        answer = {
            "type": "user.custom_tool_result",
            "custom_tool_use_id": use.id,
            "content": [{"type": "text", "text": "shipped"}],
        }
        client.beta.sessions.events.send(session_id, events=[answer])
        with pytest.raises(anthropic.ConflictError):  # answered already
            client.beta.sessions.events.send(session_id, events=[answer])
        rest = streamed(client, session_id, extra_headers={"Last-Event-ID": str(last_seen)})
    [reply] = [e for e in rest if e.type == "agent.message"]
    assert reply.content[0].text == "Order 42 has shipped."
    [answered] = [e for e in rest if e.type == "user.custom_tool_result"]
    assert answered.custom_tool_use_id == use.id and answered.content[0].text == "shipped"
    assert rest[-1].type == "session.status_idle" and rest[-1].stop_reason.type == "end_turn"
    assert len(stack.model.requests) == 2
    # The whole turn, its suspended part first, each event once (the continued turn's replay).
    kinds = {"user.message", "agent.custom_tool_use", "user.custom_tool_result", "agent.message"}
    listed = [e.type for e in client.beta.sessions.events.list(session_id).data]
    assert [t for t in listed if t in kinds or t == "session.status_idle"] == [
        "user.message",
        "agent.custom_tool_use",
        "session.status_idle",
        "user.custom_tool_result",
        "agent.message",
        "session.status_idle",
    ]


@pytest.fixture
def sandbox_stack(monkeypatch, context, push):
    """The stack with the sandbox queue and the workspace bucket, as ``template.yaml`` gives the turn
    worker: the agent toolset's tools are the sandbox's, each call a job for the sandbox worker
    (without the queue the worker has no such tools: a call to one fails at once, never asked)."""
    yield from _stack(monkeypatch, context, push, wait_s=20.0, sandbox=True)


@contextlib.contextmanager
def both_workers(stack: Stack) -> Iterator[None]:
    """The turn queue's and the sandbox queue's event source mappings, each feeding its function."""
    sqs = stack.resources.sqs
    url = sqs.get_queue_url(QueueName=SANDBOX_QUEUE)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    with sqs_event_source(stack), sqs_event_source(stack, (url, arn), stack.function(sandbox_worker)):
        yield


def asking_session(client: anthropic.Anthropic) -> str:
    toolset = {
        "type": "agent_toolset_20260401",
        "default_config": {"enabled": True, "permission_policy": {"type": "always_ask"}},
    }
    agent = client.beta.agents.create(name="Helper", model=MODEL, tools=[toolset])
    env = client.beta.environments.create(name="dev")
    return client.beta.sessions.create(agent=agent.id, environment_id=env.id).id


def asked(client: anthropic.Anthropic, session_id: str) -> tuple[Any, int]:
    """``user.message`` → the turn suspends on its ``ls`` call: the tool use, and the last SSE id."""
    before = stream_ids(client, session_id, "0")
    client.beta.sessions.events.send(session_id, events=say("What is in the workspace?"))
    events = streamed(client, session_id, extra_headers={"Last-Event-ID": before[-1] if before else "0"})
    [use] = [e for e in events if e.type == "agent.tool_use"]
    assert (use.name, use.evaluated_permission) == ("ls", "ask")
    assert not [e for e in events if e.type == "agent.tool_result"]  # it did not run
    assert events[-1].type == "session.status_idle"
    assert events[-1].stop_reason.type == "requires_action" and events[-1].stop_reason.event_ids == [use.id]
    assert client.beta.sessions.retrieve(session_id).status == "idle"
    return use, max(int(i) for i in stream_ids(client, session_id, "0"))


def test_a_tool_confirmation_denied_then_allowed_through_the_lambda_handlers(sandbox_stack, transports):
    """An ``always_ask`` toolset: the turn suspends on the sandbox call (its approval wait in
    DynamoDB); a denial continues it with the model told, an approval runs the call on the sandbox
    worker, then the reply."""
    stack = sandbox_stack
    client = sdk(stack, transports, stack.new_key("acme", "admin"))
    session_id = asking_session(client)
    ls = Calls(("ls", {"path": "."}))
    stack.model.add(ls, "Not allowed, then.", ls, "The workspace is empty.")

    with both_workers(stack):
        use, last_seen = asked(client, session_id)
        denial = {
            "type": "user.tool_confirmation",
            "tool_use_id": use.id,
            "result": "deny",
            "deny_message": "no",
        }
        client.beta.sessions.events.send(session_id, events=[denial])
        denied = streamed(client, session_id, extra_headers={"Last-Event-ID": str(last_seen)})
        [result] = [e for e in denied if e.type == "agent.tool_result"]
        assert result.tool_use_id == use.id and result.content[0].text == "Execution denied: no"
        assert [e.content[0].text for e in denied if e.type == "agent.message"] == ["Not allowed, then."]
        assert denied[-1].type == "session.status_idle" and denied[-1].stop_reason.type == "end_turn"
        [told] = stack.model.requests[1].messages[-1].tool_results
        assert told.content == "Execution denied: no"

        use, last_seen = asked(client, session_id)
        allowed = {"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}
        client.beta.sessions.events.send(session_id, events=[allowed])
        with pytest.raises(anthropic.ConflictError):  # answered already
            client.beta.sessions.events.send(session_id, events=[allowed])
        ran = streamed(client, session_id, extra_headers={"Last-Event-ID": str(last_seen)})
    [result] = [e for e in ran if e.type == "agent.tool_result"]
    assert result.tool_use_id == use.id and result.is_error is False  # run by the sandbox worker
    assert [e.content[0].text for e in ran if e.type == "agent.message"] == ["The workspace is empty."]
    assert ran[-1].type == "session.status_idle" and ran[-1].stop_reason.type == "end_turn"
    assert client.beta.sessions.retrieve(session_id).status == "idle"
    assert len(stack.model.requests) == 4


def test_an_interrupt_through_the_http_api_stops_the_workers_running_turn(stack, transports):
    """``user.interrupt`` in the HTTP API Lambda writes the turn's cancel mark; the worker Lambda
    running the turn (another thread, as another execution environment) sees it at its next cancel
    poll, stops streaming, keeps the partial reply and ends the turn interrupted."""
    client = sdk(stack, transports, stack.new_key("acme", "admin"))
    session_id = new_session(client)
    stack.model.word_delay_s = 0.02
    words = [f"word{i}" for i in range(600)]  # 20 ms a word: twelve seconds
    stack.model.add(" ".join(words))

    with sqs_event_source(stack):
        client.beta.sessions.events.send(session_id, events=say("Talk for a while."))
        deadline = time.monotonic() + 10
        while not stack.model.requests and time.monotonic() < deadline:  # the worker is streaming
            time.sleep(0.02)
        time.sleep(0.3)
        sent = client.beta.sessions.events.send(session_id, events=[{"type": "user.interrupt"}])
        assert sent.data[0].type == "user.interrupt"
        events = streamed(client, session_id, extra_headers={"Last-Event-ID": "0"})
    kinds = [e.type for e in events]
    assert kinds[0] == "user.message" and kinds[-1] == "session.status_idle"
    [partial] = [e for e in events if e.type == "agent.message"]  # kept, as the local host keeps it
    said = partial.content[0].text.split()
    assert 0 < len(said) < len(words) and said == words[: len(said)]
    assert stack.model.closed_early == 1  # the model's stream was cut, not read to its end
    assert client.beta.sessions.retrieve(session_id).status == "idle"
    turn = run_sync(stack.runtimes["http_api"].store.get_turn(turn_id_for(events[0].id)))
    assert turn is not None and turn.status == "interrupted"
