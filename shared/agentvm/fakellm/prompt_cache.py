"""The fake provider's prompt cache: what a request reads from and writes to it, priced as each
provider documents it.

Tokens are the fake's own (``state.count_words``: the words of every text and content field),
the same count ``input_tokens`` reports, so reads and writes are parts of it.

* **Anthropic** (explicit breakpoints): the request is rendered as blocks (each tool, each system
  block, each message's content blocks) and a prefix is identified by a hash chained over them
  (the model first; ``cache_control`` markers are not part of the content). A breakpoint reads the
  longest cached prefix ending at it or at one of the 20 blocks before it (the documented
  look-back); every breakpoint past what was read whose prefix holds at least the minimum is
  written. The response reports the longest read as ``cache_read_input_tokens``, the written rest
  up to the last written breakpoint as ``cache_creation_input_tokens``. A top-level
  ``cache_control`` (the API's automatic caching, what LangChain's prompt-caching middleware sends)
  is a breakpoint on the request's last block, one of the 4. More than 4 breakpoints is a 400, as
  the API answers.
* **Bedrock Converse**: ``cachePoint`` blocks mark the block before them; priced as Anthropic's.
* **OpenAI** (automatic): the prompt's words, keyed by ``prompt_cache_key`` and the model (tools
  and non-text message fields are hashed into it), are cached at every 128-token step from 1,024
  on; a request reads the longest step seen before (``prompt_tokens_details.cached_tokens``).

Every entry lives 5 minutes from its last use (a read refreshes it). One cache per fake server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

TTL_S = 300.0
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128


class TooManyBreakpoints(ValueError):
    """A request marked more blocks with ``cache_control`` than the API allows."""


@dataclass(frozen=True, slots=True)
class CacheUse:
    """Of a request's input tokens: read from the cache, written to it."""

    read: int = 0
    write: int = 0


@dataclass(frozen=True, slots=True)
class _Block:
    digest: str  # of the prefix ending with this block
    tokens: int  # the prefix's tokens, this block included
    marked: bool


class PromptCache:
    """Cached prefixes by hash, each with its expiry. Locked: requests are served concurrently."""

    def __init__(self, ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._expires: dict[str, float] = {}

    def clear(self) -> None:
        with self._lock:
            self._expires.clear()

    def __len__(self) -> int:
        with self._lock:
            self._drop_expired(self._clock())
            return len(self._expires)

    def anthropic(self, body: dict[str, Any], min_tokens: int) -> CacheUse:
        """Read and write the breakpoints of a Messages request (raises ``TooManyBreakpoints``)."""
        return self._breakpoints(_anthropic_blocks(body), min_tokens)

    def _breakpoints(self, blocks: list[_Block], min_tokens: int) -> CacheUse:
        marks = [i for i, block in enumerate(blocks) if block.marked]
        if len(marks) > MAX_BREAKPOINTS:
            limit, found = MAX_BREAKPOINTS, len(marks)
            raise TooManyBreakpoints(
                f"A maximum of {limit} blocks with cache_control may be provided. Found {found}."
            )
        if not marks:
            return CacheUse()
        with self._lock:
            now = self._clock()
            self._drop_expired(now)
            read = 0
            for mark in marks:
                for index in range(mark, max(mark - LOOKBACK_BLOCKS, -1), -1):
                    if blocks[index].digest in self._expires:
                        self._expires[blocks[index].digest] = now + self._ttl_s  # a read refreshes it
                        read = max(read, blocks[index].tokens)
                        break
            written = read
            for mark in marks:
                block = blocks[mark]
                if block.tokens > read and block.tokens >= min_tokens:
                    self._expires[block.digest] = now + self._ttl_s
                    written = max(written, block.tokens)
            return CacheUse(read=read, write=written - read)

    def bedrock(self, body: dict[str, Any], min_tokens: int) -> CacheUse:
        """Read and write the ``cachePoint`` checkpoints of a Converse request, as Anthropic's."""
        return self._breakpoints(_bedrock_blocks(body), min_tokens)

    def openai(self, body: dict[str, Any]) -> CacheUse:
        """Read the longest cached 128-token step of a Chat Completions prompt; cache every step."""
        steps = _openai_steps(body)
        if not steps:
            return CacheUse()
        with self._lock:
            now = self._clock()
            self._drop_expired(now)
            read = 0
            for tokens, digest in steps:
                if digest in self._expires:
                    read = tokens
            for _tokens, digest in steps:
                self._expires[digest] = now + self._ttl_s
            return CacheUse(read=read)

    def _drop_expired(self, now: float) -> None:
        for digest in [d for d, at in self._expires.items() if at <= now]:
            del self._expires[digest]


def _digest(previous: str, part: object) -> str:
    payload = json.dumps(part, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{previous}\n{payload}".encode()).hexdigest()


def _unmarked(block: object) -> tuple[object, bool]:
    """The block without its ``cache_control``, and whether it had one."""
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}, True
    return block, False


def _anthropic_blocks(body: dict[str, Any]) -> list[_Block]:
    """The request as the cache sees it: tools, system, then messages, one block at a time."""
    parts: list[tuple[str, object]] = [("tool", tool) for tool in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str) and system:
        parts.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        parts += [("system", block) for block in system]
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = str(message.get("role"))
        content = message.get("content")
        if isinstance(content, str):
            parts.append((role, {"type": "text", "text": content}))
        elif isinstance(content, list):
            parts += [(role, block) for block in content]
    digest = str(body.get("model", ""))
    tokens = 0
    blocks: list[_Block] = []
    for role, raw in parts:
        block, marked = _unmarked(raw)
        digest = _digest(digest, [role, block])
        tokens += 0 if role == "tool" else len(_words(block))  # as input_tokens counts (no tools)
        blocks.append(_Block(digest, tokens, marked))
    if blocks and isinstance(body.get("cache_control"), dict):  # automatic: on the last block
        blocks[-1] = dataclasses.replace(blocks[-1], marked=True)
    return blocks


def _bedrock_blocks(body: dict[str, Any]) -> list[_Block]:
    """A Converse request as the cache sees it: a ``cachePoint`` block marks the block before it."""
    parts: list[tuple[str, object]] = [
        ("tool", tool) for tool in (body.get("toolConfig") or {}).get("tools") or ()
    ]
    parts += [("system", block) for block in body.get("system") or ()]
    for message in body.get("messages") or ():
        if isinstance(message, dict):
            parts += [(str(message.get("role")), block) for block in message.get("content") or ()]
    digest = str(body.get("modelId", body.get("model", "")))
    tokens = 0
    blocks: list[_Block] = []
    for role, block in parts:
        if isinstance(block, dict) and "cachePoint" in block:
            if blocks:
                blocks[-1] = dataclasses.replace(blocks[-1], marked=True)
            continue
        digest = _digest(digest, [role, block])
        tokens += 0 if role == "tool" else len(_words(block))
        blocks.append(_Block(digest, tokens, False))
    return blocks


def _openai_steps(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(tokens, digest of the prompt's first ``tokens``) at 1,024 and every 128 tokens after."""
    seed = {
        "model": body.get("model"),
        "key": body.get("prompt_cache_key"),
        "tools": body.get("tools"),
    }
    running = hashlib.sha256(json.dumps(seed, sort_keys=True, default=str).encode())
    steps: list[tuple[int, str]] = []
    tokens = 0
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        # what is not text (role, tool calls, their ids) is part of the prefix but not counted
        frame = {k: v for k, v in message.items() if k != "content"}
        running.update(json.dumps(frame, sort_keys=True, default=str).encode())
        for word in _words(message.get("content")):
            running.update(b"\x00" + word.encode())
            tokens += 1
            if tokens >= OPENAI_MIN_TOKENS and (tokens - OPENAI_MIN_TOKENS) % OPENAI_STEP_TOKENS == 0:
                steps.append((tokens, running.copy().hexdigest()))
    return steps


def _words(value: object) -> list[str]:
    """The words ``state.count_words`` counts (the fake's input tokens), in order."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [w for item in value for w in _words(item)]
    if isinstance(value, dict):
        return _words(value.get("text")) + _words(value.get("content"))
    return []


__all__ = ["CacheUse", "PromptCache", "TooManyBreakpoints"]
