"""The documented answers of the routes ``api/app.py`` declares itself (``/health``, API keys,
budgets, usage, workspaces): their schemas and real examples, for ``/openapi.json`` (``api/openapi.py``).

The examples are answers these routes gave in a test (tenant ``acme``, the test clock's
2026-01-15 noon); the models document, they do not filter (routes answer ``response_model=None``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agentvm import __version__
from agentvm.records import UsageRecord

HEALTH = {"status": "ok", "version": __version__}

_KEY = {
    "keyId": "ff4n134rhdoe",
    "tenantId": "acme",
    "name": "web app",
    "scopes": ["client"],
    "createdAt": 1768478400000,
    "revokedAt": None,
    "rateLimitPerMinute": 60,
}
NEW_KEY = {"key": _KEY, "token": "avm_ff4n134rhdoe_s72ZpfWFvroeXTpOnIh1LytHzE_wDpPFMEFgAYcZ8xo"}
KEYS = {
    "keys": [
        _KEY,
        {**_KEY, "keyId": "xo2kjq8l7mf0", "name": "ops", "scopes": ["admin"], "rateLimitPerMinute": None},
    ]
}
REVOKED_KEY = {"key": {**_KEY, "revokedAt": 1768478460000}}

BUDGET = {
    "daily_tokens": 1000000,
    "monthly_tokens": 20000000,
    "usage": {"day": 18250, "month": 402113, "dayResetAt": 1768521600000, "monthResetAt": 1769904000000},
}
CONTAINER_BUDGET = {**BUDGET, "daily_tokens": 50000, "monthly_tokens": None}

USAGE = {
    "records": [
        {
            "turnId": "turn_mww08c7b_7oyaqhm3q1",
            "tenantId": "acme",
            "containerId": "user-alice",
            "imageId": "img_mww08c64_246ayhg6cz",
            "sessionId": "sess_mww08c64_246ayhqgiu",
            "model": "anthropic/claude-haiku-4-5",
            "inputTokens": 1210,
            "outputTokens": 84,
            "ttftMs": 412,
            "durationMs": 1890,
            "status": "completed",
            "createdAt": 1768478400000,
            "kind": "turn",
            "estimated": False,
        }
    ],
    "totals": {"turns": 1, "inputTokens": 1210, "outputTokens": 84, "totalTokens": 1294},
}

WORKSPACE = {"path": "src", "entries": [{"path": "src/hello.py", "kind": "file", "size": 11}]}
WORKSPACE_FILE = {"path": "src/hello.py", "content": "print(6*7)\n", "truncated": False}


class ApiKey(BaseModel):
    """An API key as clients see it: never its hash or secret."""

    keyId: str
    tenantId: str
    name: str | None
    scopes: list[Literal["admin", "client"]]
    createdAt: int = Field(description="epoch milliseconds")
    revokedAt: int | None = Field(description="epoch milliseconds; null while it is valid")
    rateLimitPerMinute: int | None = Field(description="null: the server's limit")


class NewKey(BaseModel):
    key: ApiKey
    token: str = Field(description="avm_<keyId>_<secret>: shown in this answer only")


class KeyList(BaseModel):
    keys: list[ApiKey]


class OneKey(BaseModel):
    key: ApiKey


class BudgetUsage(BaseModel):
    day: int = Field(description="tokens (input + output) used this UTC day")
    month: int = Field(description="tokens used this UTC calendar month")
    dayResetAt: int = Field(description="epoch milliseconds")
    monthResetAt: int = Field(description="epoch milliseconds")


class Budget(BaseModel):
    daily_tokens: int | None = Field(description="null: no limit")
    monthly_tokens: int | None = Field(description="null: no limit")
    usage: BudgetUsage


class UsageTotals(BaseModel):
    turns: int = Field(description="records of kind turn")
    inputTokens: int
    outputTokens: int
    totalTokens: int


class Usage(BaseModel):
    records: list[UsageRecord]
    totals: UsageTotals


class WorkspaceEntry(BaseModel):
    path: str = Field(description="relative to the workspace root")
    kind: Literal["file", "dir", "link"]
    size: int


class WorkspaceListing(BaseModel):
    path: str
    entries: list[WorkspaceEntry]


class WorkspaceFile(BaseModel):
    path: str
    content: str = Field(description="UTF-8 text (bytes that are not are replaced)")
    truncated: bool = Field(description="true: the file is over 1 MiB and this is its first MiB")


__all__ = [
    "BUDGET",
    "CONTAINER_BUDGET",
    "HEALTH",
    "KEYS",
    "NEW_KEY",
    "REVOKED_KEY",
    "USAGE",
    "WORKSPACE",
    "WORKSPACE_FILE",
    "ApiKey",
    "Budget",
    "KeyList",
    "NewKey",
    "OneKey",
    "Usage",
    "WorkspaceFile",
    "WorkspaceListing",
]
