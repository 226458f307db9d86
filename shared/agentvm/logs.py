"""Structured logging: one JSON object per line, with secrets masked as a last line of defence.

Code never logs secrets on purpose; ``SecretMask`` additionally replaces any registered secret
value (provider keys, the auth secret, ``AVM_ADMIN_KEY``) that slips into a message, an ``extra``
field or a traceback, and anything shaped like an AgentVM API key (``avm_<keyId>_<secret>``: the
key id stays, the secret goes), a ``token=`` URL parameter (uvicorn logs WebSocket paths with
their query string) or the credentials of an ``Authorization`` header (uvicorn's DEBUG header dumps).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

# An API key anywhere in a line (keeps the key id, which is not secret, for debugging), and the
# value of a `token` query parameter (a WebSocket URL in a server log line).
_PATTERNS = (
    (re.compile(r"(avm_[0-9a-z]{12}_)[A-Za-z0-9_-]+"), r"\1***"),
    (re.compile(r"([?&]token=)[^&\s\"']+"), r"\1***"),
    (re.compile(r"((?i:authorization)[\"']?:\s*[\"']?[A-Za-z]+ )[^\s\"']+"), r"\1***"),  # header dumps
)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class SecretMask(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 6]

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._mask(record.getMessage())
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                record.__dict__[key] = self._mask(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._mask(record.exc_text)
        return True

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


def configure_logging(level: str = "INFO", *, secrets: list[str] | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(SecretMask(secrets or []))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "httpx", "httpcore", "botocore", "anthropic", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


__all__ = ["JsonFormatter", "SecretMask", "configure_logging"]
