"""Workspace changes reach the client: each sandbox tool call that creates, modifies or deletes
files is followed by one ``file_changed`` event per file (source ``sandbox``, category
``workdir``), in the turn's numbered stream; reads and listings send none."""

from __future__ import annotations

from typing import Any

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.agent.tools.sources import ToolSources
from tests.harness import Harness


def _changes(frames: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["data"]["path"], f["data"]["change"]) for f in frames if f["type"] == "file_changed"]


async def test_file_changes_are_sent_after_each_sandbox_tool_result(tmp_path):
    h = Harness(tmp_path)
    h.rt.tools = ToolSources(sandbox=LocalSandbox(tmp_path / "workspaces", isolate=False))
    c = await h.client()
    img = (await c.request("image_create", containerId="u1", config={"tools": [{"type": "sandbox"}]}))[
        "record"
    ]
    h.model.add(
        Calls(("write", {"path": "src/app.py", "content": "print(1)"})),
        Calls(("edit", {"path": "src/app.py", "old": "1", "new": "2"})),
        Calls(("sh", {"command": "touch a.txt b.txt && rm src/app.py"})),
        Calls(("read", {"path": "a.txt"}), ("ls", {})),
        "Done.",
    )
    await c.request("message_send", imageId=img["imageId"], content="work")
    await h.run_turns()

    frames = c.turn_frames()
    assert _changes(frames) == [
        ("src/app.py", "created"),
        ("src/app.py", "modified"),
        ("a.txt", "created"),
        ("b.txt", "created"),
        ("src/app.py", "deleted"),
    ]
    first = next(f for f in frames if f["type"] == "file_changed")
    assert first["source"] == "sandbox" and first["category"] == "workdir"
    assert first["data"]["size"] == len("print(1)")
    assert first["context"]["imageId"] == img["imageId"]
    # Each comes right after its call's result events.
    types = [f["type"] for f in frames]
    assert types[types.index("file_changed") - 1] == "tool_completed"
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs)
