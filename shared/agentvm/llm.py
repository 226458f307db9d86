"""The provider-neutral shapes a ModelClient consumes and produces.

A model call is a ``ModelRequest`` in and an async stream of ``ModelEvent`` out: ``ModelStart``
first, then ``TextDelta``s and tool calls (``ToolCallStart``, ``ToolCallDelta``s, ``ToolCallEnd``,
in that order per call; calls do not interleave), then exactly one ``ModelStop`` carrying the
provider-reported usage (``stop_reason="tool_use"`` when the model asks for tools). Failures are
raised as ``agentvm.errors.ProviderError`` subclasses. Closing the stream early (``aclose()``) must
close the provider connection, so tokens stop.

The conversation is a tuple of ``ChatTurn``: user turns carry text, attachments (images, files)
and, after a tool step, the ``ToolResult``s of the previous assistant turn's calls; assistant turns
carry text and the ``ToolCall``s the model made. Each adapter maps this onto its provider's shape
(Anthropic ``tool_use``/``tool_result`` blocks, OpenAI ``tool_calls`` + ``tool`` messages, Bedrock
Converse ``toolUse``/``toolResult``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: a unique name, what it does, and a JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model made: the provider's call id, the tool's name, the parsed input object."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Attachment:
    """An image or file part of a user message, or a media block of a rich tool result: base64
    data (or a URL) and its media type."""

    kind: Literal["image", "file"]
    media_type: str
    data: str
    name: str | None = None

    @property
    def is_url(self) -> bool:
        return self.data.startswith(("http://", "https://"))

    @property
    def size(self) -> int:
        """The decoded size in bytes of base64 data (0 for a URL)."""
        if self.is_url:
            return 0
        data = self.data.rstrip("=")
        return len(data) * 3 // 4

    def unsent_note(self) -> str:
        """What a model that cannot take this attachment reads instead."""
        return (
            f"[attachment {self.name or 'file'} ({self.media_type}) not sent: "
            "this model accepts images and PDFs only]"
        )

    def placeholder(self) -> str:
        """This block in a text-only rendering of a tool result (what a text model reads)."""
        named = f" {self.name}" if self.name else ""
        major = self.media_type.split("/", 1)[0]
        kind = "image" if self.kind == "image" else major if major in ("audio", "video") else "file"
        return f"[{kind}{named} ({self.media_type}, {self.size} bytes)]"


# The image types every provider here takes (Anthropic, OpenAI, Bedrock); another image is a file.
IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

ToolBlock = str | Attachment  # one block of a rich tool result: text, or media


def blocks_text(blocks: tuple[ToolBlock, ...] | list[ToolBlock]) -> str:
    """A rich tool result as text: its text blocks, its media as placeholders, one per line."""
    return "\n".join(b if isinstance(b, str) else b.placeholder() for b in blocks)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned for one call. ``content`` is its text for the model (JSON results are
    serialised; media as placeholders): what every model reads. ``blocks``, when a tool returned
    media (an MCP tool's image, audio, embedded blob), are the same result in order as text and
    media blocks: what an adapter whose provider takes media in a tool result sends instead."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    blocks: tuple[ToolBlock, ...] = ()

    @property
    def media(self) -> tuple[Attachment, ...]:
        return tuple(b for b in self.blocks if isinstance(b, Attachment))


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """One message of the conversation as a model sees it."""

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # assistant turns: the calls the model made
    tool_results: tuple[ToolResult, ...] = ()  # user turns after a tool step: the calls' results
    attachments: tuple[Attachment, ...] = ()  # user turns: images and files

    @property
    def empty(self) -> bool:
        return not (self.text or self.tool_calls or self.tool_results or self.attachments)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str  # the provider's own model name, e.g. "claude-haiku-4-5"
    messages: tuple[ChatTurn, ...]
    system: str | None = None
    max_tokens: int = 1024
    tools: tuple[ToolSpec, ...] = ()
    # Mark a stable prefix for the provider's prompt cache (adapters/llm/caching.py). Off unless the
    # caller asks: a one-off request (a title, a summary) would pay the cache write and never read it.
    prompt_caching: bool = False
    # Which conversation the request continues, hashed (no tenant or session id in it): OpenAI routes
    # requests with one ``prompt_cache_key`` to the same cache. None: no key is sent.
    cache_key: str | None = None
    # How much of ``system`` stays the same for the session (the image's prompt): the rest (the
    # session summary, replaced at each compaction) comes after the system breakpoint, so a
    # compaction does not cost the prompt's cache. None: all of it.
    stable_system_chars: int | None = None

    @property
    def system_parts(self) -> tuple[str, str]:
        """``system`` as (the stable part, what follows it); the second is often empty."""
        system = self.system or ""
        split = self.stable_system_chars
        if split is None or not 0 < split < len(system):
            return system, ""
        return system[:split], system[split:]


@dataclass(frozen=True, slots=True)
class ModelStart:
    message_id: str
    model: str
    # Input tokens when the provider reports them up front (Anthropic's message_start), so a turn
    # cut before ModelStop (interrupt, budget, failure) still bills its input. None: not known yet.
    input_tokens: int | None = None
    cache_read_tokens: int = 0  # of input_tokens: read from the prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to the prompt cache


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    # How many of the provider's deltas this carries: adapters merge the text deltas that one
    # network read completes (``merged_text``), and a call cut before its usage counts its output
    # tokens from these.
    deltas: int = 1


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model began a tool call (its input follows as ``ToolCallDelta``s)."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of the call's input JSON, as the provider streams it."""

    id: str
    partial_json: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The call is complete. ``input`` is the parsed object; ``input_error`` says why it could not be
    parsed (the model wrote invalid JSON), in which case the call is answered with that error."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    input_error: str | None = None


@dataclass(frozen=True, slots=True)
class ModelStop:
    stop_reason: StopReason = "end_turn"
    input_tokens: int = 0  # every input token, cached ones included
    output_tokens: int = 0
    cache_read_tokens: int = 0  # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to it (Anthropic reports these)


ModelEvent = ModelStart | TextDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | ModelStop


def merged_text(events: list[ModelEvent]) -> list[ModelEvent]:
    """``events`` with each run of consecutive ``TextDelta``s as one (their text joined, their
    ``deltas`` summed), in order.

    A provider sends a delta per token, and a network read brings several (the local host paces
    its reads, ``agent/pacing.py``: a read brings what arrived in most of a flush window). Their
    text goes out in one frame anyway; merged here, each read's text passes the retry wrapper,
    the turn's loop and the sink once instead of once per token: at a thousand streams that was
    a fifth of the server's CPU per token (benchmarks/local_load.py).
    """
    if len(events) < 2:
        return events
    out: list[ModelEvent] = []
    run: list[TextDelta] = []
    for event in events:
        if isinstance(event, TextDelta):
            run.append(event)
            continue
        if run:
            out.append(_joined(run))
            run = []
        out.append(event)
    if run:
        out.append(_joined(run))
    return out


def _joined(run: list[TextDelta]) -> TextDelta:
    if len(run) == 1:
        return run[0]
    return TextDelta("".join(d.text for d in run), deltas=sum(d.deltas for d in run))


def parse_tool_input(raw: str) -> tuple[dict[str, Any], str | None]:
    """The input object of a streamed call from its concatenated JSON (empty means ``{}``)."""
    import json

    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:  # a JSONDecodeError, or a number over Python's int digit limit
        where = f"{exc.msg} at {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return {}, f"the tool input is not valid JSON ({where})"
    if not isinstance(value, dict):
        return {}, "the tool input must be a JSON object"
    return value, None


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """One request to an embedding model, as its provider reported it: what to bill.

    ``model`` is ``provider/name`` (the usage record's model); ``input_tokens`` the provider's count
    (OpenAI ``usage.prompt_tokens``, Bedrock ``inputTextTokenCount`` or the token-count header)."""

    model: str
    input_tokens: int
    texts: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class ModelRef:
    """``"anthropic/claude-haiku-4-5"`` split into provider and the provider's model name."""

    provider: str
    name: str
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        provider, sep, name = ref.partition("/")
        if not sep or not provider or not name:
            from agentvm.errors import BadRequest

            raise BadRequest(f"model must look like 'provider/model', got {ref!r}")
        return cls(provider=provider, name=name)

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


__all__ = [
    "IMAGE_MEDIA_TYPES",
    "Attachment",
    "ChatTurn",
    "EmbeddingCall",
    "ModelEvent",
    "ModelRef",
    "ModelRequest",
    "ModelStart",
    "ModelStop",
    "StopReason",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolBlock",
    "ToolResult",
    "ToolSpec",
    "blocks_text",
    "merged_text",
    "parse_tool_input",
]
