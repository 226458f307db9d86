"""The ``avm chat`` session: a prompt, turns streamed as they come, and slash commands.

Decisions (docs/sdk.md, "avm chat"):

- A line is sent as a message unless its first word is one of the chat's commands (``/help``,
  ``/image``, ``/history``, ``/interrupt``, ``/usage``, ``/quit``, ``/exit``): ``/tool ...`` and
  any other text go to the model as they are (the echo model reads ``/tool <name> <JSON>``).
- ``--config``, ``--model`` or ``--system`` start the chat on a new image made with them (an
  image's config is fixed once made, so the container's newest could not honour them); with
  ``--image`` they are refused.
- **Ctrl-C** during a turn interrupts the turn (the chat goes on); at the prompt it asks for a
  second Ctrl-C within 2 s to quit (so a late Ctrl-C after a turn ended does not end the chat).
  The terminal itself echoes ``^C``: the chat's note does not repeat it.
- Input that is not a terminal (``echo hi | avm chat``): no prompt; each line is sent in turn,
  lines read while a turn runs wait for it (none is dropped), and end of input ends the chat after
  the running turn (it does not interrupt it).
- Until a turn's first event, a terminal shows ``[waiting for the model…]`` (erased when the reply
  starts); a provider retry (``model_retry``) shows as ``[retry] provider busy (rate limited),
  retrying in 2s (attempt 2)``, then the waiting line again.
  ``/interrupt`` typed while a turn streams does the same as Ctrl-C; Ctrl-D (end of input) quits.
- A turn that asks for approval shows the call and reads ``y``/``n``; a client-side tool's call
  reads its result as a line (the chat has no functions of its own to run); an MCP server's question
  (``tool_elicitation``) reads one line per field of its form (``chat/questions.py``).
- ``/usage``: this chat's tokens (from the assistant messages of its turns: a tool step without
  text sends none), and the container's exact usage records from ``GET /v1/usage?containerId=``
  when the key may read them (an admin key, or the local ``--open`` server); otherwise it says why.
- Lines typed while a turn streams (other than ``/interrupt`` or an answer) are not queued: the
  chat says so, and the line is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import httpx

from agentvm.chat.questions import ask_form
from agentvm.chat.render import Renderer, short
from agentvm.client import (
    AgentVMClient,
    ClientToolRequestedEvent,
    ConnectionLost,
    RequestFailed,
    ToolApprovalRequestedEvent,
    ToolElicitationEvent,
)

if TYPE_CHECKING:
    from agentvm.client import ImageInfo, Turn

PROMPT = "you> "
HELP = """\
commands:
  /image                list the container's images (* = this chat's)
  /image <n | imageId>  switch to an image (n: its number in the list)
  /image new [name]     create an image (with --config/--model/--system) and switch to it
  /history              the image's stored messages
  /interrupt            stop the running turn (Ctrl-C does the same)
  /usage                tokens of this chat, and the container's usage records
  /quit, /exit          leave (Ctrl-D, or Ctrl-C twice at the prompt)
anything else is sent as a message (e.g. /tool calculator {"expression": "6*7"} for the echo model)"""
COMMANDS = frozenset({"/help", "/image", "/history", "/interrupt", "/usage", "/quit", "/exit"})


class Lines:
    """Lines from a text stream, read by a thread, handed to the event loop (None: end of input)."""

    def __init__(self, stream: TextIO, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._stream = stream
        self._loop = loop
        threading.Thread(target=self._read, name="avm-chat-input", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                line = self._stream.readline()
            except (OSError, ValueError):
                line = ""
            if not line:
                self._loop.call_soon_threadsafe(self.queue.put_nowait, None)
                return
            self._loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\r\n"))


class ChatApp:
    def __init__(
        self,
        client: AgentVMClient,
        *,
        container_id: str,
        image_config: dict[str, Any],
        http_url: str | None,
        key: str | None,
        out: TextIO = sys.stdout,
        stdin: TextIO = sys.stdin,
        new_image: bool = False,
    ) -> None:
        self.client = client
        self.container_id = container_id
        self.image_config = image_config
        self.http_url = http_url
        self.key = key
        self.new_image = new_image  # --config/--model/--system: start on a new image made with them
        self.render = Renderer(out)
        self._stdin = stdin
        self.image: ImageInfo | None = None
        self.turn: Turn | None = None
        self._turns = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._answer: asyncio.Future[str | None] | None = None
        self._last_sigint = 0.0
        self._quit = False
        self._lines: Lines | None = None
        self.interactive = _isatty(stdin)  # False: piped input (no prompt, nothing dropped)
        self._pending: list[str | None] = []  # piped lines read while a turn ran, in order

    # -- the session ---------------------------------------------------------------------------------
    async def run(self, image_id: str | None = None) -> int:
        loop = asyncio.get_running_loop()
        self._lines = Lines(self._stdin, loop)
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        await self.client.create_container(self.container_id)
        await self._pick_image(image_id)
        assert self.image is not None
        self.render.note(
            f"[chat] container {self.container_id}, image {self.image.imageId} ({self.image.name}); "
            "/help for commands"
        )
        while not self._quit:
            if self._pending:
                line = self._pending.pop(0)
            else:
                if self.interactive:
                    self.render.write(PROMPT)
                line = await self._lines.queue.get()
            if line is None:
                self.render.end_line()
                break
            if self.interactive:
                self.render.at_line_start = True  # the Enter that ended the line moved the cursor
            try:
                await self._handle(line.strip())
            except RequestFailed as exc:
                self.render.note(f"[error {exc.code}] {exc.message}")
            except ConnectionLost as exc:
                self.render.note(f"[connection lost] {exc}")
                return 1
        return 0

    async def _handle(self, line: str) -> None:
        if not line:
            return
        word, _, rest = line.partition(" ")
        if word not in COMMANDS:
            await self._turn(line)
        elif word == "/help":
            self.render.line(HELP)
        elif word in ("/quit", "/exit"):
            self._quit = True
        elif word == "/interrupt":
            self.render.note("[chat] no turn is running")
        elif word == "/history":
            await self._history()
        elif word == "/usage":
            await self._usage()
        else:
            await self._image_command(rest.strip())

    def _on_sigint(self) -> None:
        if self.turn is not None and not self.turn.done:
            self.render.note("[chat] interrupting the turn")  # (the terminal echoed the ^C)
            if self._answer is not None and not self._answer.done():
                self._answer.set_result(None)  # a question the turn asked: left unanswered
            asyncio.ensure_future(self._interrupt())
            return
        now = time.monotonic()
        if now - self._last_sigint < 2.0:
            self._quit = True
            if self._answer is not None and not self._answer.done():
                self._answer.set_result(None)
            assert self._lines is not None
            self._lines.queue.put_nowait(None)
            return
        self._last_sigint = now
        self.render.note("[chat] press Ctrl-C again to quit (or /quit)")
        if self.interactive:
            self.render.write(PROMPT)

    async def _interrupt(self) -> None:
        if self.turn is not None:
            with contextlib.suppress(RequestFailed, ConnectionLost):
                await self.turn.interrupt()

    # -- a turn --------------------------------------------------------------------------------------
    async def _turn(self, content: str) -> None:
        assert self.image is not None
        turn = self.client.send(self.image.imageId, content)
        self.turn = turn
        watcher = asyncio.create_task(self._lines_during_turn())
        self.render.waiting()
        try:
            async for event in turn:
                self.render.event(event)
                if isinstance(event, ToolApprovalRequestedEvent):
                    await self._ask_approval(turn, event)
                elif isinstance(event, ClientToolRequestedEvent):
                    await self._ask_result(turn, event)
                elif isinstance(event, ToolElicitationEvent):
                    await self._ask_question(event)
        finally:
            watcher.cancel()
            self.turn = None
            self.render.stop_waiting()
            self.render.end_line()
        self._turns += 1
        if turn.usage is not None:
            self._input_tokens += turn.usage.inputTokens
            self._output_tokens += turn.usage.outputTokens

    async def _lines_during_turn(self) -> None:
        """Lines typed while a turn runs. It awaits nothing but the next line, so that cancelling
        it at the turn's end is immediate (the interrupt request runs as a task of its own)."""
        assert self._lines is not None
        while True:
            line = await self._lines.queue.get()
            if self.interactive:
                self.render.at_line_start = True  # (the terminal echoed the line and its Enter)
            if self._answer is not None and not self._answer.done():
                self._answer.set_result(line)
            elif not self.interactive:
                self._pending.append(line)  # piped: sent after this turn (None: then the end)
            elif line is None:
                self._quit = True
                asyncio.ensure_future(self._interrupt())
            elif line.strip() == "/interrupt":
                self.render.note("[chat] interrupting the turn")
                asyncio.ensure_future(self._interrupt())
            elif line.strip():
                self.render.note(
                    "[chat] a turn is running: /interrupt (or Ctrl-C) stops it; that line was not sent"
                )

    async def _read_answer(self, prompt: str) -> str | None:
        self._answer = asyncio.get_running_loop().create_future()
        self.render.write(prompt)
        try:
            return await self._answer
        finally:
            self._answer = None

    async def _ask_approval(self, turn: Turn, event: ToolApprovalRequestedEvent) -> None:
        answer = await self._read_answer(
            f"[approval] {event.data.toolName} {short(event.data.input)}: approve? [y/N] "
        )
        if answer is None:
            return
        if answer.strip().lower() in ("y", "yes"):
            await turn.approve(event)
        else:
            await turn.deny(event, "denied in avm chat")

    async def _ask_result(self, turn: Turn, event: ClientToolRequestedEvent) -> None:
        answer = await self._read_answer(
            f"[client tool] {event.data.toolName} {short(event.data.input)}: its result> "
        )
        if answer is None:
            return
        if answer.strip():
            await turn.submit_tool_result(event, answer)
        else:
            await turn.submit_tool_result(event, "no result was given in avm chat", is_error=True)

    async def _ask_question(self, event: ToolElicitationEvent) -> None:
        """An MCP server asks the user: its form, a line per field; a refused answer asks again."""
        self.render.note(f"[question] {event.data.toolName} asks: {short(event.data.message)}")
        for _ in range(3):
            answer = await ask_form(event.data, self._read_answer, self.render.note)
            if answer is None:
                return
            action, content = answer
            try:
                await self.client.answer_elicitation(event, action, content)
                return
            except RequestFailed as exc:
                if exc.code != "bad_request":
                    self.render.note(f"[question] {exc}")
                    return
                self.render.note(f"[question] {exc}; again (/decline or /cancel to refuse)")
        with contextlib.suppress(RequestFailed):
            await self.client.answer_elicitation(event, "cancel")

    # -- commands ------------------------------------------------------------------------------------
    async def _pick_image(self, image_id: str | None) -> None:
        if image_id is not None:
            found = await self.client.get_image(image_id)
            if found is None:
                raise RequestFailed("image_get", {"error": f"no image {image_id}", "code": "not_found"})
            self.image = found
            return
        if self.new_image:  # an image's config is fixed once made: the asked one needs a new image
            self.image = await self._create_image("Chat")
            return
        images = await self.client.list_images(self.container_id)
        self.image = images[0] if images else await self._create_image("Chat")

    async def _create_image(self, name: str) -> ImageInfo:
        return await self.client.create_image(self.container_id, **{"name": name, **self.image_config})

    async def _image_command(self, arg: str) -> None:
        assert self.image is not None
        images = await self.client.list_images(self.container_id)
        if not arg:
            for n, image in enumerate(images, 1):
                mark = "*" if image.imageId == self.image.imageId else " "
                model = f"  {image.model}" if image.model else ""
                self.render.line(f"{mark} {n}  {image.imageId}  {image.name}{model}")
            return
        if arg == "new" or arg.startswith("new "):
            self.image = await self._create_image(arg[4:].strip() or "Chat")
        else:
            chosen = next((i for i in images if i.imageId == arg), None)
            if chosen is None and arg.isdigit() and 1 <= int(arg) <= len(images):
                chosen = images[int(arg) - 1]
            if chosen is None:
                self.render.note(
                    f"[chat] no image {arg!r} in container {self.container_id} (/image lists them)"
                )
                return
            self.image = chosen
        self.render.note(f"[chat] image {self.image.imageId} ({self.image.name})")

    async def _history(self) -> None:
        assert self.image is not None
        messages = await self.client.history(self.image.imageId)
        if not messages:
            self.render.note("[chat] no messages yet")
        for message in messages:
            self.render.message(message)

    async def _usage(self) -> None:
        self.render.line(
            f"this chat: {self._turns} turns, {self._input_tokens} input + "
            f"{self._output_tokens} output tokens (from the replies' usage)"
        )
        self.render.line(await self._container_usage())

    async def _container_usage(self) -> str:
        if self.http_url is None:
            return "container usage: give --http-url (the HTTP API's URL) to read it"
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.get(
                    f"{self.http_url}/v1/usage", params={"containerId": self.container_id}, headers=headers
                )
        except httpx.HTTPError as exc:
            return f"container usage: {self.http_url} did not answer ({type(exc).__name__})"
        if response.status_code in (401, 403):
            return "container usage: needs an admin key (GET /v1/usage is an admin route)"
        if response.status_code != 200:
            return f"container usage: HTTP {response.status_code} {short(response.text)}"
        totals = response.json().get("totals", {})
        return (
            f"container {self.container_id}: {totals.get('turns', 0)} turns, "
            f"{totals.get('inputTokens', 0)} input + {totals.get('outputTokens', 0)} output = "
            f"{totals.get('totalTokens', 0)} tokens (GET /v1/usage)"
        )


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or non-file stream
        return False


def http_url_of(ws_url: str) -> str | None:
    """The HTTP base of a local server's WebSocket URL (``ws://h:p/ws`` -> ``http://h:p``); None
    when it cannot be told (AWS serves HTTP on another API: give ``--http-url``)."""
    from urllib.parse import urlsplit

    parts = urlsplit(ws_url)
    if parts.scheme not in ("ws", "wss") or not parts.path.rstrip("/").endswith("/ws"):
        return None
    scheme = "https" if parts.scheme == "wss" else "http"
    base = parts.path.rstrip("/")[: -len("/ws")]
    return f"{scheme}://{parts.netloc}{base}"


def image_config(config: str | None, model: str | None, system: str | None) -> dict[str, Any]:
    """The config of images the chat creates: ``--config`` (JSON, or @file), ``--model``, ``--system``."""
    out: dict[str, Any] = {}
    if config:
        text = Path(config[1:]).read_text() if config.startswith("@") else config
        loaded = json.loads(text)
        if not isinstance(loaded, dict):
            raise ValueError("--config: a JSON object of image_create's config")
        fields: dict[str, Any] = loaded  # a JSON object's keys are strings
        unknown = sorted(set(fields) - set(_SNAKE) - _KEYS)
        if unknown:
            raise ValueError(f"--config: unknown key(s) {', '.join(unknown)} (image_create's config keys)")
        out.update({_SNAKE.get(k, k): v for k, v in fields.items()})
    if model:
        out["model"] = model
    if system:
        out["system_prompt"] = system
    return out


_SNAKE = {"systemPrompt": "system_prompt", "mcpServers": "mcp_servers", "maxSteps": "max_steps"}
_KEYS = {"name", "description", "model", "tools", "approval", "concurrency", "agent"}

__all__ = ["ChatApp", "http_url_of", "image_config"]
