"""Parsing client frames (protocol §1.8) and validating the 17 request payloads (§2).

A frame is one of: a ``*_request`` SystemEvent, ``subscribe``, ``auth``, an ``__ack``, or
something we answer with an error. Request payloads are validated strictly (a string field given
a number is an error, not coerced); unknown extra keys are tolerated, because AgentX clients
flatten their ``context`` into ``data``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from agentvm.errors import BadRequest, FrameTooLarge, UnknownRequest
from agentvm.events import SUBSCRIBE_KEY
from agentvm.images.config import ImageConfig
from agentvm.messages import UserContentPart
from agentvm.records import ConcurrencyPolicy

Id = StrictStr


class _Req(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)

    requestId: StrictStr


def _id_field() -> Any:
    return Field(min_length=1, max_length=128)


class ContainerCreate(_Req):
    containerId: Id = _id_field()


class ContainerGet(_Req):
    containerId: Id = _id_field()


class ContainerList(_Req):
    pass


class AgentGet(_Req):
    agentId: Id = _id_field()


class AgentList(_Req):
    containerId: Id = _id_field()


class AgentDestroy(_Req):
    agentId: Id = _id_field()


class AgentDestroyAll(_Req):
    containerId: Id = _id_field()


class SendOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)

    concurrency: ConcurrencyPolicy | None = None


class MessageSend(_Req):
    imageId: Id | None = Field(default=None, min_length=1, max_length=128)
    agentId: Id | None = Field(default=None, min_length=1, max_length=128)
    content: StrictStr | list[UserContentPart]
    options: SendOptions | None = None

    @field_validator("content", mode="after")
    @classmethod
    def _content_not_empty(cls, v: Any) -> Any:
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("must not be empty")
        return v


class AgentInterrupt(_Req):
    imageId: Id | None = Field(default=None, min_length=1, max_length=128)
    agentId: Id | None = Field(default=None, min_length=1, max_length=128)


class ImageCreate(_Req):
    containerId: Id = _id_field()
    config: ImageConfig = Field(default_factory=ImageConfig)


class ImageRun(_Req):
    imageId: Id = _id_field()


class ImageStop(_Req):
    imageId: Id = _id_field()


class ImageUpdate(_Req):
    imageId: Id = _id_field()
    updates: ImageConfig


class ImageList(_Req):
    containerId: Id | None = Field(default=None, min_length=1, max_length=128)


class ImageGet(_Req):
    imageId: Id = _id_field()


class ImageDelete(_Req):
    imageId: Id = _id_field()


class ImageMessages(_Req):
    imageId: Id = _id_field()


class ToolApproval(_Req):
    """Additive (not in AgentX): approve or deny a tool call a suspended turn waits on."""

    turnId: Id = _id_field()
    toolCallId: Id = Field(min_length=1, max_length=256)
    approved: bool
    reason: StrictStr | None = Field(default=None, max_length=2000)


class ToolResultSubmit(_Req):
    """Additive: the result of a client-side tool call. ``output``: text, or any JSON value."""

    turnId: Id = _id_field()
    toolCallId: Id = Field(min_length=1, max_length=256)
    output: StrictStr | dict[str, Any] | list[Any] | int | float | bool | None
    isError: bool = False


class ToolWaitList(_Req):
    """Additive: the tool calls the caller's suspended turns wait on (of one container or image)."""

    containerId: Id | None = Field(default=None, min_length=1, max_length=128)
    imageId: Id | None = Field(default=None, min_length=1, max_length=128)


class ElicitationAnswerSubmit(_Req):
    """Additive: the answer to an MCP server's question (``tool_elicitation``). ``content``: an
    accepted form's values (checked against the server's schema)."""

    elicitationId: Id = Field(min_length=1, max_length=128)
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


REQUEST_MODELS: dict[str, type[_Req]] = {
    "container_create_request": ContainerCreate,
    "container_get_request": ContainerGet,
    "container_list_request": ContainerList,
    "agent_get_request": AgentGet,
    "agent_list_request": AgentList,
    "agent_destroy_request": AgentDestroy,
    "agent_destroy_all_request": AgentDestroyAll,
    "message_send_request": MessageSend,
    "agent_interrupt_request": AgentInterrupt,
    "image_create_request": ImageCreate,
    "image_run_request": ImageRun,
    "image_stop_request": ImageStop,
    "image_update_request": ImageUpdate,
    "image_list_request": ImageList,
    "image_get_request": ImageGet,
    "image_delete_request": ImageDelete,
    "image_messages_request": ImageMessages,
    # additive requests (docs/protocol.md, "Suspended turns")
    "tool_approval_request": ToolApproval,
    "tool_result_request": ToolResultSubmit,
    "tool_waits_request": ToolWaitList,
    # additive: a running MCP call's question (docs/protocol.md, "Elicitation")
    "elicitation_answer_request": ElicitationAnswerSubmit,
}


@dataclass(frozen=True, slots=True)
class RequestFrame:
    type: str
    request_id: str
    payload: _Req
    # ``data.__subscribe: true``: subscribe the caller to the sessions the response lists
    # (docs/protocol.md, "Server-side subscriptions"); AgentX clients never send it
    subscribe_listed: bool = False


@dataclass(frozen=True, slots=True)
class SubscribeFrame:
    session_id: str
    after_seq: int | None = None


@dataclass(frozen=True, slots=True)
class AuthFrame:
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IgnoredFrame:
    """``__ack`` frames and echoed ``*_response`` frames: accepted, nothing to do."""

    reason: str


Frame = RequestFrame | SubscribeFrame | AuthFrame | IgnoredFrame


class FrameError(BadRequest):
    """A bad frame, with whatever we could learn of it so the error can be correlated."""

    def __init__(self, cause: BadRequest, *, request_type: str | None, request_id: str | None) -> None:
        super().__init__(cause.message)
        self.code = cause.code
        self.cause = cause
        self.request_type = request_type
        self.request_id = request_id


MAX_DEPTH = 64  # objects and arrays nested in a frame; no request needs more than a handful
MAX_SAFE_INTEGER = 2**53 - 1  # what every JSON client can represent exactly
_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]{1,64}_request)"')
_REQUEST_ID = re.compile(rb'"requestId"\s*:\s*"([^"\\]{1,128})"')


def peek_request(raw: str | bytes) -> tuple[str | None, str | None]:
    """The request type and id of a frame we will not parse (too large, over a rate limit), found
    without parsing it, so the client still gets its ``*_response``."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    type_match, id_match = _TYPE.search(data), _REQUEST_ID.search(data)
    return (
        type_match.group(1).decode() if type_match else None,
        id_match.group(1).decode("utf-8", "replace") if id_match else None,
    )


def parse_frame(raw: str | bytes, *, max_bytes: int) -> Frame:
    """Parse one client frame. Raises ``FrameError`` (a ``BadRequest``) for anything invalid."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    if len(data) > max_bytes:
        request_type, request_id = peek_request(data)
        raise FrameError(
            FrameTooLarge(f"frame of {len(data)} bytes exceeds the limit of {max_bytes} bytes"),
            request_type=request_type,
            request_id=request_id,
        )
    try:
        doc = json.loads(raw)
    except RecursionError:
        # Too deep to parse at all: its type and request id are looked for, as for an oversized one.
        request_type, request_id = peek_request(data)
        raise FrameError(_too_deep(), request_type=request_type, request_id=request_id) from None
    except (ValueError, UnicodeDecodeError):
        raise FrameError(BadRequest("frame is not valid JSON"), request_type=None, request_id=None) from None
    if not isinstance(doc, dict):
        raise FrameError(BadRequest("frame must be a JSON object"), request_type=None, request_id=None)
    problem = _unsafe_content(doc)
    if problem is not None:
        data_ = doc.get("data")
        request_id = data_.get("requestId") if isinstance(data_, dict) else None
        type_ = doc.get("type")
        readable = isinstance(request_id, str) and _clean_text(request_id)
        raise FrameError(
            problem,
            request_type=type_
            if isinstance(type_, str) and type_.endswith("_request") and _clean_text(type_)
            else None,
            request_id=request_id if readable else None,
        )
    if "__ack" in doc:
        return IgnoredFrame("ack")
    type_ = doc.get("type")
    if not isinstance(type_, str) or not type_:
        raise FrameError(BadRequest("frame has no 'type'"), request_type=None, request_id=None)
    if type_ == "subscribe":
        return _parse_subscribe(doc)
    if type_ == "auth":
        headers = doc.get("headers")
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise FrameError(
                BadRequest("auth frame needs 'headers': an object of strings"),
                request_type=None,
                request_id=None,
            )
        return AuthFrame(headers={str(k): v for k, v in headers.items()})
    if type_.endswith("_response"):
        return IgnoredFrame("response")
    body = doc.get("data")
    request_id = body.get("requestId") if isinstance(body, dict) else None
    request_id = request_id if isinstance(request_id, str) else None
    model = REQUEST_MODELS.get(type_)
    if model is None:
        known = type_ if type_.endswith("_request") else None
        raise FrameError(
            UnknownRequest(f"unknown request type {type_!r}"), request_type=known, request_id=request_id
        )
    if not isinstance(body, dict):
        raise FrameError(
            BadRequest("request needs a 'data' object"), request_type=type_, request_id=request_id
        )
    try:
        payload = model.model_validate(body)
    except ValidationError as exc:
        raise FrameError(
            BadRequest(f"invalid {type_}: {_describe(exc)}"), request_type=type_, request_id=request_id
        ) from None
    return RequestFrame(
        type=type_,
        request_id=payload.requestId,
        payload=payload,
        subscribe_listed=body.get(SUBSCRIBE_KEY) is True,
    )


def _too_deep() -> BadRequest:
    return BadRequest(f"frame is nested more than {MAX_DEPTH} levels deep")


def _clean_text(value: str) -> bool:
    """Encodable as UTF-8: no lone surrogate (JSON escapes such as \\ud800 produce them)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unsafe_content(doc: Any) -> BadRequest | None:
    """What no request may hold, checked once over the whole frame (iteratively, so depth itself
    cannot hurt): nesting past MAX_DEPTH, strings with lone surrogates, integers no JSON client can
    represent. Each would otherwise fail later, where only an internal error can be answered."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                return _too_deep()
            for key, item in value.items():
                if not _clean_text(key):
                    return BadRequest("frame holds invalid Unicode (a lone surrogate)")
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                return _too_deep()
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            if not _clean_text(value):
                return BadRequest("frame holds invalid Unicode (a lone surrogate)")
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
            return BadRequest(f"frame holds an integer beyond ±{MAX_SAFE_INTEGER}")
    return None


def _parse_subscribe(doc: dict[str, Any]) -> SubscribeFrame:
    session_id = doc.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise FrameError(
            BadRequest("subscribe needs 'sessionId': a non-empty string"), request_type=None, request_id=None
        )
    after = doc.get("afterSeq")
    if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < 0):
        raise FrameError(
            BadRequest("'afterSeq' must be a non-negative integer"), request_type=None, request_id=None
        )
    return SubscribeFrame(session_id=session_id, after_seq=after)


def _describe(exc: ValidationError) -> str:
    """A short, client-facing summary of a validation error (no input values echoed)."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "data"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


# shared with the v2 gateway (``agentx_v2``), which validates its params with the same models
describe_error = _describe
unsafe_content = _unsafe_content

__all__ = [
    "MAX_DEPTH",
    "REQUEST_MODELS",
    "AuthFrame",
    "Frame",
    "FrameError",
    "IgnoredFrame",
    "RequestFrame",
    "SubscribeFrame",
    "describe_error",
    "parse_frame",
    "peek_request",
    "unsafe_content",
]
