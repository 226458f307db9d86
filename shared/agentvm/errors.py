"""The one error tree of AgentVM. Hosts map these to wire errors by type, never by message.

    AgentVMError                    code
    ├── BadRequest                  bad_request       malformed frame, missing or mistyped field
    │   ├── UnknownRequest          unknown_request   a request type the protocol does not have
    │   ├── FrameTooLarge           frame_too_large   a frame over the configured size limit
    │   └── InvalidUsageQuery       invalid_usage_query  a usage report's query (observability.usage):
    │       ├── InvalidPeriod       invalid_period    not hour, day, month or range
    │       ├── InvalidGrouping     invalid_grouping  unknown, repeated, or not kept at that period
    │       ├── InvalidRange        invalid_range     unreadable, empty or misaligned from/to/month
    │       └── RangeTooLarge       range_too_large   too long for one answer
    │   ├── InvalidImport           invalid_import    a session export that cannot be imported; carries line
    │   │   └── ResourceUnavailable resource_unavailable  it names a resource the importer cannot read
    │   ├── InvalidQuery            invalid_query     search syntax this server does not support
    │   ├── InvalidDocument         invalid_document  an uploaded file that cannot be read (corrupt)
    │   │   ├── UnsupportedDocumentType  unsupported_document_type  not PDF, .docx, HTML, Markdown or text
    │   │   ├── EncryptedDocument   encrypted_document  a password-protected PDF
    │   │   ├── NoTextLayer         no_text_layer     a scanned PDF (images of pages, no text to index)
    │   │   └── DocumentTooLarge    document_too_large  over the per-file or per-resource limit
    │   └── ExportTooLarge          export_too_large  a session too large to export in one answer
    ├── Unauthorized                unauthorized      no or invalid credentials
    ├── Forbidden                   forbidden         valid credentials, scope does not allow it
    ├── NotFound                    not_found         unknown id, or an id of another tenant
    │   └── MessageNotFound         message_not_found no such message in the session (fork)
    ├── Conflict                    conflict          the request conflicts with the current state
    │   ├── SessionBusy             session_busy      a turn is running and the policy is `reject`
    │   ├── KeyLimitReached         conflict          the tenant's active API keys are at its cap (limit)
    │   └── ImportInProgress        import_in_progress  the same export is being imported right now
    ├── QuotaExceeded               quota_exceeded    a token budget was reached; carries limit, reset_at
    │   └── RateLimited             rate_limited      a key's request rate limit was reached
    ├── ProviderError               provider_error    the LLM provider failed
    │   ├── ProviderRateLimited     rate_limited      429; carries retry_after (retryable)
    │   ├── ProviderUnavailable     provider_unavailable  5xx, overloaded, timeout, cut stream (retryable)
    │   └── ProviderRejected        provider_rejected bad key, bad request (not retryable)
    ├── TurnStopped                 turn_stopped      a turn was ended by a limit, not by the model
    │   ├── StepLimitReached        max_steps         the model kept calling tools past maxSteps
    │   └── TurnDeadlineExceeded    turn_timeout      the turn ran past its deadline
    ├── StorageUnavailable          storage_unavailable  storage could not be written (503)
    │   └── QueryTimedOut           query_timeout     a Logs Insights query did not finish in time
    └── ConnectionGone              connection_gone   a WebSocket connection no longer exists

    BadRequest also has: invalid_level, invalid_cursor, invalid_time_range, unsupported_format
    (/v1/logs and /v1/metrics), and the resource centre's and config centre's codes.

Messages are written for the client: they never contain secrets, stack traces or provider keys.
"""

from __future__ import annotations


class AgentVMError(Exception):
    """Base of every error AgentVM raises on purpose."""

    code = "internal_error"

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)
        self.message = message or (self.__class__.__doc__ or self.code).strip()
        self.details = details

    def wire_fields(self) -> dict[str, object]:
        """Extra fields for the client (next to ``code`` and the message); never secrets."""
        return {}


class BadRequest(AgentVMError):
    """The request is malformed."""

    code = "bad_request"


class UnknownRequest(BadRequest):
    """The request type is not part of the protocol."""

    code = "unknown_request"


class FrameTooLarge(BadRequest):
    """The frame exceeds the size limit."""

    code = "frame_too_large"


class Unauthorized(AgentVMError):
    """Authentication is required."""

    code = "unauthorized"


class Forbidden(AgentVMError):
    """The credentials do not allow this."""

    code = "forbidden"


class NotFound(AgentVMError):
    """The object does not exist."""

    code = "not_found"


class Conflict(AgentVMError):
    """The request conflicts with the current state."""

    code = "conflict"


class SessionBusy(Conflict):
    """A turn is already running in this session."""

    code = "session_busy"


class KeyLimitReached(Conflict):
    """The tenant has as many active API keys as it may (``limit``): revoke one first."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit

    def wire_fields(self) -> dict[str, object]:
        return {"limit": self.limit}


class MemoryFull(Conflict):
    """A memory scope holds as many items (``what`` "items") or bytes (``what`` "bytes") as it may
    (``limit``; ``used`` now): forget something first (docs/memory.md)."""

    code = "memory_full"

    def __init__(self, message: str, *, limit: int, used: int, what: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.used = used
        self.what = what

    def wire_fields(self) -> dict[str, object]:
        return {"limit": self.limit, "used": self.used}


class AlreadyAnswered(Conflict):
    """A tool call a turn waited on was approved, denied, answered, timed out or cancelled already."""

    code = "already_answered"


class InvalidResource(BadRequest):
    """A resource, its name, version, tag, kind or spec is not valid."""

    code = "invalid_resource"


class InvalidUri(InvalidResource):
    """Not a resource URI (resource://<kind>s/<name>[@<version>|@latest|@<tag>])."""

    code = "invalid_uri"


class InvalidLocator(InvalidResource):
    """Not a ResourceX locator this registry can map (``agentvm.resources.locator``)."""

    code = "invalid_locator"


class UnsupportedUpload(BadRequest):
    """A registry link by a folder on the server's disk (publish by upload instead)."""

    code = "folder_path_unsupported"


class MissingDependency(BadRequest):
    """A resource refers to one that does not exist."""

    code = "missing_dependency"


class DependencyCycle(BadRequest):
    """A resource would depend on itself."""

    code = "dependency_cycle"


class VersionExists(Conflict):
    """Versions are immutable: this one is published already."""

    code = "version_exists"


class ResourceInUse(Conflict):
    """Other resources depend on this version (or a tag points at it)."""

    code = "resource_in_use"

    def __init__(self, message: str, *, dependents: list[str]) -> None:
        super().__init__(message)
        self.dependents = dependents

    def wire_fields(self) -> dict[str, object]:
        return {"dependents": self.dependents}


class InvalidConfig(BadRequest):
    """A setting of the config centre is unknown, or its value is not valid (``key`` names it)."""

    code = "invalid_config"

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key

    def wire_fields(self) -> dict[str, object]:
        return {"key": self.key}


class InvalidUsageQuery(BadRequest):
    """A usage report's query is not valid (``observability.usage``)."""

    code = "invalid_usage_query"


class InvalidPeriod(InvalidUsageQuery):
    """The period is not hour, day, month or range."""

    code = "invalid_period"


class InvalidGrouping(InvalidUsageQuery):
    """A grouping is unknown, named twice, or not kept at the asked period."""

    code = "invalid_grouping"


class InvalidRange(InvalidUsageQuery):
    """The range (from, to, month) is unreadable, empty or not on the periods' boundaries."""

    code = "invalid_range"


class RangeTooLarge(InvalidUsageQuery):
    """The range is too long for one answer."""

    code = "range_too_large"


class InvalidImport(BadRequest):
    """A session export that cannot be imported (``line``: the 1-based line at fault, if one is)."""

    code = "invalid_import"

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line

    def wire_fields(self) -> dict[str, object]:
        return {} if self.line is None else {"line": self.line}


class ResourceUnavailable(InvalidImport):
    """The export names a resource the importing tenant cannot read."""

    code = "resource_unavailable"


class InvalidQuery(BadRequest):
    """Search syntax this server does not support (plain words, "quoted phrases" and prefix*)."""

    code = "invalid_query"


class InvalidDocument(BadRequest):
    """The uploaded file cannot be read as the type it claims (corrupt or truncated)."""

    code = "invalid_document"


class UnsupportedDocumentType(InvalidDocument):
    """The uploaded file is not a type knowledge ingests (PDF, .docx, HTML, Markdown, text)."""

    code = "unsupported_document_type"


class EncryptedDocument(InvalidDocument):
    """The PDF is encrypted: upload it without its password protection."""

    code = "encrypted_document"


class NoTextLayer(InvalidDocument):
    """The PDF has no text layer (a scan): run OCR on it first, then upload the result."""

    code = "no_text_layer"


class DocumentTooLarge(InvalidDocument):
    """The file is over the per-file limit, or would take the resource over its limits."""

    code = "document_too_large"


class ExportTooLarge(BadRequest):
    """The session is too large to export in one answer."""

    code = "export_too_large"


class ImportInProgress(Conflict):
    """An import with this export id is being written right now; retry in a few seconds."""

    code = "import_in_progress"


class MessageNotFound(NotFound):
    """The message is not part of this session."""

    code = "message_not_found"


class QuotaExceeded(AgentVMError):
    """A token budget was reached."""

    code = "quota_exceeded"

    def __init__(self, message: str = "", *, limit: int, reset_at_ms: int, **details: object) -> None:
        super().__init__(message, **details)
        self.limit = limit
        self.reset_at_ms = reset_at_ms  # epoch ms when the window that ran out starts over

    def wire_fields(self) -> dict[str, object]:
        return {"limit": self.limit, "resetAt": self.reset_at_ms}


class RateLimited(QuotaExceeded):
    """Too many requests for this API key; retry after the reset time."""

    code = "rate_limited"


class ProviderError(AgentVMError):
    """The model provider failed."""

    code = "provider_error"
    retryable = False


class ProviderRateLimited(ProviderError):
    """The model provider is rate limiting requests."""

    code = "rate_limited"
    retryable = True

    def __init__(self, message: str = "", retry_after: float | None = None, **details: object) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """The model provider is unavailable or overloaded."""

    code = "provider_unavailable"
    retryable = True

    def __init__(self, message: str = "", retry_after: float | None = None, **details: object) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The model provider rejected the request."""

    code = "provider_rejected"


class TurnStopped(AgentVMError):
    """The turn was stopped by a limit."""

    code = "turn_stopped"


class StepLimitReached(TurnStopped):
    """The model kept calling tools until the image's maxSteps."""

    code = "max_steps"


class TurnDeadlineExceeded(TurnStopped):
    """The turn ran past its deadline."""

    code = "turn_timeout"


class StorageUnavailable(AgentVMError):
    """Storage could not be written (the disk is full, or a write failed). Nothing half-written
    was kept: retry the request once space returns."""

    code = "storage_unavailable"


class StorageQuotaExceeded(AgentVMError):
    """The tenant's storage quota is used up."""

    code = "storage_quota_exceeded"

    def __init__(self, message: str = "", *, limit: int, used: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.used = used

    def wire_fields(self) -> dict[str, object]:
        return {"limit": self.limit, "used": self.used}


class InvalidLevel(BadRequest):
    """Not a log level (debug, info, warning, error, critical)."""

    code = "invalid_level"


class InvalidCursor(BadRequest):
    """Not a cursor this route gave (pass the previous page's ``next``)."""

    code = "invalid_cursor"


class InvalidTimeRange(BadRequest):
    """Not a time, ``since`` not before ``until``, or a range too long."""

    code = "invalid_time_range"


class UnsupportedFormat(BadRequest):
    """A format (or a parameter) this host cannot answer in."""

    code = "unsupported_format"


class QueryTimedOut(StorageUnavailable):
    """A log or metrics query (CloudWatch Logs Insights) did not finish in time: narrow it."""

    code = "query_timeout"


class ConnectionGone(AgentVMError):
    """The WebSocket connection no longer exists."""

    code = "connection_gone"


__all__ = [
    "DocumentTooLarge",
    "EncryptedDocument",
    "InvalidDocument",
    "NoTextLayer",
    "UnsupportedDocumentType",
    "ExportTooLarge",
    "ImportInProgress",
    "KeyLimitReached",
    "MemoryFull",
    "InvalidImport",
    "InvalidQuery",
    "MessageNotFound",
    "ResourceUnavailable",
    "DependencyCycle",
    "InvalidConfig",
    "InvalidGrouping",
    "InvalidPeriod",
    "InvalidRange",
    "InvalidUsageQuery",
    "RangeTooLarge",
    "InvalidLocator",
    "InvalidResource",
    "InvalidUri",
    "MissingDependency",
    "UnsupportedUpload",
    "ResourceInUse",
    "VersionExists",
    "AlreadyAnswered",
    "AgentVMError",
    "BadRequest",
    "Conflict",
    "ConnectionGone",
    "InvalidCursor",
    "InvalidLevel",
    "InvalidTimeRange",
    "QueryTimedOut",
    "UnsupportedFormat",
    "Forbidden",
    "FrameTooLarge",
    "NotFound",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderRejected",
    "ProviderUnavailable",
    "QuotaExceeded",
    "RateLimited",
    "SessionBusy",
    "StepLimitReached",
    "TurnDeadlineExceeded",
    "TurnStopped",
    "Unauthorized",
    "UnknownRequest",
]
