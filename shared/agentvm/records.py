"""Stored records: containers, images, sessions, turns and usage.

Every record carries ``tenantId``: container ids are chosen by clients but scoped by tenant, so
tenant A's ``user-alice`` and tenant B's ``user-alice`` are different containers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ConcurrencyPolicy = Literal["queue", "reject", "interrupt"]
TurnStatus = Literal["queued", "running", "completed", "interrupted", "failed"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContainerRecord(_Record):
    tenantId: str
    containerId: str
    createdAt: int
    updatedAt: int


class ImageRecord(_Record):
    """A built agent config: what users see as a conversation. One image owns one session."""

    tenantId: str
    imageId: str
    containerId: str
    sessionId: str
    name: str
    description: str | None = None
    systemPrompt: str | None = None
    model: str | None = None  # "provider/model"; None = the server default
    mcpServers: dict[str, Any] | None = None  # passed through and stored, never interpreted here
    concurrency: ConcurrencyPolicy = "queue"
    agentId: str | None = None  # set while the image is "running" (online)
    createdAt: int
    updatedAt: int

    def to_wire(self) -> dict[str, Any]:
        """The protocol's ImageListItem: record fields minus mcpServers/tenant, plus ``online``."""
        out: dict[str, Any] = {
            "imageId": self.imageId,
            "containerId": self.containerId,
            "sessionId": self.sessionId,
            "name": self.name,
            "createdAt": self.createdAt,
            "updatedAt": self.updatedAt,
            "online": self.agentId is not None,
        }
        for key in ("description", "systemPrompt", "model", "agentId"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class SessionRecord(_Record):
    tenantId: str
    sessionId: str
    imageId: str
    containerId: str
    createdAt: int
    updatedAt: int


class TurnJob(_Record):
    """What the queue carries: enough to run one turn without any other lookup but the image."""

    turnId: str
    tenantId: str
    containerId: str
    imageId: str
    sessionId: str
    agentId: str
    userMessageId: str
    requestId: str
    enqueuedAt: int


class TurnRecord(_Record):
    turnId: str
    sessionId: str
    status: TurnStatus
    updatedAt: int


class UsageRecord(_Record):
    """Provider-reported tokens of one turn: the unit of metering and billing."""

    turnId: str
    tenantId: str
    containerId: str
    imageId: str
    sessionId: str
    model: str
    inputTokens: int = 0
    outputTokens: int = 0
    ttftMs: int | None = None
    durationMs: int = 0
    status: TurnStatus = "completed"
    createdAt: int = Field(default=0)


__all__ = [
    "ConcurrencyPolicy",
    "ContainerRecord",
    "ImageRecord",
    "SessionRecord",
    "TurnJob",
    "TurnRecord",
    "TurnStatus",
    "UsageRecord",
]
