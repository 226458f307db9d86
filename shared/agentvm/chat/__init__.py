"""``avm chat``: a terminal client of AgentVM, on the SDK (``agentvm.client``).

    avm chat --url ws://127.0.0.1:8080/ws --key avm_...     a running server (local or AWS)
    avm chat --local                                          a server of its own (temporary data dir)

Against AWS it needs only the stack's WebSocket URL and a key (``--url wss://<api-id>.execute-api.
<region>.amazonaws.com/prod --key avm_...``); ``/usage`` also needs the HTTP API's URL
(``--http-url``). The session itself is ``agentvm.chat.app``; docs/sdk.md describes it.

Frames (``--frames``): against a loopback server (``--local``, or a ``--url`` on this machine) the
chat takes one frame per message; against any other server it asks for batched frames
(``?frames=batch``: fewer billed WebSocket messages on AWS, docs/cost.md). Either way replies stream
live, in the server's 250 ms windows. ``--frames single|batch`` chooses either way; ``--economy``
asks for batched frames on the economy cadence (``?cadence=economy``: a reply's text every 2 s, fewer
messages still).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import argparse

DEFAULT_URL = "ws://127.0.0.1:8080/ws"
FRAMES = ("auto", "single", "batch")


def asks_for_batches(frames: str, url: str) -> bool:
    """``--frames``: ``auto`` asks for batched frames unless the server is on this machine."""
    if frames != "auto":
        return frames == "batch"
    from agentvm.addresses import is_loopback

    return not is_loopback(urlsplit(url).hostname or "")


def add_chat_command(sub: Any) -> None:
    chat = sub.add_parser(
        "chat",
        help="chat with an agent in the terminal (a running server, or --local)",
        description="Chat with an AgentVM agent: streamed replies, tool calls, approvals; "
        "Ctrl-C interrupts the running turn. Type /help in the chat for its commands.",
    )
    where = chat.add_mutually_exclusive_group()
    where.add_argument("--url", help=f"the server's WebSocket URL (default {DEFAULT_URL}, env AVM_WS_URL)")
    where.add_argument(
        "--local", action="store_true", help="start a server of its own (needs agentvm-runtime[local])"
    )
    chat.add_argument("--key", help="an API key of the tenant (env AVM_API_KEY; not needed with --local)")
    chat.add_argument(
        "--http-url", help="the HTTP API's URL for /usage (default: derived from a local --url)"
    )
    chat.add_argument(
        "--frames",
        choices=FRAMES,
        default="auto",
        help="single: one frame per message; batch: batched frames (fewer billed messages on AWS); "
        "both stream text every 250 ms; auto (default): single for a server on this machine, else batch",
    )
    chat.add_argument(
        "--economy",
        action="store_true",
        help="batched frames on the economy cadence: a reply's text every 2 s, fewer billed messages",
    )
    chat.add_argument("--data-dir", type=Path, help="with --local: keep the server's data here")
    chat.add_argument("--container", default="chat", help="the container to chat in (default: chat)")
    chat.add_argument(
        "--image",
        help="an image id to chat with (default: the container's newest, or a new one; "
        "a new one whenever --config, --model or --system is given)",
    )
    chat.add_argument("--model", help="provider/model of images the chat creates (default: the server's)")
    chat.add_argument("--system", help="system prompt of images the chat creates")
    chat.add_argument(
        "--config",
        help="image_create config (JSON, or @file): the chat starts on a new image with it, e.g. "
        '\'{"tools": [{"type": "builtin", "name": "calculator"}]}\' (not with --image)',
    )


NO_KEY = (
    "avm: the server wants an API key: give --key avm_... (or set AVM_API_KEY). The first `avm serve` "
    "printed an admin key; `avm keys create --tenant default` makes a new one (--scope admin for "
    "/usage), or start the server with `avm serve --open` (loopback only, no key), or use "
    "`avm chat --local`."
)


def run_chat(args: argparse.Namespace) -> int:
    from agentvm.chat.app import image_config

    if args.economy and args.frames == "single":
        print("avm: --economy needs batched frames (not --frames single)", file=sys.stderr)
        return 2
    try:
        config = image_config(args.config, args.model, args.system)
    except (ValueError, OSError) as exc:
        print(f"avm: {exc}", file=sys.stderr)
        return 2
    if config and args.image:
        print(
            "avm: --image chats with an existing image, whose config is fixed; --config, --model "
            "and --system shape a new one: give one or the other (`/image new` in the chat also "
            "creates one with them)",
            file=sys.stderr,
        )
        return 2
    if args.local:
        from agentvm.chat.local import LocalServerError, local_server

        try:
            with local_server(args.data_dir) as url:
                return asyncio.run(_chat(args, url, None, config))
        except LocalServerError as exc:
            print(f"avm: {exc}", file=sys.stderr)
            return 2
    url = args.url or os.environ.get("AVM_WS_URL") or DEFAULT_URL
    try:
        return asyncio.run(_chat(args, url, args.key or os.environ.get("AVM_API_KEY"), config))
    except KeyboardInterrupt:  # Ctrl-C before the chat took it over (while connecting)
        return 130


async def _chat(args: argparse.Namespace, url: str, key: str | None, config: dict[str, Any]) -> int:
    from agentvm.chat.app import ChatApp, http_url_of
    from agentvm.client import AgentVMClient, AgentVMClientError, RequestFailed

    try:
        batch, cadence = connection_mode(args.frames, url, economy=args.economy)
        async with AgentVMClient.connect(url, token=key, batch=batch, cadence=cadence) as client:
            app = ChatApp(
                client,
                container_id=args.container,
                image_config=config,
                http_url=args.http_url or http_url_of(url),
                key=key,
                new_image=bool(config) and args.image is None,
            )
            return await app.run(args.image)
    except RequestFailed as exc:
        if exc.code == "unauthorized" and not key:
            print(NO_KEY, file=sys.stderr)
        else:
            print(f"avm: {exc.message} ({exc.code})", file=sys.stderr)
        return 1
    except (AgentVMClientError, OSError) as exc:
        print(f"avm: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def connection_mode(frames: str, url: str, *, economy: bool = False) -> tuple[bool, str | None]:
    """What the chat asks for at the upgrade: batched frames or not, and the cadence (``--economy``:
    batched, economy; otherwise none is asked for, the server's live default or the image's)."""
    if economy:
        return True, "economy"
    return asks_for_batches(frames, url), None


__all__ = ["DEFAULT_URL", "FRAMES", "add_chat_command", "asks_for_batches", "connection_mode", "run_chat"]
