"""Smoke test of the cost meter (benchmarks/cost_meter.py): two standard turns per scenario through
the WebSocket path's handlers on moto, every request metered. Checks that what is billed is what
the clients saw, and that batching turns shares the worker's wait."""

from __future__ import annotations

import pytest

from benchmarks import cost_meter
from benchmarks.billing import WS_MESSAGE

pytestmark = pytest.mark.aws


@pytest.fixture(scope="module")
def result() -> cost_meter.Result:
    return cost_meter.run(2, init_runs=0)  # INIT is measured in fresh interpreters: seconds, not checked here


def test_websocket_messages_billed_are_the_messages_the_clients_received_and_sent(result):
    for s in [*result.scenarios.values(), *result.sdk_scenarios.values()]:
        billed = sum(
            inv.inbound_ws_units + sum(c.units for c in inv.calls if c.kind == WS_MESSAGE)
            for inv in s.invocations
        )
        assert s.frames_received > 0 and s.frames_sent > 0
        assert billed / s.turns == (s.messages_received + s.frames_sent) / s.turns  # every one < 32 KB
    for s in result.scenarios.values():
        assert s.messages_received == s.frames_received  # a plain AgentX client: one frame per message


def test_the_sdk_client_gets_the_same_frames_in_fewer_messages(result):
    for name, s in result.sdk_scenarios.items():
        plain = result.scenarios[name]
        assert s.frame_types == plain.frame_types
        # live text (the default) in as many windows as a plain client's, the rest merged (the
        # economy cadence's far fewer: the test below)
        assert s.messages_received < 0.85 * plain.messages_received
        assert (
            result.sdk_bills[name].units["WebSocket messages"]
            < result.bills[name].units["WebSocket messages"]
        )
        assert result.sdk_bills[name].units["DynamoDB writes"] == result.bills[name].units["DynamoDB writes"]


def test_the_sdk_client_is_subscribed_by_the_server_and_sends_no_subscribe_frame(result):
    for name, s in result.sdk_scenarios.items():
        plain = result.scenarios[name]
        assert s.sessions == plain.sessions > 0
        # per session, the plain client's `subscribe` (one image listed) is the frame the SDK saves
        assert s.frames_sent == plain.frames_sent - plain.sessions


def test_every_request_is_priced_and_belongs_to_an_invocation(result):
    for s in result.scenarios.values():
        assert s.unattributed_calls == 0
        assert all(c.kind != "unpriced" for inv in s.invocations for c in inv.calls)


def test_the_turn_streams_on_the_simulated_clock(result):
    expected = cost_meter.ideal_text_frames(
        result.standard, result.scenarios["idle"].flush_s, result.scenarios["idle"].flush_max_s
    )
    for s in result.scenarios.values():
        assert s.frame_types["text_delta"] == expected * s.turns
        assert s.stream_s == pytest.approx([result.standard.model_wall_s] * s.turns)


def test_a_turn_costs_dynamodb_writes_and_money(result):
    for b in result.bills.values():
        assert b.units[cost_meter.WRITES] > 0
        assert b.units[cost_meter.READS] > 0
        assert b.total > 0


def test_a_batch_shares_the_worker_wait_so_load_costs_less_per_turn(result):
    idle, load = result.bills["idle"], result.bills["load"]
    assert result.scenarios["load"].batch == 2
    worker = cost_meter.GBS.format("turn_worker")
    assert load.units[worker] < idle.units[worker]
    assert load.total < idle.total


def test_the_report_names_the_targets(result):
    text = cost_meter.render(result)
    assert "| **total** |" in text and "≤ $20" in text and "≤ $45" in text
    assert "### Against the goals" in text and "SDK client" in text and "AgentX v1 client" in text


def test_the_standard_tool_turn_bills_its_tool_step(result):
    tool, plain = result.tool_bills["load"], result.bills["load"]
    # the call and result messages and the second step's usage record are written...
    assert tool.units["DynamoDB writes"] >= plain.units["DynamoDB writes"] + 3
    # ...its tool frames and the second model message reach the client...
    frames = result.tool_scenarios["load"].frame_types
    for kind in ("tool_use_start", "tool_use_stop", "tool_call_message", "tool_result", "tool_completed"):
        assert frames.get(kind, 0) > 0, kind
    assert tool.units["WebSocket messages"] >= plain.units["WebSocket messages"] + 10
    # ...and it costs more than the plain turn, less than three of them
    assert plain.total < tool.total < 3 * plain.total
    assert "### The standard tool turn" in cost_meter.render(result)


def test_the_sandbox_turn_suspends_on_its_job_instead_of_waiting(result):
    job_s, stream_s = result.standard.sandbox_job_s, result.standard.model_wall_s
    for s in result.sandbox_scenarios.values():
        assert s.unattributed_calls == 0
        assert all(c.kind != "unpriced" for inv in s.invocations for c in inv.calls)
        workers = [i for i in s.invocations if i.function == "turn_worker"]
        jobs = [i for i in s.invocations if i.function == "sandbox_worker"]
        assert len(jobs) == s.turns and sum(i.turns for i in workers) == 2 * s.turns
        assert all(i.simulated_s >= job_s - 1e-9 for i in jobs)
        # Each worker invocation is one model stream at most: none of them waited on the job.
        assert all(i.simulated_s < stream_s + job_s / 2 for i in workers)
    for b in result.sandbox_bills.values():
        assert b.units[cost_meter.S3R] > 0 and b.units[cost_meter.S3W] > 0
        assert b.units[cost_meter.GBS.format("sandbox_worker")] > 0


def test_the_v2_client_gets_its_answer_from_the_worker_and_one_more_event_per_turn(result):
    for name, s in result.v2_scenarios.items():
        v1 = result.scenarios[name]
        assert s.unattributed_calls == 0
        # message.send's answer replaces message_send_response; turn_response is one more event
        assert s.frame_types["rpc_response"] == s.turns + s.sessions  # + each session's image.list
        assert s.frame_types["turn_response"] == s.turns and "message_send_response" not in s.frame_types
        assert s.frames_received == v1.frames_received + s.turns
        assert s.frame_types["text_delta"] == v1.frame_types["text_delta"]
    assert "AgentX v2 (JSON-RPC 2.0)" in cost_meter.render(result)


def test_the_usage_rollup_is_metered_and_spread_over_the_turns(result):
    for s in result.scenarios.values():
        [rollup] = [i for i in s.invocations if i.function == "usage_rollup"]
        operations = {c.operation for c in rollup.calls}
        # the open hour markers, each tenant hour's marker and records, its sums (day part, commit)
        assert {"Query", "GetItem", "UpdateItem"} <= operations
        assert "TransactWriteItems" not in {c.operation for i in s.invocations for c in i.calls}
    assert "| usage_rollup | " in cost_meter.render(result)


def test_the_economy_cadence_gets_the_same_frames_in_fewer_messages_than_live(result):
    for name, economy in result.economy_scenarios.items():
        live = result.sdk_scenarios[name]
        assert economy.frame_types == live.frame_types  # the same turn, frame for frame
        assert economy.messages_received < 0.5 * live.messages_received  # text every 2 s, not 250 ms
        assert (
            result.economy_bills[name].units["WebSocket messages"]
            < result.sdk_bills[name].units["WebSocket messages"]
        )
    assert "| economy |" in cost_meter.render(result)
