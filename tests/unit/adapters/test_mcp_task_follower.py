"""How a followed MCP task's statuses become a call's progress (``adapters/mcp/tasks.py``): each new
status or message once, in order; the server's poll interval kept within bounds; which servers run
tool calls as tasks (2025-11-25 capabilities)."""

from __future__ import annotations

import mcp_types as types

from agentvm.adapters.mcp.tasks import MAX_POLL_S, MIN_POLL_S, TaskFollower, supports_tasks


def test_each_new_status_or_message_is_one_progress_report_in_order():
    reports: list[tuple[float, float | None, str | None]] = []
    follower = TaskFollower("t1", lambda p, total, m: reports.append((p, total, m)))
    follower.saw("working", "Gathering sources...", None)
    follower.saw("working", "Gathering sources...", None)  # the same poll answer again: nothing
    follower.saw("working", "Analyzing content...", None)
    follower.saw("working", None, None)
    follower.saw("completed", None, None)  # only the status changed
    assert reports == [
        (1.0, None, "Gathering sources..."),
        (2.0, None, "Analyzing content..."),
        (3.0, None, "task working"),
        (4.0, None, "task completed"),
    ]
    assert follower.ended


def test_the_poll_interval_is_the_servers_within_bounds():
    follower = TaskFollower("t1", None)
    assert not follower.ended
    follower.saw("working", None, 1500)
    assert follower.poll_s == 1.5
    follower.saw("working", None, 1)  # a server asking to be polled every millisecond
    assert follower.poll_s == MIN_POLL_S
    follower.saw("working", None, 3_600_000)
    assert follower.poll_s == MAX_POLL_S
    follower.saw("input_required", None, None)  # no interval: the last one stays
    assert follower.poll_s == MAX_POLL_S and not follower.ended


def test_only_a_server_declaring_task_augmented_tool_calls_runs_them_as_tasks():
    tools_call = types.ServerTasksCapability(
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        )
    )
    assert supports_tasks(types.ServerCapabilities(tasks=tools_call))
    assert not supports_tasks(
        types.ServerCapabilities(tasks=types.ServerTasksCapability())
    )  # list/cancel only
    assert not supports_tasks(types.ServerCapabilities())
    assert not supports_tasks(None)


def test_a_tasks_input_requests_become_questions_only_when_they_are_elicitations():
    from agentvm.adapters.mcp.tasks import question_of
    from agentvm.ports import ElicitationRequest

    schema = {"type": "object", "properties": {"approve": {"type": "boolean"}}}
    form = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "OK?", "requestedSchema": schema},
    }
    url = {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Sign in",
            "url": "https://example.com/x",
            "elicitationId": "e1",
        },
    }
    assert question_of(form) == ElicitationRequest("OK?", schema=schema)
    assert question_of(url) == ElicitationRequest("Sign in", mode="url", url="https://example.com/x")
    assert question_of({"method": "sampling/createMessage", "params": {}}) is None  # not declared
    assert question_of({"method": "elicitation/create", "params": {"message": 3}}) is None  # malformed
