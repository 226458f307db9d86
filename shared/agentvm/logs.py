"""Structured logging: one JSON object per line, with secrets masked as a last line of defence.

Code never logs secrets on purpose; ``SecretMask`` additionally replaces any registered secret
value (provider keys, the auth secret, ``AVM_ADMIN_KEY``) that slips into a message, an ``extra``
field or a traceback, and anything shaped like an AgentVM API key (``avm_<keyId>_<secret>``: the
key id stays, the secret goes), a ``token=`` URL parameter (uvicorn logs WebSocket paths with
their query string) or the credentials of an ``Authorization`` header (uvicorn's DEBUG header dumps),
also when a log line cut the value short (the websockets frame log keeps ~75 characters of a frame).

Lines about refused client input (bad frames, refused upgrades, 401, 413) go through
``log_refusal``: one short line each, at most ``AVM_LOG_REFUSALS_PER_MINUTE`` per source (a client
address) per minute, so a hostile client cannot flood the log; every line's message is cut at
``MAX_MSG_CHARS``.

Whose work a line is about (``bind``/``unbind``, the ``LogContext`` filter): the tenant,
container, session and turn ids the core binds where it learns them, copied onto each record of
AgentVM's own loggers; ``/v1/logs`` filters on exactly these fields (a line without ``tenant_id``
is platform-internal, shown to platform admins only). ``bind`` returns a token and ``unbind(token)``
restores what was bound before, so one request's or turn's ids never leak onto the next one a task
handles.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections import OrderedDict
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

# An API key anywhere in a line (keeps the key id, which is not secret, for debugging), and the
# value of a `token` query parameter (a WebSocket URL in a server log line). Log lines may cut a
# value short with "..." (the websockets frame log keeps a frame's first 48 and last 24
# characters), so what follows a key id is masked across a cut, and so is what follows the cut of
# a frame.
_PATTERNS = (
    (re.compile(r"(avm_[0-9a-z]{12}_)(?:[A-Za-z0-9_-]|\.\.\.)+"), r"\1***"),
    (re.compile(r"(avm_[0-9a-z]{0,12})\.\.\.[A-Za-z0-9_-]*"), r"\1***"),  # cut inside the key id
    (re.compile(r"([?&]token=)[^&\s\"']+"), r"\1***"),
    # header dumps, and frames cut after the header's name (the scheme may be cut too)
    (re.compile(r"((?i:authorization)[\"']?:\s*[\"']?(?:[A-Za-z]+ )?)[^\s\"']+"), r"\1***"),
    # a frame log line ("< TEXT '<head>...<tail>' [n bytes]"): the tail may start with the end of a
    # token whose beginning was cut out with the middle
    (re.compile(r"^([<>] (?:TEXT|BINARY|CONT) [^\n]{0,80}?\.\.\.)[A-Za-z0-9_-]+"), r"\1***"),
)
MAX_MSG_CHARS = 4000  # a log line's message (and each text field) is cut here, with a marker
MAX_EXC_CHARS = 16_000  # a traceback keeps its end: the frame that raised and the error

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
            "msg": _cut(record.getMessage(), MAX_MSG_CHARS),
        }
        out.update(
            {
                k: _cut(v, MAX_MSG_CHARS) if isinstance(v, str) else v
                for k, v in record.__dict__.items()
                if k not in _STANDARD
            }
        )
        if record.exc_info:
            exc = record.exc_text or self.formatException(record.exc_info)
            out["exc"] = (
                exc if len(exc) <= MAX_EXC_CHARS else f"[cut: {len(exc)} chars] ...{exc[-MAX_EXC_CHARS:]}"
            )
        return json.dumps(out, default=str)


class TextFormatter(JsonFormatter):
    """One readable line per record, for a person at a terminal: ``12:00:01 INFO  logger: msg
    key=value ...`` (the same fields as the JSON line; ``AVM_LOG_FORMAT``)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = json.loads(super().format(record))
        when = time.strftime("%H:%M:%S", time.localtime(fields.pop("ts")))
        level, name, msg = fields.pop("level"), fields.pop("logger"), fields.pop("msg")
        exc = fields.pop("exc", None)
        extra = " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in fields.items())
        line = f"{when} {level:<7} {name}: {msg}" + (f"  {extra}" if extra else "")
        return line + (f"\n{exc}" if exc else "")


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a marker: no single line is unbounded."""
    return text if len(text) <= limit else f"{text[:limit]}... [cut: {len(text)} chars]"


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


_PATTERN_MASK = SecretMask([])  # the patterns alone (no registered secret values)


def mask_text(text: str) -> str:
    """``text`` with anything shaped like an API key, a ``token=`` value or ``Authorization``
    credentials masked (what ``SecretMask`` does, without the registered secret values)."""
    return _PATTERN_MASK._mask(text)


class RefusalLimit:
    """At most ``per_minute`` lines per source in a window of ``window_s`` from its first line; a
    window that ends with lines suppressed is reported by one line saying how many (logged with the
    next refusal line of any source). Memory is bounded: at most ``max_sources`` windows are open,
    sources beyond them share one; windows are kept in the order they opened, so the ended ones are
    always at the front."""

    OVERFLOW = "(other sources)"

    def __init__(
        self,
        per_minute: int = 10,
        *,
        max_sources: int = 10_000,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = per_minute  # 0 = no limit
        self.max_sources = max_sources
        self.window_s = window_s
        self._clock = clock
        self._windows: OrderedDict[str, list[float]] = OrderedDict()  # source -> [opened, lines, suppressed]
        self._lock = threading.Lock()  # log calls may come from any thread

    def admit(self, source: str) -> bool:
        """Whether a line from ``source`` may be logged now."""
        if self.per_minute <= 0:
            return True
        now = self._clock()
        with self._lock:
            ended = []
            while self._windows:
                first, (opened, _lines, suppressed) = next(iter(self._windows.items()))
                if opened + self.window_s > now:
                    break
                del self._windows[first]
                if suppressed:
                    ended.append((first, int(suppressed)))
            if source not in self._windows and len(self._windows) >= self.max_sources:
                source = self.OVERFLOW
            window = self._windows.setdefault(source, [now, 0, 0])
            window[1] += 1
            allowed = window[1] <= self.per_minute
            if not allowed:
                window[2] += 1
        for ended_source, count in ended:  # logged outside the lock
            _log.warning(
                f"{count} refusal lines from this source suppressed (over {self.per_minute} a minute)",
                extra={"source": ended_source, "suppressed": count},
            )
        return allowed


_log = logging.getLogger("agentvm.logs")
refusals = RefusalLimit()  # the process's limit; configure_logging sets its rate
# The client address of the connection being handled, for refusal lines logged where only a
# connection id is known (the gateway); the local host sets it for each WebSocket.
client_source: ContextVar[str | None] = ContextVar("client_source", default=None)
# Set by the local host when it refused a WebSocket upgrade itself (and logged it): uvicorn's own
# lines about that denial are dropped (UvicornClientErrors).
upgrade_refused: ContextVar[bool] = ContextVar("upgrade_refused", default=False)
_FIELD_CHARS = 300  # a refusal line's text fields (a reason may quote what the client sent)


def log_refusal(
    logger: logging.Logger, msg: str, *, source: str, level: int = logging.INFO, **fields: Any
) -> None:
    """One line about refused client input, no traceback, unless ``source`` is over its limit."""
    if refusals.admit(source):
        extra = {k: _cut(v, _FIELD_CHARS) if isinstance(v, str) else v for k, v in fields.items()}
        logger.log(level, msg, extra={"source": source, **extra})


# uvicorn's lines about an upgrade the app denied (the last one a spurious ERROR of its
# websockets-sansio protocol after any denial response: uvicorn PR #3138).
_DENIAL_LINES = {
    '%s - "WebSocket %s" %d',
    "connection rejected (%d %s)",
    "ASGI callable returned without completing handshake.",
}
# uvicorn's lines about client input that never reaches the app (invalid UTF-8 in a text frame is
# logged at ERROR with a traceback).
_CLIENT_MISTAKES = {
    "Invalid HTTP request received.",
    "connection rejected (%d %s)",  # a malformed upgrade request
    "Invalid UTF-8 sequence received from client.",
}


# uvicorn's (and its websockets library's) INFO lines for every WebSocket: three per connection,
# which any client can make by connecting (its HTTP access lines are off: ``uvicorn.access`` logs
# at WARNING only).
_PER_CONNECTION = {'%s - "WebSocket %s" [accepted]', "connection open", "connection closed"}


class UvicornClientErrors(logging.Filter):
    """On the ``uvicorn.error`` logger: client mistakes are one INFO line, never an ERROR or a
    traceback, and rate-limited like refusals (one source per kind: they carry no address). An
    upgrade the app refused is logged once, by the app; uvicorn's own lines about it are dropped.
    Its per-connection INFO lines are rate-limited the same way (a few a minute, then a count)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""  # (a message may be any object)
        if upgrade_refused.get() and msg in _DENIAL_LINES:
            return False
        if msg in _PER_CONNECTION:
            return refusals.admit(f"uvicorn: {msg}")
        if msg not in _CLIENT_MISTAKES:
            return True
        if not refusals.admit(f"uvicorn: {record.msg}"):
            return False
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.exc_info, record.exc_text = None, None
        record.source = "uvicorn"
        return True


_UVICORN_FILTER = UvicornClientErrors()
# The websockets protocol (in uvicorn, under "uvicorn.error") logs every frame and header at DEBUG;
# a frame cut to ~75 characters can keep the end of a token. Kept out unless AVM_LOG_WS_FRAMES.
_FRAME_LOGGERS = ("uvicorn.error", "websockets")


# --- whose work a line is about

FIELDS = ("tenant_id", "container_id", "session_id", "turn_id")
_ids: ContextVar[dict[str, str] | None] = ContextVar("log_ids", default=None)


def bind(**ids: str | None) -> Any:
    """Add these ids (``tenant_id=...``) to what this task's log lines carry; None leaves an id
    as it was. Returns the token for ``unbind``."""
    current = dict(_ids.get() or {})
    current.update({k: v for k, v in ids.items() if v is not None and k in FIELDS})
    return _ids.set(current)


def unbind(token: Any) -> None:
    _ids.reset(token)


def bound() -> dict[str, str]:
    """The ids this task's log lines carry now."""
    return dict(_ids.get() or {})


class LogContext(logging.Filter):
    """Copies the bound ids onto each record of AgentVM's own loggers (``agentvm.*``; fields a
    caller passed in ``extra`` win). Other libraries' lines stay platform-internal, even when
    logged while a tenant's work runs: what they say is the platform's business."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get()
        if ids and (record.name == "agentvm" or record.name.startswith("agentvm.")):
            for key, value in ids.items():
                if key not in record.__dict__:
                    record.__dict__[key] = value
        return True


def configure_logging(
    level: str = "INFO",
    *,
    secrets: list[str] | None = None,
    refusals_per_minute: int = 10,
    ws_frames: bool = False,
    log_format: str = "auto",
) -> None:
    """The root logger's one handler, on stderr: JSON lines (``log_format`` "json"; "auto" when
    stderr is not a terminal: files, pipes, journald, containers), or readable text lines ("text";
    "auto" at a terminal). Both carry the same fields, masked."""
    global _mask
    _mask = SecretMask(secrets or [])
    handler = logging.StreamHandler(sys.stderr)
    text = log_format == "text" or (log_format == "auto" and sys.stderr.isatty())
    handler.setFormatter(TextFormatter() if text else JsonFormatter())
    handler.addFilter(LogContext())  # tenant, container, session and turn ids
    handler.addFilter(_mask)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "httpx", "httpcore", "botocore", "anthropic", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in _FRAME_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if ws_frames else max(root.level, logging.INFO))
    logging.getLogger("uvicorn.error").addFilter(_UVICORN_FILTER)  # once: addFilter skips duplicates
    refusals.per_minute = refusals_per_minute


_mask: SecretMask | None = None  # configure_logging's, with the registered secrets


def add_log_handler(handler: logging.Handler) -> None:
    """One more handler on the root logger, formatted, masked and tagged as configure_logging's
    own (the local host's ``/v1/logs`` store)."""
    handler.setFormatter(JsonFormatter())
    handler.addFilter(LogContext())
    handler.addFilter(_mask or SecretMask([]))
    logging.getLogger().addHandler(handler)


__all__ = [
    "FIELDS",
    "LogContext",
    "MAX_MSG_CHARS",
    "bind",
    "bound",
    "unbind",
    "add_log_handler",
    "mask_text",
    "JsonFormatter",
    "TextFormatter",
    "RefusalLimit",
    "SecretMask",
    "UvicornClientErrors",
    "client_source",
    "configure_logging",
    "log_refusal",
    "refusals",
    "upgrade_refused",
]
