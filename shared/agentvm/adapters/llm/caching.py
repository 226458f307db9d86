"""Where a request's prompt-cache breakpoints go (Anthropic ``cache_control``, Bedrock ``cachePoint``).

A provider renders a request as one prefix: tools, then the system prompt, then the messages. A
breakpoint marks "cache everything up to here"; a later request whose prefix is byte-identical up
to a cached breakpoint reads it at a tenth of the input price (a write costs 1.25x, 5-minute
lifetime from last use, refreshed on every read). Decisions, from the providers' documentation:

* At most **4 breakpoints** per request (Anthropic and Bedrock both refuse more).
* The order of the prefix is fixed (tools, system, messages), so the breakpoints, in that order:

  1. the **last tool definition**: tools alone are the most stable prefix (a session summary
     added to the system prompt after compaction does not cost the tools' cache);
  2. the **system prompt** (tools + system): the image's prompt, before the session summary that
     compaction appends (``ModelRequest.stable_system_chars``), so a compaction keeps it cached;
  3. the conversation's **moving end**: the last message's last content block, so the next step
     (and the next turn) reads what this one wrote;
  4. the **end of the previous request**: the user message before the last one. A step adds an
     assistant message and a user message (its tool results), a turn its final answer and the new
     user message, so that message is exactly where the previous request's moving end was. The
     provider looks back only about 20 blocks from a breakpoint for an earlier write; a step with
     many parallel tool results could pass that, and this breakpoint still reads the write.

* A prefix shorter than the model's **minimum cacheable length** is not cached (no error, no
  charge), so a breakpoint on one is a wasted slot: it is skipped. Anthropic documents 1,024
  tokens for most Sonnet/Opus models, 2,048 for Haiku 3/3.5 and Sonnet 4.6, 4,096 for Haiku 4.5
  and Opus 4.5-4.7 (``min_cacheable_tokens``). Tokens are estimated at four characters each
  (what ``agent/context.py`` estimates); an unknown model gets the smallest minimum, so a
  breakpoint is only skipped when its prefix is certainly too short.
* Default 5-minute lifetime (no ``ttl``): a conversation's next step comes within seconds and its
  next turn usually within minutes; the 1-hour cache costs 2x per write.
* Bedrock Converse takes ``cachePoint`` blocks only for the Claude models that support prompt
  caching (``bedrock_supports_cache_points``); other models get none.

Only turns ask for caching (``ModelRequest.prompt_caching``; images and tenants can turn it off):
a one-off request (a session title, a compaction summary) would pay the write and never read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.llm import ChatTurn, ModelRequest, ToolSpec

MAX_BREAKPOINTS = 4
CHARS_PER_TOKEN = 4
DEFAULT_MIN_TOKENS = 1024
# (substring of the model name, minimum cacheable prefix in tokens): the first match wins.
_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("haiku-4", 4096),
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("opus-4-7", 4096),
    ("sonnet-4-6", 2048),
    ("haiku", 2048),  # Claude Haiku 3 and 3.5
)
# Bedrock model ids (any region prefix: "us.", "eu.", "global."...) that take cachePoint blocks.
_BEDROCK_CACHING_MODELS = (
    "anthropic.claude-3-7-sonnet",
    "anthropic.claude-3-5-haiku",
    "anthropic.claude-sonnet-4",
    "anthropic.claude-opus-4",
    "anthropic.claude-haiku-4",
)
_ATTACHMENT_TOKENS = 1000  # an image or a PDF page, roughly: only used to decide a breakpoint


@dataclass(frozen=True, slots=True)
class Breakpoints:
    """Where to mark a request: after the last tool, after the system prompt, and after the last
    content block of each message in ``messages`` (indexes into ``request.messages``)."""

    tools: bool = False
    system: bool = False
    messages: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return int(self.tools) + int(self.system) + len(self.messages)


NONE = Breakpoints()


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix ``model`` caches (Anthropic's documented minimums; 1,024 otherwise)."""
    name = model.lower()
    for part, tokens in _MIN_TOKENS:
        if part in name:
            return tokens
    return DEFAULT_MIN_TOKENS


def bedrock_supports_cache_points(model_id: str) -> bool:
    """Whether Bedrock Converse accepts ``cachePoint`` blocks for this model id (or profile)."""
    name = model_id.lower()
    return any(part in name for part in _BEDROCK_CACHING_MODELS)


def place_breakpoints(
    request: ModelRequest, *, min_tokens: int | None = None, limit: int = MAX_BREAKPOINTS
) -> Breakpoints:
    """The breakpoints for ``request`` (none when it does not ask for caching); see the module doc.

    ``min_tokens``: the shortest prefix worth a breakpoint (default: the model's documented minimum).
    """
    if not request.prompt_caching or limit <= 0:
        return NONE
    floor = min_cacheable_tokens(request.model) if min_tokens is None else min_tokens
    tools_end = sum(_tool_tokens(tool) for tool in request.tools)
    stable, rest = request.system_parts
    system_end = tools_end + _tokens(stable)
    ends: list[int] = []  # the prefix length at the end of each message
    total = system_end + _tokens(rest)
    for turn in request.messages:
        total += _turn_tokens(turn)
        ends.append(total)
    tools = bool(request.tools) and tools_end >= floor
    system = bool(request.system) and system_end >= floor
    marked: list[int] = []
    last = len(request.messages) - 1
    if last >= 0 and ends[last] >= floor:
        marked.append(last)
        previous = _previous_user(request.messages, last)
        if previous is not None and ends[previous] >= floor:
            marked.append(previous)
    # Over the limit (a caller's smaller one): the moving end first, then system, then the rest.
    wanted = [("message", last)] if last in marked else []
    wanted += [("system", 0)] if system else []
    wanted += [("message", i) for i in marked if i != last]
    wanted += [("tools", 0)] if tools else []
    kept = wanted[:limit]
    return Breakpoints(
        tools=("tools", 0) in kept,
        system=("system", 0) in kept,
        messages=tuple(sorted(i for kind, i in kept if kind == "message")),
    )


def _previous_user(messages: tuple[ChatTurn, ...], last: int) -> int | None:
    """The user message before ``messages[last]``: where the previous request ended."""
    for index in range(last - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return None


def _tokens(text: str | None) -> int:
    return len(text) // CHARS_PER_TOKEN if text else 0


def _tool_tokens(tool: ToolSpec) -> int:
    return _tokens(tool.name) + _tokens(tool.description) + _tokens(json.dumps(tool.input_schema))


def _turn_tokens(turn: ChatTurn) -> int:
    total = _tokens(turn.text) + _ATTACHMENT_TOKENS * len(turn.attachments)
    total += sum(_tokens(json.dumps(call.input)) + _tokens(call.name) for call in turn.tool_calls)
    total += sum(_tokens(result.content) for result in turn.tool_results)
    return total


__all__ = [
    "MAX_BREAKPOINTS",
    "NONE",
    "Breakpoints",
    "bedrock_supports_cache_points",
    "min_cacheable_tokens",
    "place_breakpoints",
]
