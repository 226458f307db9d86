"""The typed SDK against a real ``avm serve`` (echo model): turns, tools, approvals, client-side
tools, interrupts, history, the sync client, and a connection cut mid-turn that the client
repairs by itself (reconnect + resume through a loopback proxy that drops every socket)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from agentvm.client import (
    AgentVMClient,
    AssistantMessage,
    ClientToolRequestedEvent,
    ConnectionLost,
    ConversationEndEvent,
    MessagePersistedEvent,
    RequestFailed,
    SyncAgentVMClient,
    TextDeltaEvent,
    ToolApprovalRequestedEvent,
    ToolCallMessage,
    ToolCompletedEvent,
    ToolFailedEvent,
    ToolResultMessage,
    ToolUseStopEvent,
    TurnSuspendedEvent,
    UserMessage,
)
from tests.integration.avm_process import avm_serve, base_env, free_port

CALC = {"type": "builtin", "name": "calculator"}
SLOW = {"AVM_ECHO_DELAY_MS": "25", "AVM_FLUSH_MS": "10", "AVM_BATCH_FLUSH_MS": "10"}  # text mid-turn
LONG = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def server(tmp_path):
    with avm_serve(tmp_path, free_port(), env=base_env(**SLOW)) as server:
        yield server


async def test_a_typed_turn_streams_text_and_ends_with_the_stored_reply(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("user-alice", name="Helper", system_prompt="Be brief.")
        events = [event async for event in client.send(image.imageId, "Hello!")]
        history = await client.history(image.imageId)

    types = [type(e).__name__ for e in events]
    assert types[0] == "MessagePersistedEvent" and types[-1] == "ConversationEndEvent"
    assert "".join(e.data.text for e in events if isinstance(e, TextDeltaEvent)) == "Echo: Hello!"
    assert all(e.context is not None and e.context.imageId == image.imageId for e in events)
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert history[1].content[0].text == "Echo: Hello!"


async def test_awaiting_a_turn_runs_it_and_keeps_text_usage_and_end(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u")
        turn = await client.send(image.imageId, "one two three")

    assert (turn.text, turn.end_reason, turn.done) == ("Echo: one two three", "completed", True)
    assert turn.usage is not None and turn.usage.outputTokens == 4
    assert turn.turn_id and turn.turn_id.startswith("turn_")
    assert isinstance(turn.events[0], MessagePersistedEvent)


async def test_a_tool_call_that_needs_approval_is_approved_from_the_turn(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u", tools=[CALC], approval={"tools": ["calculator"]})
        turn = client.send(image.imageId, '/tool calculator {"expression": "6*7"}')
        async for event in turn:
            if isinstance(event, ToolApprovalRequestedEvent):
                assert event.data.input == {"expression": "6*7"}
                await turn.approve(event)
        denied = client.send(image.imageId, '/tool calculator {"expression": "1/0"}')
        async for event in denied:
            if isinstance(event, ToolApprovalRequestedEvent):
                await denied.deny(event, "not today")

    kinds = [type(e) for e in turn.events]
    assert (
        kinds.index(ToolApprovalRequestedEvent)
        < kinds.index(TurnSuspendedEvent)
        < kinds.index(ToolCompletedEvent)
    )
    assert turn.text == "Echo: calculator returned: 42" and turn.end_reason == "completed"
    [failed] = [e for e in denied.events if isinstance(e, ToolFailedEvent)]
    assert failed.data.error == "Execution denied: not today"


async def test_a_client_side_tool_is_answered_by_the_registered_function(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        calls = []

        @client.tool(input_schema={"type": "object", "properties": {"title": {"type": "string"}}})
        def pick_file(title: str) -> dict:
            """Ask the user to pick a file."""
            calls.append(title)
            return {"path": f"/home/{title}.txt"}

        image = await client.create_image("u", tools=[pick_file])
        turn = await client.send(image.imageId, '/tool pick_file {"title": "notes"}')
        broken = client.send(image.imageId, '/tool pick_file {"name": "wrong"}')
        await broken
        history = await client.history(image.imageId)

    assert calls == ["notes"]
    assert any(isinstance(e, ClientToolRequestedEvent) for e in turn.events)
    assert turn.text == 'Echo: pick_file returned: {"path": "/home/notes.txt"}'
    assert "TypeError" in broken.text  # the model read the function's error; the turn went on
    assert broken.end_reason == "completed"
    assert [type(m) for m in history[:4]] == [
        UserMessage,
        ToolCallMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    assert pick_file.declaration()["description"] == "Ask the user to pick a file."


async def test_a_client_tool_declares_its_type_hints_and_the_model_is_held_to_them(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        calls = []

        @client.tool()
        def resize(width: int, height: int = 100) -> str:
            """Resize the picture."""
            calls.append((width, height))
            return f"{width}x{height}"

        assert resize.declaration()["inputSchema"] == {
            "type": "object",
            "properties": {"width": {"type": "integer"}, "height": {"type": "integer", "default": 100}},
            "required": ["width"],
        }
        image = await client.create_image("u", tools=[resize])
        done = await client.send(image.imageId, '/tool resize {"width": 640}')
        refused = await client.send(image.imageId, '/tool resize {"width": "wide"}')

    assert calls == [(640, 100)]  # the wrong input never reached the function
    assert done.text == "Echo: resize returned: 640x100"
    assert "invalid input for resize: 'wide' is not of type 'integer'" in refused.text  # what the model read
    assert refused.end_reason == "completed"


async def test_interrupting_a_turn_ends_it_as_interrupted_with_the_partial_reply(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u")
        turn = client.send(image.imageId, LONG)
        async for event in turn:
            if isinstance(event, TextDeltaEvent) and len(turn.text) > 20:
                await turn.interrupt()
        history = await client.history(image.imageId)

    assert turn.end_reason == "interrupted"
    assert isinstance(turn.events[-1], ConversationEndEvent)
    assert 20 < len(turn.text) < len("Echo: " + LONG)
    assert history[-1].content[0].text == turn.text


async def test_a_refused_message_raises_with_the_servers_code(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        with pytest.raises(RequestFailed) as refused:
            await client.send("img_nope", "hi")
        assert refused.value.code == "not_found"
        assert await client.get_image("img_nope") is None
        image = await client.create_image("u", concurrency="reject")
        first = client.send(image.imageId, LONG)
        await first.start()
        with pytest.raises(RequestFailed) as busy:
            await client.send(image.imageId, "again")
        assert busy.value.code == "session_busy"
        await first


async def test_an_images_custom_data_is_kept_returned_and_replaced_by_an_update(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u", name="Tagged", custom_data={"favorited": True, "tags": ["a"]})
        assert image.customData == {"favorited": True, "tags": ["a"]}
        updated = await client.update_image(image.imageId, custom_data={"sortOrder": 3})
        assert updated.customData == {"sortOrder": 3}
        got = await client.get_image(image.imageId)
        assert got is not None and got.customData == {"sortOrder": 3}
        plain = await client.create_image("u")
        assert plain.customData is None


def test_the_sync_client_streams_a_turn_and_reads_history(server):
    with SyncAgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = client.create_image("u", name="Sync")
        turn = client.send(image.imageId, "sync hello")
        text = "".join(e.data.text for e in turn if isinstance(e, TextDeltaEvent))
        awaited = client.send(image.imageId, "second").wait()
        images = client.list_images("u")
        history = client.history(image.imageId)

    assert text == "Echo: sync hello" == turn.text
    assert awaited.text == "Echo: second" and awaited.end_reason == "completed"
    assert [i.imageId for i in images] == [image.imageId]
    assert len(history) == 4


class CuttingProxy:
    """A loopback TCP proxy in front of the server whose ``cut()`` drops every open connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._pairs.append((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.close()

    def cut(self) -> None:
        for a, b in self._pairs:
            for writer in (a, b):
                transport = writer.transport
                if transport is not None:
                    transport.abort()
        self._pairs.clear()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


async def test_a_connection_cut_mid_turn_is_reopened_and_the_turn_resumes_exactly(server):
    token = server.admin_token()
    async with CuttingProxy(server.port) as proxy, AgentVMClient.connect(proxy.url, token=token) as client:
        image = await client.create_image("u")
        turn = client.send(image.imageId, LONG)
        cuts = 0
        async for event in turn:
            if isinstance(event, TextDeltaEvent) and cuts < 2 and len(turn.text) > 40 * (cuts + 1):
                cuts += 1
                proxy.cut()  # the socket drops under the client, twice, mid-stream
        history = await client.history(image.imageId)
        reconnects = client.reconnects

    assert reconnects == 2
    seqs = [e.seq for e in turn.events]
    assert seqs == sorted(set(seqs))  # every frame once, in order
    assert turn.text == "Echo: " + LONG == history[-1].content[0].text
    assert turn.end_reason == "completed"


async def test_a_request_in_flight_when_the_connection_drops_is_sent_again_if_safe(server):
    token = server.admin_token()
    async with CuttingProxy(server.port) as proxy, AgentVMClient.connect(proxy.url, token=token) as client:
        image = await client.create_image("u")
        proxy.cut()
        # sent while the client notices the drop and reconnects: answered on the new socket
        listed = await client.list_images("u")
        turn = await client.send(image.imageId, "after the cut")
    assert [i.imageId for i in listed] == [image.imageId]
    assert turn.text == "Echo: after the cut"


async def test_a_client_that_cannot_reconnect_fails_its_turn_with_connection_lost(tmp_path):
    port = free_port()
    with avm_serve(tmp_path, port, env=base_env(**SLOW)) as server:
        token = server.admin_token()
        client = await AgentVMClient.open(server.url, token=token, reconnect_within=1.0)
        image = await client.create_image("u")
        turn = client.send(image.imageId, LONG)
        await turn.start()
    # the server is gone: every reconnect fails, and the turn says so instead of hanging
    with pytest.raises(ConnectionLost):
        async for _ in turn:
            pass
    with pytest.raises(ConnectionLost):
        await client.list_images()
    await client.close()


async def test_frames_of_the_turn_are_yielded_once_even_when_the_server_replays_them(server):
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u")
        turn = client.send(image.imageId, "replayed")
        async for event in turn:
            if isinstance(event, ToolUseStopEvent):
                pass
            if isinstance(event, TextDeltaEvent):
                await client.subscribe(image.sessionId, after_seq=0)  # the server sends it all again
    types = [e.type for e in turn.events]
    assert types.count("message_persisted") == 1 and types.count("conversation_end") == 1
    assert turn.text == "Echo: replayed"
    assert json.dumps([e.seq for e in turn.events]) == json.dumps(sorted({e.seq for e in turn.events}))


async def test_batched_and_plain_clients_see_the_same_turn_the_batched_one_in_fewer_messages(server):
    token = server.admin_token()
    counts: dict[bool, int] = {}
    events: dict[bool, list[tuple[str, str]]] = {}
    for batch in (True, False):
        async with AgentVMClient.connect(server.url, token=token, batch=batch) as client:
            received = 0
            on_raw = client._on_raw

            async def counted(raw, on_raw=on_raw):
                nonlocal received
                received += 1
                await on_raw(raw)

            client._on_raw = counted  # every WebSocket message the client reads
            image = await client.create_image("u")
            before = received
            turn = [e async for e in client.send(image.imageId, LONG)]
            counts[batch] = received - before
            events[batch] = [
                (type(e).__name__, e.data.text if isinstance(e, TextDeltaEvent) else "") for e in turn
            ]

    def text(batch: bool) -> str:
        return "".join(t for _, t in events[batch])

    assert text(True) == text(False) == "Echo: " + LONG
    assert [n for n, _ in events[True] if n != "TextDeltaEvent"] == [
        n for n, _ in events[False] if n != "TextDeltaEvent"
    ]
    assert counts[True] * 2 < counts[False]


async def _text_messages(url: str, token: str, **options) -> tuple[int, str]:
    """One turn of LONG: the WebSocket messages with text the client read, and the reply text."""
    async with AgentVMClient.connect(url, token=token, **options.pop("connect", {})) as client:
        texts = 0
        on_raw = client._on_raw

        async def counted(raw, on_raw=on_raw):
            nonlocal texts
            texts += '"text_delta"' in raw
            await on_raw(raw)

        client._on_raw = counted
        image = await client.create_image("u", **options)
        turn = await client.send(image.imageId, LONG)
        return texts, turn.text


async def test_the_sdk_streams_live_by_default_and_in_economy_windows_when_asked(tmp_path):
    # live text every 10 ms window, economy every 400 ms: a ~1.5 s reply shows the difference
    env = base_env(
        **SLOW, AVM_BATCH_FLUSH_MAX_MS="10", AVM_ECONOMY_FLUSH_MS="400", AVM_ECONOMY_FLUSH_MAX_MS="400"
    )
    with avm_serve(tmp_path, free_port(), env=env) as server:
        token = server.admin_token()
        live, live_text = await _text_messages(server.url, token)
        economy, economy_text = await _text_messages(server.url, token, connect={"cadence": "economy"})
        image_economy, _ = await _text_messages(server.url, token, cadence="economy")  # the image's
        overridden, _ = await _text_messages(
            server.url, token, cadence="economy", connect={"cadence": "live"}
        )
    assert live_text == economy_text == "Echo: " + LONG
    assert economy <= 6 and image_economy <= 6  # the first text, a few 400 ms windows, the end
    assert live > 3 * economy and overridden > 3 * image_economy


async def test_an_upgrade_with_an_unknown_cadence_or_a_cadence_without_batches_is_refused(server):
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    headers = {"Authorization": f"Bearer {server.admin_token()}"}
    for query in ("?frames=batch&cadence=slow", "?cadence=economy"):
        with pytest.raises(InvalidStatus) as refused:
            await connect(server.url + query, additional_headers=headers)
        assert refused.value.response.status_code == 400
        assert json.loads(refused.value.response.body)["error"]["code"] == "bad_request"


async def test_an_upgrade_with_an_unknown_frames_mode_is_refused_with_400(server):
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused:
        headers = {"Authorization": f"Bearer {server.admin_token()}"}
        await connect(server.url + "?frames=everything", additional_headers=headers)
    assert refused.value.response.status_code == 400
    assert json.loads(refused.value.response.body)["error"]["code"] == "bad_request"


# -- server-side subscriptions (docs/protocol.md) --------------------------------------------------


def _record_sent(client: AgentVMClient) -> list[dict]:
    """Every frame the client writes to its socket from now on."""
    sent: list[dict] = []
    ws_send = client._ws.send

    async def send(message, ws_send=ws_send):
        sent.append(json.loads(message))
        await ws_send(message)

    client._ws.send = send
    return sent


async def _turn_seen_by(client: AgentVMClient, server, image_id: str) -> str:
    """A turn sent by another connection, as ``client`` receives it (it follows the session)."""
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as sender:
        await sender.send(image_id, "from elsewhere")
    text = ""
    async for frame in client.turn_events(timeout=30):
        if frame.get("type") == "text_delta":
            text += frame["data"]["text"]
    return text


async def test_the_sdk_is_subscribed_by_the_server_to_what_it_lists_and_sends_no_subscribe(server):
    token = server.admin_token()
    async with AgentVMClient.connect(server.url, token=token) as owner:
        image = await owner.create_image("u")
    async with AgentVMClient.connect(server.url, token=token) as client:
        sent = _record_sent(client)
        listed = await client.request("image_list", containerId="u")
        text = await _turn_seen_by(client, server, image.imageId)

    assert listed["__subscriptions"] == [image.sessionId] and listed["__subscribed"] is True
    assert [f["type"] for f in sent] == ["image_list_request"]  # no `subscribe` frame
    assert text == "Echo: from elsewhere"


def test_the_sync_client_is_subscribed_by_the_server_to_what_it_lists(server):
    token = server.admin_token()
    with SyncAgentVMClient.connect(server.url, token=token) as client:
        image = client.create_image("u")
        listed = client.request("image_list", containerId="u")
        assert listed["__subscribed"] is True
        assert image.sessionId in client.aio._subscribed and image.sessionId in client.aio.cursors.sessions


class NoServerSubscribeProxy:
    """A server without server-side subscriptions: the real one behind a WebSocket proxy that drops
    ``__subscribe`` from requests, as a server that does not know the key ignores it."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self.stripped = 0

    async def __aenter__(self) -> NoServerSubscribeProxy:
        from websockets.asyncio.server import serve

        self._server = await serve(self._relay, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _relay(self, downstream) -> None:
        from websockets.asyncio.client import connect

        path = downstream.request.path.removeprefix("/ws")
        auth = downstream.request.headers.get("Authorization")
        headers = {"Authorization": auth} if auth else {}
        async with connect(self.target + path, additional_headers=headers) as upstream:

            async def up() -> None:
                async for message in downstream:
                    frame = json.loads(message)
                    if isinstance(frame.get("data"), dict) and frame["data"].pop("__subscribe", None):
                        self.stripped += 1
                    await upstream.send(json.dumps(frame))

            async def down() -> None:
                async for message in upstream:
                    await downstream.send(message)

            tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


async def test_against_a_server_without_the_feature_the_sdk_subscribes_itself_and_gets_the_stream(server):
    token = server.admin_token()
    async with AgentVMClient.connect(server.url, token=token) as owner:
        image = await owner.create_image("u")
    async with (
        NoServerSubscribeProxy(server.url) as proxy,
        AgentVMClient.connect(proxy.url, token=token) as client,
    ):
        sent = _record_sent(client)
        listed = await client.request("image_list", containerId="u")
        text = await _turn_seen_by(client, server, image.imageId)

    assert proxy.stripped == 1 and "__subscribed" not in listed
    assert [f["type"] for f in sent] == ["image_list_request", "subscribe"]
    assert sent[1]["sessionId"] == image.sessionId
    assert text == "Echo: from elsewhere"


async def test_sessions_the_server_subscribed_are_subscribed_again_after_a_reconnect(server):
    token = server.admin_token()
    async with AgentVMClient.connect(server.url, token=token) as owner:
        image = await owner.create_image("u")
    async with CuttingProxy(server.port) as proxy, AgentVMClient.connect(proxy.url, token=token) as client:
        listed = await client.request("image_list", containerId="u")
        proxy.cut()
        await client.list_images("u")  # answered once the client has reconnected (and resubscribed)
        text = await _turn_seen_by(client, server, image.imageId)
        reconnects = client.reconnects

    assert listed["__subscribed"] is True and reconnects == 1
    assert text == "Echo: from elsewhere"  # the new connection follows the session too
