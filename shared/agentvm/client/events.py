"""Typed frames the server pushes: one pydantic model per event type of docs/protocol.md.

Each event is the wire frame as it is (``type``, ``timestamp``, ``data``, ``source``, ``category``,
``intent``, and ``context`` and ``seq`` where the server sends them), with a typed ``data``:
``event.data.text`` of a ``TextDeltaEvent``, ``event.data`` *is* an ``AssistantMessage`` for an
``AssistantMessageEvent``. Messages are the server's own models (``agentvm.messages``): the shape
that is stored is the shape that is sent is the shape the SDK reads.

Why models checked against the server rather than generated from it: the server builds frames as
plain dicts on the hot path of every delta. What keeps the two in step is
``tests/unit/client/test_sdk_models.py``: every event type in the server's catalogue
(``agentvm.events.AGENT_EVENT_CATEGORY``) has a model here with the same category, and every frame
of scripted turns (text, tools, approvals, client tools, errors, interrupts, retries, lifecycle
events) on both hosts parses into these models and dumps back to the same JSON, with no field
left over.

Fields the server adds later are kept (``extra="allow"``), not dropped: an older SDK still reads
them as ``event.data.model_extra``. A frame of a type this SDK does not know, or whose shape does
not fit its model, becomes an ``UnknownFrame`` holding it as it came (never an exception in the
reader).

Its size (~730 lines): the catalogue of one model per event type, flat on purpose (a reader finds
an event by its name in one file, as docs/protocol.md lists them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentvm.messages import AssistantMessage, ErrorMessage, TokenUsage, ToolCallMessage, ToolResultMessage


class WireModel(BaseModel):
    """Base of the SDK's models: immutable, and keeps fields it does not declare (a newer
    server's additions, in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class EventContext(WireModel):
    """``context`` of a session's events: whose session it is, and (``turnId``) which turn."""

    containerId: str
    imageId: str
    agentId: str
    sessionId: str
    turnId: str | None = None


class Frame(WireModel):
    """What every frame the server sends has (AgentX's ``SystemEvent``)."""

    type: str
    timestamp: int
    data: Any = None
    source: str
    category: str
    intent: str = "notification"
    context: EventContext | None = None
    seq: int | None = None  # per-session sequence number of a turn's frames (resume)


class UnknownFrame(Frame):
    """A frame of a type this SDK does not know (or that does not fit its model), as it came."""

    source: str = ""
    category: str = ""
    timestamp: int = 0


class Event(Frame):
    """A pushed event (not a response); the defaults of ``source`` and ``category`` are what the
    server stamps on the type (checked against the server's catalogue by the tests)."""


# -- stream events -----------------------------------------------------------------------------
class MessageStartData(WireModel):
    messageId: str
    model: str


class MessageStartEvent(Event):
    """A model call starts (each step of a tool turn has its own)."""

    type: Literal["message_start"] = "message_start"
    source: str = "agent"
    category: str = "stream"
    data: MessageStartData


class MessageDeltaData(WireModel):
    usage: TokenUsage | None = None


class MessageDeltaEvent(Event):
    """In AgentX's catalogue; AgentVM does not send it (usage is on ``assistant_message``)."""

    type: Literal["message_delta"] = "message_delta"
    source: str = "agent"
    category: str = "stream"
    data: MessageDeltaData


class MessageStopData(WireModel):
    stopReason: str


class MessageStopEvent(Event):
    type: Literal["message_stop"] = "message_stop"
    source: str = "agent"
    category: str = "stream"
    data: MessageStopData


class TextDeltaData(WireModel):
    text: str


class TextDeltaEvent(Event):
    """Reply text: the first delta at once, later ones merged per flush window."""

    type: Literal["text_delta"] = "text_delta"
    source: str = "agent"
    category: str = "stream"
    data: TextDeltaData


class ToolUseStartData(WireModel):
    toolCallId: str
    toolName: str


class ToolUseStartEvent(Event):
    type: Literal["tool_use_start"] = "tool_use_start"
    source: str = "agent"
    category: str = "stream"
    data: ToolUseStartData


class InputJsonDeltaData(WireModel):
    partialJson: str


class InputJsonDeltaEvent(Event):
    """A tool call's whole input as JSON text (one frame per call)."""

    type: Literal["input_json_delta"] = "input_json_delta"
    source: str = "agent"
    category: str = "stream"
    data: InputJsonDeltaData


class ToolUseStopData(WireModel):
    toolCallId: str
    toolName: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolUseStopEvent(Event):
    """A tool call is complete: its id, name and input."""

    type: Literal["tool_use_stop"] = "tool_use_stop"
    source: str = "agent"
    category: str = "stream"
    data: ToolUseStopData


class ToolResultData(WireModel):
    toolCallId: str
    toolName: str | None = None  # (additive) the tool's name; None from servers before it was sent
    result: Any = None  # what the model reads (text, usually; media as placeholders)
    isError: bool = False
    # (additive) a rich result's blocks in order: {"type": "text", "text"} and {"type": "media",
    # "data" (base64), "mediaType", "filename"?} (an MCP tool's image); None for a text result
    content: list[dict[str, Any]] | None = None
    structuredContent: Any = None  # (additive) a JSON value the tool returned beside its content (MCP)

    @property
    def images(self) -> list[tuple[str, bytes]]:
        """The result's images as (media type, bytes)."""
        import base64

        return [
            (str(p.get("mediaType")), base64.b64decode(str(p.get("data") or "")))
            for p in self.content or ()
            if p.get("type") == "media" and str(p.get("mediaType") or "").startswith("image/")
        ]


class ToolResultEvent(Event):
    type: Literal["tool_result"] = "tool_result"
    source: str = "agent"
    category: str = "stream"
    data: ToolResultData


class ErrorReceivedData(WireModel):
    message: str
    errorCode: str | None = None


class ErrorReceivedEvent(Event):
    """In AgentX's catalogue (an artifact); AgentVM does not send it."""

    type: Literal["error_received"] = "error_received"
    source: str = "agent"
    category: str = "stream"
    data: ErrorReceivedData


# -- state events ------------------------------------------------------------------------------
class MessageIdData(WireModel):
    messageId: str


class EmptyData(WireModel):
    pass


class ConversationQueuedEvent(Event):
    """In AgentX's catalogue; AgentVM does not send it."""

    type: Literal["conversation_queued"] = "conversation_queued"
    source: str = "agent"
    category: str = "state"
    data: MessageIdData


class ConversationStartEvent(Event):
    type: Literal["conversation_start"] = "conversation_start"
    source: str = "agent"
    category: str = "state"
    data: MessageIdData


class ConversationThinkingEvent(Event):
    """In AgentX's catalogue; AgentVM does not send it."""

    type: Literal["conversation_thinking"] = "conversation_thinking"
    source: str = "agent"
    category: str = "state"
    data: EmptyData = Field(default_factory=EmptyData)


class ConversationRespondingEvent(Event):
    """Once per model step, after its first text."""

    type: Literal["conversation_responding"] = "conversation_responding"
    source: str = "agent"
    category: str = "state"
    data: EmptyData = Field(default_factory=EmptyData)


class ReasonData(WireModel):
    reason: str


class ConversationEndEvent(Event):
    """The turn is over: ``reason`` ``"completed"`` or ``"interrupted"``."""

    type: Literal["conversation_end"] = "conversation_end"
    source: str = "agent"
    category: str = "state"
    data: ReasonData


class ConversationInterruptedEvent(Event):
    """In AgentX's catalogue; AgentVM sends ``interrupted`` and ``conversation_end`` instead."""

    type: Literal["conversation_interrupted"] = "conversation_interrupted"
    source: str = "agent"
    category: str = "state"
    data: ReasonData


class ToolPlannedData(WireModel):
    toolId: str
    toolName: str


class ToolPlannedEvent(Event):
    type: Literal["tool_planned"] = "tool_planned"
    source: str = "agent"
    category: str = "state"
    data: ToolPlannedData


class ToolExecutingData(WireModel):
    toolId: str
    toolName: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolExecutingEvent(Event):
    type: Literal["tool_executing"] = "tool_executing"
    source: str = "agent"
    category: str = "state"
    data: ToolExecutingData


class ToolCompletedData(WireModel):
    toolId: str
    toolName: str
    result: Any = None
    structuredContent: Any = None  # (additive) a JSON value the tool returned beside its content (MCP)


class ToolCompletedEvent(Event):
    type: Literal["tool_completed"] = "tool_completed"
    source: str = "agent"
    category: str = "state"
    data: ToolCompletedData


class ToolFailedData(WireModel):
    toolId: str
    toolName: str
    error: str


class ToolFailedEvent(Event):
    type: Literal["tool_failed"] = "tool_failed"
    source: str = "agent"
    category: str = "state"
    data: ToolFailedData


class ErrorOccurredData(WireModel):
    code: str
    message: str
    recoverable: bool = True
    category: str | None = None


class ErrorOccurredEvent(Event):
    """The turn failed (after an ``error_message``): it ends here, with no ``conversation_end``."""

    type: Literal["error_occurred"] = "error_occurred"
    source: str = "agent"
    category: str = "state"
    data: ErrorOccurredData


class ToolWaitData(WireModel):
    turnId: str
    toolCallId: str
    toolName: str
    input: dict[str, Any] = Field(default_factory=dict)
    deadlineAt: int


class ToolApprovalRequestedEvent(Event):
    """A call waits for a person's approval: answer with ``approve``/``deny`` (additive)."""

    type: Literal["tool_approval_requested"] = "tool_approval_requested"
    source: str = "agent"
    category: str = "state"
    data: ToolWaitData


class ClientToolRequestedEvent(Event):
    """A client-side tool's call waits for the client's result (additive)."""

    type: Literal["client_tool_requested"] = "client_tool_requested"
    source: str = "agent"
    category: str = "state"
    data: ToolWaitData


class ToolProgressData(WireModel):
    toolId: str
    toolName: str
    progress: float
    total: float | None = None
    message: str | None = None


class ToolProgressEvent(Event):
    """A running call's progress (an MCP server's progress notifications; at most ~2 a second per
    call, the last one always; additive)."""

    type: Literal["tool_progress"] = "tool_progress"
    source: str = "agent"
    category: str = "state"
    data: ToolProgressData


class ToolElicitationData(WireModel):
    elicitationId: str
    turnId: str
    toolId: str  # the running call's id
    toolName: str
    mode: Literal["form", "url"] | str
    message: str
    requestedSchema: dict[str, Any] | None = None  # form: a flat JSON Schema object
    url: str | None = None  # url: the page the user is asked to open
    deadlineAt: int  # epoch ms: unanswered by then, the server is told cancel


class ToolElicitationEvent(Event):
    """An MCP server asks the user something during a call (additive). Answer with
    ``AgentVMClient.answer_elicitation`` (accept with content, decline or cancel); the call waits."""

    type: Literal["tool_elicitation"] = "tool_elicitation"
    source: str = "agent"
    category: str = "state"
    data: ToolElicitationData


class ToolElicitationEndedData(WireModel):
    elicitationId: str
    toolId: str
    toolName: str
    action: Literal["accept", "decline", "cancel"] | str
    reason: Literal["answered", "timed_out", "interrupted"] | str


class ToolElicitationEndedEvent(Event):
    """A server's question is closed: answered, timed out or cut by an interrupt (additive)."""

    type: Literal["tool_elicitation_ended"] = "tool_elicitation_ended"
    source: str = "agent"
    category: str = "state"
    data: ToolElicitationEndedData


class McpServerFailedData(WireModel):
    server: str
    stage: Literal["start", "list", "call"] | str  # could not start, list its tools, or answer a call
    reason: str  # e.g. "is unreachable: ...", "crashed during tool 'x'" (after the server's name)
    toolName: str | None = None  # the call it failed (stage "call")
    exitCode: int | None = None


class McpServerFailedEvent(Event):
    """An MCP server of the image could not start, list its tools or answer a call: its tools are
    left out of the turn, or the call failed (additive). Never carries a header or env value."""

    type: Literal["mcp_server_failed"] = "mcp_server_failed"
    source: str = "agent"
    category: str = "state"
    data: McpServerFailedData


class ModelRetryData(WireModel):
    attempt: int  # the model call about to be made (2: the first retry)
    delayMs: int  # how long the server waits before it
    reason: Literal["rate_limited", "overloaded", "unavailable"] | str


class ModelRetryEvent(Event):
    """A model call failed before answering (rate limited, overloaded, unavailable) and is made
    again after ``delayMs`` (additive). Never carries the provider's message."""

    type: Literal["model_retry"] = "model_retry"
    source: str = "agent"
    category: str = "state"
    data: ModelRetryData


class WaitingFor(WireModel):
    toolCallId: str
    toolName: str
    kind: Literal["approval", "client", "sandbox", "mcp_task"] | str
    deadlineAt: int


class TurnSuspendedData(WireModel):
    turnId: str
    waitingFor: list[WaitingFor] = Field(default_factory=list)


class TurnSuspendedEvent(Event):
    """The turn waits (approval, client tool, sandbox job); it goes on once they are answered."""

    type: Literal["turn_suspended"] = "turn_suspended"
    source: str = "agent"
    category: str = "state"
    data: TurnSuspendedData


# -- message events: the stored messages themselves ---------------------------------------------
class AssistantMessageEvent(Event):
    """A step's text, as stored; ``data.usage``: the turn's tokens (an extension)."""

    type: Literal["assistant_message"] = "assistant_message"
    source: str = "agent"
    category: str = "message"
    data: AssistantMessage


class ToolCallMessageEvent(Event):
    type: Literal["tool_call_message"] = "tool_call_message"
    source: str = "agent"
    category: str = "message"
    data: ToolCallMessage


class ToolResultMessageEvent(Event):
    type: Literal["tool_result_message"] = "tool_result_message"
    source: str = "agent"
    category: str = "message"
    data: ToolResultMessage


class ErrorMessageEvent(Event):
    type: Literal["error_message"] = "error_message"
    source: str = "agent"
    category: str = "message"
    data: ErrorMessage


# -- turn and lifecycle events ---------------------------------------------------------------------
class TurnRequestData(WireModel):
    turnId: str
    messageId: str
    content: str
    timestamp: int


class TurnRequestEvent(Event):
    """In AgentX's catalogue; AgentVM does not send it."""

    type: Literal["turn_request"] = "turn_request"
    source: str = "agent"
    category: str = "turn"
    data: TurnRequestData


class TurnResponseData(WireModel):
    turnId: str
    messageId: str
    duration: int
    usage: TokenUsage | None = None
    model: str | None = None
    stopReason: str | None = None
    timestamp: int


class TurnResponseEvent(Event):
    """In AgentX's catalogue; AgentVM does not send it."""

    type: Literal["turn_response"] = "turn_response"
    source: str = "agent"
    category: str = "turn"
    data: TurnResponseData


class InterruptedData(WireModel):
    agentId: str
    containerId: str


class InterruptedEvent(Event):
    """The turn saw the interrupt; ``conversation_end {reason: "interrupted"}`` follows."""

    type: Literal["interrupted"] = "interrupted"
    source: str = "agent"
    category: str = "lifecycle"
    data: InterruptedData


class MessagePersistedData(WireModel):
    sessionId: str
    messageId: str
    savedAt: int


class MessagePersistedEvent(Event):
    """The first frame of every turn (of every attempt): the user message is stored."""

    type: Literal["message_persisted"] = "message_persisted"
    source: str = "session"
    category: str = "persist"
    intent: str = "result"
    data: MessagePersistedData


class FileChangedData(WireModel):
    path: str
    change: Literal["created", "modified", "deleted"] | str
    size: int


class FileChangedEvent(Event):
    """A sandbox tool call changed a workspace file (additive)."""

    type: Literal["file_changed"] = "file_changed"
    source: str = "sandbox"
    category: str = "workdir"
    data: FileChangedData


class ContainerCreatedData(WireModel):
    containerId: str
    createdAt: int


class ContainerCreatedEvent(Event):
    """To the caller, before the response of the request that created the container."""

    type: Literal["container_created"] = "container_created"
    source: str = "container"
    category: str = "lifecycle"
    data: ContainerCreatedData


class AgentRegisteredData(WireModel):
    containerId: str
    agentId: str
    definitionName: str
    registeredAt: int


class AgentRegisteredEvent(Event):
    type: Literal["agent_registered"] = "agent_registered"
    source: str = "container"
    category: str = "lifecycle"
    data: AgentRegisteredData


class AgentUnregisteredData(WireModel):
    containerId: str
    agentId: str
    reason: str


class AgentUnregisteredEvent(Event):
    type: Literal["agent_unregistered"] = "agent_unregistered"
    source: str = "container"
    category: str = "lifecycle"
    data: AgentUnregisteredData


class SessionDestroyedData(WireModel):
    sessionId: str
    agentId: str
    containerId: str


class SessionDestroyedEvent(Event):
    """The image was stopped or deleted (outside any turn: no ``seq``)."""

    type: Literal["session_destroyed"] = "session_destroyed"
    source: str = "session"
    category: str = "lifecycle"
    data: SessionDestroyedData


class ErrorDetails(WireModel):
    """``details`` of a ``system_error``: the stable ``code`` and what goes with it."""

    code: str
    limit: int | None = None  # quota_exceeded, rate_limited, storage_quota_exceeded
    resetAt: int | None = None  # quota_exceeded, rate_limited (epoch ms)
    used: int | None = None  # storage_quota_exceeded (bytes)
    sessionId: str | None = None  # storage_unavailable during a turn
    turnId: str | None = None


class SystemErrorData(WireModel):
    message: str
    severity: str = "error"
    requestId: str | None = None
    details: ErrorDetails


class SystemErrorEvent(Event):
    """A failed command (before its response), a refused frame, or storage failing in a turn."""

    type: Literal["system_error"] = "system_error"
    source: str = "command"
    category: str = "error"
    data: SystemErrorData


EVENT_MODELS: dict[str, type[Event]] = {
    model.model_fields["type"].default: model
    for model in (
        MessageStartEvent,
        MessageDeltaEvent,
        MessageStopEvent,
        TextDeltaEvent,
        ToolUseStartEvent,
        InputJsonDeltaEvent,
        ToolUseStopEvent,
        ToolResultEvent,
        ErrorReceivedEvent,
        ConversationQueuedEvent,
        ConversationStartEvent,
        ConversationThinkingEvent,
        ConversationRespondingEvent,
        ConversationEndEvent,
        ConversationInterruptedEvent,
        ToolPlannedEvent,
        ToolExecutingEvent,
        ToolCompletedEvent,
        ToolFailedEvent,
        ErrorOccurredEvent,
        ToolApprovalRequestedEvent,
        ClientToolRequestedEvent,
        TurnSuspendedEvent,
        ToolProgressEvent,
        ToolElicitationEvent,
        ToolElicitationEndedEvent,
        McpServerFailedEvent,
        ModelRetryEvent,
        AssistantMessageEvent,
        ToolCallMessageEvent,
        ToolResultMessageEvent,
        ErrorMessageEvent,
        TurnRequestEvent,
        TurnResponseEvent,
        InterruptedEvent,
        MessagePersistedEvent,
        FileChangedEvent,
        ContainerCreatedEvent,
        AgentRegisteredEvent,
        AgentUnregisteredEvent,
        SessionDestroyedEvent,
        SystemErrorEvent,
    )
}
"""Every pushed event type the SDK knows, by its ``type``."""

AgentEvent = (
    MessageStartEvent
    | MessageDeltaEvent
    | MessageStopEvent
    | TextDeltaEvent
    | ToolUseStartEvent
    | InputJsonDeltaEvent
    | ToolUseStopEvent
    | ToolResultEvent
    | ErrorReceivedEvent
    | ConversationQueuedEvent
    | ConversationStartEvent
    | ConversationThinkingEvent
    | ConversationRespondingEvent
    | ConversationEndEvent
    | ConversationInterruptedEvent
    | ToolPlannedEvent
    | ToolExecutingEvent
    | ToolCompletedEvent
    | ToolFailedEvent
    | ErrorOccurredEvent
    | ToolApprovalRequestedEvent
    | ClientToolRequestedEvent
    | TurnSuspendedEvent
    | ToolProgressEvent
    | ToolElicitationEvent
    | ToolElicitationEndedEvent
    | McpServerFailedEvent
    | ModelRetryEvent
    | AssistantMessageEvent
    | ToolCallMessageEvent
    | ToolResultMessageEvent
    | ErrorMessageEvent
    | TurnRequestEvent
    | TurnResponseEvent
    | InterruptedEvent
    | MessagePersistedEvent
    | FileChangedEvent
    | ContainerCreatedEvent
    | AgentRegisteredEvent
    | AgentUnregisteredEvent
    | SessionDestroyedEvent
    | SystemErrorEvent
    | UnknownFrame
)
"""What a turn (``client.send``) or the client's event stream yields: for ``match`` and type checkers."""

__all__ = [
    "EVENT_MODELS",
    "WireModel",
    "AgentEvent",
    "AgentRegisteredData",
    "AgentRegisteredEvent",
    "AgentUnregisteredData",
    "AgentUnregisteredEvent",
    "AssistantMessageEvent",
    "ClientToolRequestedEvent",
    "ContainerCreatedData",
    "ContainerCreatedEvent",
    "ConversationEndEvent",
    "ConversationInterruptedEvent",
    "ConversationQueuedEvent",
    "ConversationRespondingEvent",
    "ConversationStartEvent",
    "ConversationThinkingEvent",
    "EmptyData",
    "ErrorDetails",
    "ErrorMessageEvent",
    "ErrorOccurredData",
    "ErrorOccurredEvent",
    "ErrorReceivedData",
    "ErrorReceivedEvent",
    "Event",
    "EventContext",
    "FileChangedData",
    "FileChangedEvent",
    "Frame",
    "InputJsonDeltaData",
    "InputJsonDeltaEvent",
    "InterruptedData",
    "InterruptedEvent",
    "MessageDeltaData",
    "MessageDeltaEvent",
    "MessageIdData",
    "MessagePersistedData",
    "MessagePersistedEvent",
    "MessageStartData",
    "MessageStartEvent",
    "MessageStopData",
    "MessageStopEvent",
    "ReasonData",
    "SessionDestroyedData",
    "SessionDestroyedEvent",
    "SystemErrorData",
    "SystemErrorEvent",
    "TextDeltaData",
    "TextDeltaEvent",
    "ToolApprovalRequestedEvent",
    "ToolCallMessageEvent",
    "ToolCompletedData",
    "ToolCompletedEvent",
    "ToolExecutingData",
    "ToolExecutingEvent",
    "ToolFailedData",
    "ToolFailedEvent",
    "ToolPlannedData",
    "ToolPlannedEvent",
    "ToolResultData",
    "ToolResultEvent",
    "ToolResultMessageEvent",
    "ToolUseStartData",
    "ToolUseStartEvent",
    "ToolUseStopData",
    "ToolUseStopEvent",
    "ToolWaitData",
    "TurnRequestData",
    "TurnRequestEvent",
    "TurnResponseData",
    "TurnResponseEvent",
    "TurnSuspendedData",
    "TurnSuspendedEvent",
    "ToolElicitationData",
    "ToolElicitationEndedData",
    "ToolElicitationEndedEvent",
    "ToolElicitationEvent",
    "ToolProgressData",
    "ToolProgressEvent",
    "McpServerFailedData",
    "McpServerFailedEvent",
    "ModelRetryData",
    "ModelRetryEvent",
    "UnknownFrame",
    "WaitingFor",
]
