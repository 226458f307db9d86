"""Real answers of ``/health`` (``api/health.py``), API keys (``api/keys.py``), budgets and usage
(``api/budgets.py``) and workspaces (``api/workspaces.py``), as their documented examples
(``ok(...)`` in ``api/openapi.py``): what these routes answered in a test (tenant ``acme``, the
test clock's 2026-01-15 noon). Plain data, cheap to import; their schemas are in ``api/answers.py``,
imported only to build the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from agentvm import __version__

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
    "dailyTokens": 1000000,
    "monthlyTokens": 20000000,
    "usage": {"day": 18250, "month": 402113, "dayResetAt": 1768521600000, "monthResetAt": 1769904000000},
}
CONTAINER_BUDGET = {**BUDGET, "dailyTokens": 50000, "monthlyTokens": None}

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
            "cacheReadTokens": 1024,
            "cacheWriteTokens": 0,
            "ttftMs": 412,
            "durationMs": 1890,
            "status": "completed",
            "createdAt": 1768478400000,
            "kind": "turn",
            "estimated": False,
            "routedBy": None,
            "savedInputTokens": 0,
            "savedOutputTokens": 0,
            "cacheSavings": 0.000968,
            "replyCacheSavings": 0.0,
        },
        {
            "turnId": "turn_mww08d2k_1hq7c0xv9e",
            "tenantId": "acme",
            "containerId": "user-bob",
            "imageId": "img_mww08d1f_8kz2m4wq0b",
            "sessionId": "sess_mww08d1f_8kz2m5c3rt",
            "model": "anthropic/claude-haiku-4-5",
            "inputTokens": 0,
            "outputTokens": 0,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "ttftMs": None,
            "durationMs": 0,
            "status": "completed",
            "createdAt": 1768478460000,
            "kind": "reply_cache",
            "estimated": False,
            "routedBy": None,
            "savedInputTokens": 1186,
            "savedOutputTokens": 84,
            "cacheSavings": 0.0,
            "replyCacheSavings": 0.001686,
        },
    ],
    "totals": {
        "turns": 2,
        "inputTokens": 1210,
        "outputTokens": 84,
        "totalTokens": 1294,
        "cacheReadTokens": 1024,
        "cacheWriteTokens": 0,
        "cacheSavings": 0.000968,
        "savedInputTokens": 1186,
        "savedOutputTokens": 84,
        "replyCacheSavings": 0.001686,
    },
    "sessions": [
        {
            "sessionId": "sess_mww08c64_246ayhqgiu",
            "cacheReadTokens": 1024,
            "cacheWriteTokens": 0,
            "cacheSavings": 0.000968,
            "savedInputTokens": 0,
            "savedOutputTokens": 0,
            "replyCacheSavings": 0.0,
        },
        {
            "sessionId": "sess_mww08d1f_8kz2m5c3rt",
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "cacheSavings": 0.0,
            "savedInputTokens": 1186,
            "savedOutputTokens": 84,
            "replyCacheSavings": 0.001686,
        },
    ],
}

WORKSPACE = {"path": "src", "entries": [{"path": "src/hello.py", "kind": "file", "size": 11}]}
WORKSPACE_FILE = {"path": "src/hello.py", "content": "print(6*7)\n", "truncated": False}


def _error(code: str, message: str, **more: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **more}}


# Error answers, by status (real ones; a route's own codes are listed in its description).
ERRORS: dict[int, list[dict[str, Any]]] = {
    400: [_error("bad_request", "body.scopes: Input should be a valid list")],
    401: [_error("unauthorized", "missing API key: send 'Authorization: Bearer <API key>'")],
    403: [_error("forbidden", "this route needs an API key with the admin scope")],
    404: [_error("not_found", "API key not found: abcdefghijkl")],
    409: [
        _error(
            "version_exists", "resource://prompts/persona@1 is published already (versions are immutable)"
        ),
        _error(
            "resource_in_use",
            "resource://prompts/persona: 1 dependent(s) still need it; delete or re-publish them (or move "
            "the tags) first",
            dependents=["tag stable"],
        ),
    ],
    413: [_error("payload_too_large", "request body exceeds the limit of 1048576 bytes")],
    429: [
        _error(
            "rate_limited",
            "rate limit of 60 requests per minute reached for this API key; retry after 2026-01-15T12:01:00Z",
            limit=60,
            resetAt=1768478460000,
        )
    ],
}
