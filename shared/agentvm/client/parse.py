"""One server frame (JSON text or the parsed dict) into its typed model.

Never raises for a well-formed JSON object: a type the SDK does not know, or a shape that does not
fit the type's model, gives an ``UnknownFrame`` holding the frame as it came (logged once per type
at WARNING: it means this SDK is older than the server, or a bug).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from agentvm.client.events import EVENT_MODELS, Frame, UnknownFrame
from agentvm.client.responses import RESPONSE_MODELS, FailedResponse

log = logging.getLogger("agentvm.client")
_warned: set[str] = set()


def parse_frame(frame: dict[str, Any] | str | bytes) -> Frame:
    """The typed model of a frame the server sent (an event or a response)."""
    raw: Any = json.loads(frame) if isinstance(frame, (str, bytes)) else frame
    if not isinstance(raw, dict):
        raise ValueError("a frame is a JSON object")
    type_ = raw.get("type")
    data = raw.get("data")
    model: type[Frame] | None = None
    if isinstance(type_, str):
        if type_.endswith("_response") and isinstance(data, dict) and data.get("error") is not None:
            model = FailedResponse
        else:
            model = EVENT_MODELS.get(type_) or RESPONSE_MODELS.get(type_)
    if model is not None:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            _warn(str(type_), f"does not fit its model: {exc.errors()[0]['loc']}")
    else:
        _warn(str(type_), "is not known to this SDK")
    try:
        return UnknownFrame.model_validate(raw)
    except ValidationError:
        return UnknownFrame.model_construct(type=str(type_), data=data)


def _warn(type_: str, problem: str) -> None:
    if type_ not in _warned:
        _warned.add(type_)
        log.warning("frame %r %s; kept as UnknownFrame", type_, problem)


__all__ = ["parse_frame"]
