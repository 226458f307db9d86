"""The schemas of the routes' answers, for ``/openapi.json`` only: ``ok(status, "<name>", ...)``
(``api/openapi.py``) names a model of this module, and the module is imported when the document
is built, never on a request's path (so these classes cost a Lambda's cold start nothing).

They document, they do not filter: routes answer ``response_model=None`` and build their answers
themselves; ``tests/unit/api/test_openapi_truth.py`` checks real answers against these schemas.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from agentvm.configcentre.centre import Source
from agentvm.records import ConfigChange, UsageRecord


# -- api/keys.py, api/budgets.py, api/workspaces.py: keys, budgets, usage, workspaces ----------------
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
    dailyTokens: int | None = Field(description="null: no limit")
    monthlyTokens: int | None = Field(description="null: no limit")
    usage: BudgetUsage


_SAVINGS = (
    "what prompt caching saved, USD at the charged prices: (cache reads x (input - cacheRead) - cache"
    " writes x (cacheWrite - input)) per million, x the markup (null: the model has no price)"
)

_REPLY_SAVINGS = (
    "what the reply cache saved, USD at the charged prices: (savedInputTokens x input +"
    " savedOutputTokens x output) per million at the model's prices, x the markup (null: the model"
    " has no price)"
)
_SAVED_INPUT = "the input tokens of the model calls that wrote the replies reply-cache hits served"
_SAVED_OUTPUT = "the same, output tokens"


class UsageTotals(BaseModel):
    turns: int = Field(
        description="records of kind turn or reply_cache (a turn's first call or cached reply)"
    )
    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadTokens: int = Field(description="of inputTokens, read from the provider's prompt cache")
    cacheWriteTokens: int = Field(description="of inputTokens, written to the provider's prompt cache")
    cacheSavings: float = Field(description=_SAVINGS.replace(" (null: the model has no price)", ""))
    savedInputTokens: int = Field(description=_SAVED_INPUT + " (not in inputTokens)")
    savedOutputTokens: int = Field(description=_SAVED_OUTPUT + " (not in outputTokens)")
    replyCacheSavings: float = Field(
        description=_REPLY_SAVINGS.replace(" (null: the model has no price)", "")
    )


class PricedUsageRecord(UsageRecord):
    cacheSavings: float | None = Field(description=_SAVINGS)
    replyCacheSavings: float | None = Field(description=_REPLY_SAVINGS)


class SessionCacheSavings(BaseModel):
    sessionId: str
    cacheReadTokens: int
    cacheWriteTokens: int
    cacheSavings: float = Field(description=_SAVINGS.replace(" (null: the model has no price)", ""))
    savedInputTokens: int = Field(description=_SAVED_INPUT)
    savedOutputTokens: int = Field(description=_SAVED_OUTPUT)
    replyCacheSavings: float = Field(
        description=_REPLY_SAVINGS.replace(" (null: the model has no price)", "")
    )


class Usage(BaseModel):
    records: list[PricedUsageRecord] = Field(description="one per model call (a turn, a step, ...)")
    totals: UsageTotals
    sessions: list[SessionCacheSavings] = Field(description="per session, in order of first record")


class WorkspaceEntry(BaseModel):
    path: str = Field(description="relative to the workspace root")
    kind: Literal["file", "dir", "link", "other"]
    size: int


class WorkspaceListing(BaseModel):
    path: str
    entries: list[WorkspaceEntry]


class WorkspaceFile(BaseModel):
    path: str
    content: str = Field(description="UTF-8 text (bytes that are not are replaced)")
    truncated: bool = Field(description="true: the file is over 1 MiB and this is its first MiB")


# -- api/resources.py -------------------------------------------------------------------------------
class ResourceVersion(BaseModel):
    """One immutable version of a resource, with its spec."""

    uri: str = Field(description="resource://<kind>s/<name>@<version>")
    kind: str
    name: str
    version: str
    description: str | None
    spec: dict[str, Any] = Field(description="what the kind holds (docs/resources.md)")
    dependencies: list[str] = Field(description="the resource URIs it references, as written")
    digest: str = Field(description="sha256 of the spec")
    createdAt: int = Field(description="epoch milliseconds")
    chunks: int | SkipJsonSchema[None] = Field(default=None, description="knowledge: the chunks indexed")


class ResourceHead(BaseModel):
    """A resource: its latest version, its tags, how many versions it has."""

    uri: str
    kind: str
    name: str
    latest: str
    versions: int
    tags: dict[str, str] = Field(description="tag -> version")
    description: str | None = Field(description="the latest version's")
    updatedAt: int = Field(description="epoch milliseconds")
    platform: bool = Field(description="true: the platform tenant's, readable by every tenant")
    type: str | SkipJsonSchema[None] = Field(default=None, description="files: text, json, binary or skill")


class VersionSummary(BaseModel):
    version: str
    description: str | None
    digest: str
    createdAt: int


class OneVersion(BaseModel):
    resource: ResourceVersion


class OneHead(BaseModel):
    resource: ResourceHead


class ResourceWithVersions(BaseModel):
    resource: ResourceHead
    versions: list[VersionSummary] = Field(description="oldest first")


class ResourcePage(BaseModel):
    resources: list[ResourceHead]
    next: int | None = Field(description="the cursor of the next page; null on the last")


class ResolvedResource(BaseModel):
    resource: ResourceVersion
    dependencies: dict[str, ResourceVersion] = Field(
        description="each reference of the closure, as written -> the version it resolves to now"
    )


class Rendered(BaseModel):
    uri: str = Field(description="the exact version rendered")
    text: str


class SearchHit(BaseModel):
    """A passage found on a host without a knowledge index (``mode``: ``bm25``)."""

    document: int = Field(description="index in the version's documents")
    documentId: str | None
    title: str | None
    chunk: int = Field(description="index in the version's chunks")
    score: float = Field(description="BM25")
    text: str


class SearchPassage(BaseModel):
    """A passage found in the knowledge index (``mode``: ``hybrid`` or ``words``)."""

    documentId: str = Field(description="the document's id (an uploaded file's name)")
    title: str
    headingPath: str = Field(description="the headings above it: Billing > Refunds")
    location: str = Field(description="p.<n> in a PDF, else its section's heading")
    chunk: int = Field(description="its place among its document's chunks")
    score: float = Field(description="reciprocal rank fusion (hybrid), else BM25")
    citation: str = Field(description="to show next to an answer: [handbook.pdf p.4 — Billing > Refunds]")
    text: str


class SearchHits(BaseModel):
    uri: str = Field(description="the exact version searched")
    mode: Literal["hybrid", "words", "bm25"] = Field(description="how the passages were found")
    hits: list[SearchPassage | SearchHit] = Field(description="best first")


class KnowledgeDocument(BaseModel):
    id: str = Field(description="the file name it was uploaded as")
    title: str
    chunks: int
    bytes: int = Field(description="of extracted text")


class UploadedDocument(KnowledgeDocument):
    type: Literal["pdf", "docx", "html", "markdown", "text"]
    replaced: bool = Field(description="a document of the same name was in the draft")


class DraftSize(BaseModel):
    documents: int
    bytes: int


class Uploaded(BaseModel):
    document: UploadedDocument
    draft: DraftSize = Field(description="the draft the next version is published from")


class KnowledgeDocuments(BaseModel):
    resource: str
    version: str = Field(description="draft, or a published version")
    documents: list[KnowledgeDocument]


class DeletedDocument(BaseModel):
    deleted: str = Field(description="the document's id")


class DeletedVersions(BaseModel):
    deleted: list[str] = Field(description="the versions deleted")


ResourceOrVersion = ResourceWithVersions | OneVersion


# -- api/registry.py --------------------------------------------------------------------------------
class _Located(BaseModel):
    """Where a resource is: the parts of its locator."""

    domain: str = Field(description="localhost for this registry's own names")
    path: str | SkipJsonSchema[None] = Field(default=None, description="absent when the name has none")
    name: str
    type: str
    version: str


class RegistryManifest(_Located):
    digest: str = Field(description="sha256:<hex> of the stored spec")
    description: str | SkipJsonSchema[None] = None


class RegistryResource(BaseModel):
    locator: str
    manifest: RegistryManifest
    schema_: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None,
        alias="schema",
        description="a prompt's arguments as JSON Schema; absent for other types",
    )


class RegistryResolved(RegistryResource):
    content: Any = Field(description="a prompt's text, a file's content, or the spec of one of our kinds")


class RegistryPublished(RegistryManifest):
    id: str = Field(description="the resource URI (Deepractice's id)")
    uri: str
    locator: str
    tags: list[str]
    createdAt: int = Field(description="epoch milliseconds")
    updatedAt: int = Field(description="epoch milliseconds (versions are immutable: createdAt)")


class SearchRow(_Located):
    locator: str


class RegistrySearch(BaseModel):
    results: list[SearchRow]
    total: int = Field(description="every match, not only this page")
    limit: int
    offset: int


class RegistryType(BaseModel):
    name: str
    aliases: list[str]
    description: str


class RegistryTypes(BaseModel):
    types: list[RegistryType]


class RegistryExists(BaseModel):
    exists: bool


class RegistryDeleted(BaseModel):
    deleted: bool = Field(description="always true (nothing to delete is a 404)")


# -- api/images.py ----------------------------------------------------------------------------------
class ImageBuild(BaseModel):
    """What a built image is pinned to (docs/resources.md)."""

    agent: str = Field(description="the definition as written")
    resolved: str = Field(description="the exact agent version it resolved to")
    pins: list[str] = Field(description="every exact version the image uses")
    builtAt: int = Field(description="epoch milliseconds")
    builtBy: str | None = Field(description="the API key id")
    history: list[dict[str, Any]] = Field(description="the builds, oldest first (the last 20)")


class ImageListItem(BaseModel):
    """The protocol's ImageListItem (docs/protocol.md); fields left unset are absent."""

    imageId: str
    containerId: str
    sessionId: str
    name: str
    createdAt: int
    updatedAt: int
    online: bool
    description: str | SkipJsonSchema[None] = None
    systemPrompt: str | SkipJsonSchema[None] = None
    model: str | SkipJsonSchema[None] = None
    agentId: str | SkipJsonSchema[None] = Field(default=None, description="while it is running")
    build: ImageBuild | SkipJsonSchema[None] = None


class Rebuilt(BaseModel):
    record: ImageListItem


# -- api/configcentre.py ----------------------------------------------------------------------------
class ConfigSetting(BaseModel):
    """One setting's effective value for the caller's tenant (secrets masked) and where it came from."""

    key: str
    value: Any = Field(description="null: unset; a secret that is set: ********")
    source: Source = Field(description="default < file < env < server < tenant")
    secret: bool = Field(description="write-only: never shown")
    tenantSettable: bool = Field(description="a tenant admin may set it for the tenant")
    env: str | None = Field(description="the environment variable that sets it")
    description: str


class ConfigSettings(BaseModel):
    settings: dict[str, ConfigSetting] = Field(description="by key (a few shown)")


class ConfigChanges(BaseModel):
    changes: list[ConfigChange] = Field(description="newest first")


# -- api/http_turns.py ------------------------------------------------------------------------------
class TurnAnswer(BaseModel):
    """A turn sent over HTTP, as JSON (with ``Accept: text/event-stream`` the answer is its events)."""

    requestId: str | None = Field(description="the Idempotency-Key (or requestId) given, if any")
    sessionId: str
    turnId: str
    created: bool = Field(description="false: a retry of a request already accepted; nothing was sent again")
    status: Literal["queued", "running", "suspended", "completed", "interrupted", "failed"]
    reply: str = Field(description="the text of the turn's last assistant message (partial if it runs)")
    error: str | None = Field(description="a failed turn's error")
    errorCode: str | None = Field(description="a failed turn's error code")
    waiting: list[str] = Field(description="a suspended turn's waits, one line each")
    lastEventId: int | None = Field(
        default=None, description="202: GET the events route with this Last-Event-ID to stream the turn"
    )


class Interrupted(BaseModel):
    interrupted: bool = Field(description="false: no turn of the session was live")


class NewSessionAnswer(BaseModel):
    containerId: str
    imageId: str
    sessionId: str = Field(description="send turns on it: POST /v1/sessions/{sessionId}/turns")
    name: str
