"""Typed responses: one model per ``*_response`` the server sends, and the records they carry.

A response is the wire frame (``type``, ``timestamp``, ``data``, ...) with a typed ``data``, the
``*Result`` of its request. A failed request's response is a ``FailedResponse`` whatever its
type: ``data.error`` (the message) and ``data.code`` (the stable code of docs/protocol.md,
"Errors"), plus what the server echoes (the request's ids, empty lists). The typed client methods
raise ``RequestFailed`` for those, so their return values are always the success shapes below.

``__subscriptions`` (the sessions AgentX clients subscribe to after the response) is read as
``subscriptions``; like every field it dumps back under its wire name (``by_alias=True``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from agentvm.client.events import Frame, WireModel
from agentvm.messages import Message


class ImageInfo(WireModel):
    """An image as the protocol shows it (``record``): a configured agent with its one session."""

    imageId: str
    containerId: str
    sessionId: str
    name: str
    description: str | None = None
    systemPrompt: str | None = None
    model: str | None = None
    createdAt: int
    updatedAt: int
    online: bool
    agentId: str | None = None
    build: dict[str, Any] | None = None  # images built from an agent resource (docs/resources.md)
    customData: dict[str, Any] | None = None  # an application's own data (AgentX 2.x customData)


class AgentInfo(WireModel):
    agentId: str
    containerId: str
    imageId: str


class ToolWaitInfo(WireModel):
    """A tool call a suspended turn waits on (``tool_waits_request``)."""

    containerId: str
    imageId: str
    sessionId: str
    turnId: str
    toolCallId: str
    toolName: str
    input: dict[str, Any] = Field(default_factory=dict)
    kind: Literal["approval", "client", "sandbox", "mcp_task"] | str
    status: str
    createdAt: int
    deadlineAt: int
    decidedAt: int | None = None
    reason: str | None = None


class ResponseData(WireModel):
    requestId: str


class _WithSubscriptions(ResponseData):
    model_config = ConfigDict(populate_by_name=True)

    subscriptions: list[str] = Field(default_factory=list, alias="__subscriptions")


class ContainerCreateResult(ResponseData):
    containerId: str


class ContainerGetResult(ResponseData):
    containerId: str | None = None
    exists: bool


class ContainerListResult(ResponseData):
    containerIds: list[str]


class AgentGetResult(ResponseData):
    agentId: str | None = None
    containerId: str | None = None
    exists: bool


class AgentListResult(ResponseData):
    agents: list[AgentInfo]


class AgentDestroyResult(ResponseData):
    agentId: str
    success: bool


class AgentDestroyAllResult(ResponseData):
    containerId: str


class MessageSendResult(ResponseData):
    """The acceptance of a message (sent before the model answers). ``turnId``: the turn it
    started, whose frames carry it in ``context.turnId`` (with ``sessionId`` and ``messageId``,
    additive: an AgentVM from before them leaves them out)."""

    imageId: str
    agentId: str
    sessionId: str | None = None
    messageId: str | None = None
    turnId: str | None = None


class AgentInterruptResult(ResponseData):
    imageId: str
    agentId: str | None = None


class ImageCreateResult(_WithSubscriptions):
    record: ImageInfo


class ImageRunResult(ResponseData):
    imageId: str
    agentId: str
    reused: bool


class ImageStopResult(ResponseData):
    imageId: str


class ImageUpdateResult(ResponseData):
    record: ImageInfo


class ImageListResult(_WithSubscriptions):
    records: list[ImageInfo]


class ImageGetResult(_WithSubscriptions):
    record: ImageInfo | None = None


class ImageDeleteResult(ResponseData):
    imageId: str


class ImageMessagesResult(ResponseData):
    imageId: str
    messages: list[Message]


class ToolAnswerResult(ResponseData):
    """The answer to ``tool_approval_request`` or ``tool_result_request``."""

    turnId: str
    toolCallId: str
    status: str  # "approved", "denied" or "answered"


class ElicitationAnswerResult(ResponseData):
    """The answer to ``elicitation_answer_request``."""

    elicitationId: str
    action: str  # "accept", "decline" or "cancel"


class ToolWaitsResult(ResponseData):
    waits: list[ToolWaitInfo]


class FailedResult(ResponseData):
    """``data`` of any failed response: the message, the code, and what the server echoes."""

    error: str
    code: str = "unknown_error"
    limit: int | None = None
    resetAt: int | None = None
    used: int | None = None
    # echoed from the request, and the empty values typed AgentX clients read
    containerId: str | None = None
    imageId: str | None = None
    agentId: str | None = None
    exists: bool | None = None
    success: bool | None = None
    reused: bool | None = None
    containerIds: list[str] | None = None
    agents: list[AgentInfo] | None = None
    records: list[ImageInfo] | None = None
    messages: list[Message] | None = None


class Response(Frame):
    source: str = "command"
    category: str = "response"
    intent: str = "result"


class FailedResponse(Response):
    """Any ``*_response`` whose request failed (``data.error`` is set)."""

    data: FailedResult


class ContainerCreateResponse(Response):
    type: Literal["container_create_response"] = "container_create_response"
    data: ContainerCreateResult


class ContainerGetResponse(Response):
    type: Literal["container_get_response"] = "container_get_response"
    data: ContainerGetResult


class ContainerListResponse(Response):
    type: Literal["container_list_response"] = "container_list_response"
    data: ContainerListResult


class AgentGetResponse(Response):
    type: Literal["agent_get_response"] = "agent_get_response"
    data: AgentGetResult


class AgentListResponse(Response):
    type: Literal["agent_list_response"] = "agent_list_response"
    data: AgentListResult


class AgentDestroyResponse(Response):
    type: Literal["agent_destroy_response"] = "agent_destroy_response"
    data: AgentDestroyResult


class AgentDestroyAllResponse(Response):
    type: Literal["agent_destroy_all_response"] = "agent_destroy_all_response"
    data: AgentDestroyAllResult


class MessageSendResponse(Response):
    type: Literal["message_send_response"] = "message_send_response"
    data: MessageSendResult


class AgentInterruptResponse(Response):
    type: Literal["agent_interrupt_response"] = "agent_interrupt_response"
    data: AgentInterruptResult


class ImageCreateResponse(Response):
    type: Literal["image_create_response"] = "image_create_response"
    data: ImageCreateResult


class ImageRunResponse(Response):
    type: Literal["image_run_response"] = "image_run_response"
    data: ImageRunResult


class ImageStopResponse(Response):
    type: Literal["image_stop_response"] = "image_stop_response"
    data: ImageStopResult


class ImageUpdateResponse(Response):
    type: Literal["image_update_response"] = "image_update_response"
    data: ImageUpdateResult


class ImageListResponse(Response):
    type: Literal["image_list_response"] = "image_list_response"
    data: ImageListResult


class ImageGetResponse(Response):
    type: Literal["image_get_response"] = "image_get_response"
    data: ImageGetResult


class ImageDeleteResponse(Response):
    type: Literal["image_delete_response"] = "image_delete_response"
    data: ImageDeleteResult


class ImageMessagesResponse(Response):
    type: Literal["image_messages_response"] = "image_messages_response"
    data: ImageMessagesResult


class ToolApprovalResponse(Response):
    type: Literal["tool_approval_response"] = "tool_approval_response"
    data: ToolAnswerResult


class ToolResultResponse(Response):
    type: Literal["tool_result_response"] = "tool_result_response"
    data: ToolAnswerResult


class ElicitationAnswerResponse(Response):
    type: Literal["elicitation_answer_response"] = "elicitation_answer_response"
    data: ElicitationAnswerResult


class ToolWaitsResponse(Response):
    type: Literal["tool_waits_response"] = "tool_waits_response"
    data: ToolWaitsResult


RESPONSE_MODELS: dict[str, type[Response]] = {
    model.model_fields["type"].default: model
    for model in (
        ContainerCreateResponse,
        ContainerGetResponse,
        ContainerListResponse,
        AgentGetResponse,
        AgentListResponse,
        AgentDestroyResponse,
        AgentDestroyAllResponse,
        MessageSendResponse,
        AgentInterruptResponse,
        ImageCreateResponse,
        ImageRunResponse,
        ImageStopResponse,
        ImageUpdateResponse,
        ImageListResponse,
        ImageGetResponse,
        ImageDeleteResponse,
        ImageMessagesResponse,
        ToolApprovalResponse,
        ToolResultResponse,
        ToolWaitsResponse,
        ElicitationAnswerResponse,
    )
}
"""Every response type the SDK knows, by its ``type`` (the 17 AgentX pairs and 4 additive ones)."""

__all__ = [
    "RESPONSE_MODELS",
    "AgentDestroyAllResponse",
    "AgentDestroyAllResult",
    "AgentDestroyResponse",
    "AgentDestroyResult",
    "AgentGetResponse",
    "AgentGetResult",
    "AgentInfo",
    "AgentInterruptResponse",
    "AgentInterruptResult",
    "AgentListResponse",
    "AgentListResult",
    "ContainerCreateResponse",
    "ContainerCreateResult",
    "ContainerGetResponse",
    "ContainerGetResult",
    "ContainerListResponse",
    "ContainerListResult",
    "ElicitationAnswerResponse",
    "ElicitationAnswerResult",
    "FailedResponse",
    "FailedResult",
    "ImageCreateResponse",
    "ImageCreateResult",
    "ImageDeleteResponse",
    "ImageDeleteResult",
    "ImageGetResponse",
    "ImageGetResult",
    "ImageInfo",
    "ImageListResponse",
    "ImageListResult",
    "ImageMessagesResponse",
    "ImageMessagesResult",
    "ImageRunResponse",
    "ImageRunResult",
    "ImageStopResponse",
    "ImageStopResult",
    "ImageUpdateResponse",
    "ImageUpdateResult",
    "MessageSendResponse",
    "MessageSendResult",
    "Response",
    "ResponseData",
    "ToolAnswerResult",
    "ToolApprovalResponse",
    "ToolResultResponse",
    "ToolWaitInfo",
    "ToolWaitsResponse",
    "ToolWaitsResult",
]
