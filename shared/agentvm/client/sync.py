"""``SyncAgentVMClient``: the same client for code without an event loop.

A thin wrapper: the async ``AgentVMClient`` runs on an event loop in a background thread, and
each method waits for its coroutine there. Everything the async client does (typed frames,
reconnect with resume, client-side tools, the raw ``request``) is the same code, so the two
behave alike::

    with SyncAgentVMClient.connect("ws://127.0.0.1:8080/ws", token=KEY) as client:
        image = client.create_image("user-alice", name="Helper")
        for event in client.send(image.imageId, "Hi"):
            if isinstance(event, TextDeltaEvent):
                print(event.data.text, end="")

Client-side tool functions registered here run in a worker thread of that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agentvm.client.aio import AgentVMClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine, Iterator

    from agentvm.client.events import (
        ClientToolRequestedEvent,
        ErrorOccurredData,
        Frame,
        ToolApprovalRequestedEvent,
        ToolElicitationEvent,
    )
    from agentvm.client.responses import (
        ElicitationAnswerResult,
        ImageInfo,
        MessageSendResult,
        ToolAnswerResult,
        ToolWaitInfo,
    )
    from agentvm.client.tools import ClientTool
    from agentvm.client.turn import Turn
    from agentvm.messages import Message, TokenUsage

T = TypeVar("T")


class SyncAgentVMClient:
    """See the module docstring. Open with ``SyncAgentVMClient.connect(url, token=...)``."""

    def __init__(
        self, client: AgentVMClient, loop: asyncio.AbstractEventLoop, thread: threading.Thread
    ) -> None:
        self.aio = client  # the async client underneath
        self._loop = loop
        self._thread = thread

    @classmethod
    @contextlib.contextmanager
    def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        reconnect: bool = True,
        reconnect_within: float = 120.0,
        open_timeout: float = 10.0,
        batch: bool = True,
        cadence: str | None = None,
    ) -> Iterator[SyncAgentVMClient]:
        """Open a client (the arguments are ``AgentVMClient.connect``'s); closed on exit."""
        client = cls.open(
            url,
            token=token,
            headers=headers,
            reconnect=reconnect,
            reconnect_within=reconnect_within,
            open_timeout=open_timeout,
            batch=batch,
            cadence=cadence,
        )
        try:
            yield client
        finally:
            client.close()

    @classmethod
    def open(cls, url: str, **options: Any) -> SyncAgentVMClient:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="agentvm-client", daemon=True)
        thread.start()
        try:
            client = asyncio.run_coroutine_threadsafe(AgentVMClient.open(url, **options), loop).result()
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            raise
        return cls(client, loop, thread)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._wait(self.aio.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _wait(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- the raw layer -------------------------------------------------------------------------------
    def request(
        self, type_: str, *, timeout: float = 30.0, check: bool = False, **data: Any
    ) -> dict[str, Any]:
        return self._wait(self.aio.request(type_, timeout=timeout, check=check, **data))

    # -- typed ---------------------------------------------------------------------------------------
    def create_container(self, container_id: str) -> str:
        return self._wait(self.aio.create_container(container_id))

    def list_containers(self) -> list[str]:
        return self._wait(self.aio.list_containers())

    def create_image(self, container_id: str, **config: Any) -> ImageInfo:
        return self._wait(self.aio.create_image(container_id, **config))

    def list_images(self, container_id: str | None = None) -> list[ImageInfo]:
        return self._wait(self.aio.list_images(container_id))

    def get_image(self, image_id: str) -> ImageInfo | None:
        return self._wait(self.aio.get_image(image_id))

    def update_image(self, image_id: str, **updates: Any) -> ImageInfo:
        return self._wait(self.aio.update_image(image_id, **updates))

    def delete_image(self, image_id: str) -> None:
        self._wait(self.aio.delete_image(image_id))

    def history(self, image_id: str) -> list[Message]:
        return self._wait(self.aio.history(image_id))

    def send(
        self,
        image_id: str,
        content: str | list[dict[str, Any]],
        *,
        concurrency: str | None = None,
        timeout: float | None = None,
    ) -> SyncTurn:
        """A turn: ``for event in client.send(image_id, "Hi")``, or ``.wait()`` for the end."""

        async def make() -> Turn:
            return self.aio.send(image_id, content, concurrency=concurrency, timeout=timeout)

        return SyncTurn(self, self._wait(make()))

    def interrupt(self, image_id: str) -> None:
        self._wait(self.aio.interrupt(image_id))

    def approve(self, turn_id: str, tool_call_id: str) -> ToolAnswerResult:
        return self._wait(self.aio.approve(turn_id, tool_call_id))

    def answer_elicitation(
        self,
        elicitation: ToolElicitationEvent | str,
        action: Literal["accept", "decline", "cancel"],
        content: dict[str, Any] | None = None,
    ) -> ElicitationAnswerResult:
        """``AgentVMClient.answer_elicitation``: answer an MCP server's question."""
        return self._wait(self.aio.answer_elicitation(elicitation, action, content))

    def deny(self, turn_id: str, tool_call_id: str, *, reason: str | None = None) -> ToolAnswerResult:
        return self._wait(self.aio.deny(turn_id, tool_call_id, reason=reason))

    def submit_tool_result(
        self, turn_id: str, tool_call_id: str, output: Any, *, is_error: bool = False
    ) -> ToolAnswerResult:
        return self._wait(self.aio.submit_tool_result(turn_id, tool_call_id, output, is_error=is_error))

    def tool_waits(
        self, *, container_id: str | None = None, image_id: str | None = None
    ) -> list[ToolWaitInfo]:
        return self._wait(self.aio.tool_waits(container_id=container_id, image_id=image_id))

    def add_tool(self, function: Callable[..., Any], **options: Any) -> ClientTool:
        return self.aio.add_tool(function, **options)

    def tool(self, name: str | None = None, **options: Any) -> Callable[[Callable[..., Any]], ClientTool]:
        return self.aio.tool(name, **options)

    @property
    def reconnects(self) -> int:
        return self.aio.reconnects


class SyncTurn:
    """A ``Turn`` for sync code: iterate it for its typed frames, or ``wait()`` for its end."""

    def __init__(self, client: SyncAgentVMClient, turn: Turn) -> None:
        self._client = client
        self.turn = turn  # the async Turn underneath: text, events, usage... are its
        self._frames: AsyncIterator[Frame] | None = None

    def __iter__(self) -> Iterator[Frame]:
        async def start() -> AsyncIterator[Frame]:
            return self.turn.__aiter__()

        frames = self._client._wait(start())
        while True:
            try:
                yield self._client._wait(_anext(frames))
            except StopAsyncIteration:
                return

    def wait(self) -> SyncTurn:
        """Run the turn to its end (what was not iterated yet is read and kept in ``events``)."""

        async def run() -> Turn:
            return await self.turn

        self._client._wait(run())
        return self

    def start(self) -> MessageSendResult:
        return self._client._wait(self.turn.start())

    @property
    def text(self) -> str:
        return self.turn.text

    @property
    def events(self) -> list[Frame]:
        return self.turn.events

    @property
    def done(self) -> bool:
        return self.turn.done

    @property
    def end_reason(self) -> str | None:
        return self.turn.end_reason

    @property
    def error(self) -> ErrorOccurredData | None:
        return self.turn.error

    @property
    def usage(self) -> TokenUsage | None:
        return self.turn.usage

    @property
    def turn_id(self) -> str | None:
        return self.turn.turn_id

    def interrupt(self) -> None:
        self._client._wait(self.turn.interrupt())

    def approve(self, call: ToolApprovalRequestedEvent | str) -> None:
        self._client._wait(self.turn.approve(call))

    def deny(self, call: ToolApprovalRequestedEvent | str, reason: str | None = None) -> None:
        self._client._wait(self.turn.deny(call, reason))

    def submit_tool_result(
        self, call: ClientToolRequestedEvent | str, output: Any, *, is_error: bool = False
    ) -> None:
        self._client._wait(self.turn.submit_tool_result(call, output, is_error=is_error))


async def _anext(frames: AsyncIterator[Frame]) -> Frame:
    return await frames.__anext__()


__all__ = ["SyncAgentVMClient", "SyncTurn"]
