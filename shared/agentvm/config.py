"""Settings: read once, at bootstrap, from the environment (explicit values beat env).

Environment names are ``AVM_<FIELD>`` except the provider keys, which use each provider's
conventional name (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``...). Secrets are ``SecretStr``:
their repr is masked, so a logged Settings object never leaks a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ECHO_MODEL = "echo/echo-1"


class CompatProvider(BaseModel):
    """An OpenAI-compatible endpoint, registered under its own provider name."""

    base_url: str
    api_key: SecretStr | None = None


class Settings(BaseSettings):
    # hide_input_in_errors: a refused value may be a secret (a database URL with its password)
    model_config = SettingsConfigDict(
        env_prefix="AVM_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # where and how `avm serve` runs
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".agentvm")
    host: str = "127.0.0.1"
    port: int = 8080
    log_level: str = "INFO"
    # stderr's lines: "json", "text" (readable), or "auto": text at a terminal, JSON otherwise
    log_format: Literal["auto", "json", "text"] = "auto"
    # lines about refused client input (bad frames, refused upgrades, 401, 413) per source (client
    # address) per minute, then one line saying how many were suppressed; 0 = no limit (logs.py)
    log_refusals_per_minute: int = Field(default=10, ge=0)
    # several worker processes on one data dir behind one port (docs/scaling.md): `avm serve
    # --workers N` starts N processes, each with its AVM_WORKER_ID, binding the port with
    # SO_REUSEPORT; they share the SQLite store, queue and connection registry
    workers: int = Field(default=1, ge=1, le=256)
    worker_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,32}$")
    reuse_port: bool = False  # bind with SO_REUSEPORT (set for each worker)
    # the websockets frame and handshake log (DEBUG, under uvicorn.error): off even at DEBUG, since a
    # frame cut short can keep the end of a token the masks cannot recognise
    log_ws_frames: bool = False

    # models
    default_model: str | None = None  # "provider/model"; None = first configured provider, else echo
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("AVM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("AVM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("AVM_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("AVM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    bedrock_region: str | None = None  # enables provider "bedrock" (credentials from the AWS chain)
    # the region this process runs in (AWS Lambda sets AWS_REGION): Bedrock embeddings use it when
    # AVM_BEDROCK_REGION is unset, so a stack with BedrockAccess embeds without enabling chat on Bedrock
    aws_region: str | None = Field(default=None, validation_alias=AliasChoices("AWS_REGION"))
    openai_compatible: dict[str, CompatProvider] = Field(default_factory=dict)  # JSON in env
    provider_timeout_s: float = 60.0
    # embeddings for knowledge search (adapters/embeddings/choice.py): "provider/model" through the
    # providers above (openai/text-embedding-3-small, bedrock/amazon.titan-embed-text-v2:0, ...), and
    # its vectors' length (None: the model's own); None: no embeddings, search runs on words alone
    embeddings_model: str | None = Field(default=None, pattern=r"^[^/\s]+/\S+$")
    embeddings_dimensions: int | None = Field(default=None, ge=1, le=8192)
    # the provider SDKs' HTTP transport (adapters/llm/transport.py): "lean" reads streams on demand
    # with httptools (the 1,000-stream local host); "sdk" keeps the SDKs' own; "auto": lean where
    # httptools is installed (avm serve), the SDKs' own elsewhere (the Lambda layer has no httptools)
    provider_transport: Literal["auto", "lean", "sdk"] = "auto"
    # retries on 429 / 5xx / overloaded / timeouts, before any output reached the client
    provider_max_attempts: int = 4
    provider_retry_base_ms: int = 500  # exponential backoff with full jitter from here
    provider_retry_max_total_s: float = 30.0  # never wait longer than this in total
    max_output_tokens: int = 1024
    # prompt caching of turns (adapters/llm/caching.py): off here turns it off for every image
    prompt_caching: bool = True
    # the reply cache of images' common first questions (turns/reply_cache.py; images opt in): off
    # here, or for a tenant (config centre turns.replyCache), no turn reads or writes it
    reply_cache: bool = True

    # turns
    flush_ms: int = 250  # text deltas are merged into one frame per window (first one sent at once)
    flush_max_ms: int = 0  # if larger than flush_ms, the window doubles per frame up to this
    # connections that declared batched frames (?frames=batch, streaming/batching.py) get text on
    # their own cadence (streaming/batch_cadence.py): one message per window, from the first window
    # (never shorter than flush_ms) doubling up to the max. "live" (the default): a message's first
    # text at once, then its text every 250 ms, as plain clients get it...
    batch_flush_max_ms: int = Field(default=250, ge=0)
    batch_flush_ms: int = Field(default=250, ge=0)
    # ...and "economy" (?cadence=economy, an image's cadence, or streaming.cadence): every 2 s, the
    # rest with its end; fewer billed messages on AWS (docs/cost.md), choppier text
    economy_flush_max_ms: int = Field(default=2000, ge=0)
    economy_flush_ms: int = Field(default=2000, ge=0)
    # the cadence of batched connections that ask for none, on images that name none (config key
    # streaming.cadence, which a tenant may set for its own turns)
    stream_cadence: Literal["live", "economy"] = "live"
    history_window: int = 50  # messages a turn reads; older history is not re-read
    # The window's start moves in steps of this many messages (agent/window.py), so the prompt
    # prefix stays cacheable between steps: a turn reads window .. window + step - 1 messages;
    # 0 = the old window sliding by every message
    history_window_step: int = Field(default=20, ge=0)
    # Compaction (agent/compaction.py): past this estimated context (chars/4 of system prompt +
    # summary + unsummarised messages), older messages are summarised; 0 = never summarise.
    compaction_threshold_tokens: int = Field(default=8000, ge=0)
    compaction_model: str | None = None  # "provider/model" that summarises; None = the image's model
    # Sessions are named after their first turn by a (cheap) model, when opted in (turns/title.py)
    auto_title: bool = False
    title_model: str | None = None  # "provider/model" that names sessions; None = the image's model
    echo_delay_ms: int = 20  # pause between words of the echo model
    turn_deadline_s: float = Field(default=600.0, ge=0)  # a whole turn, all steps and tools; 0 = none
    # AgentVM's MCP server (api/mcp.py): how long a tools/call waits for its turn's end (the turn goes
    # on past it; the same requestId waits again), and how often it reads the turn's progress. On AWS
    # the HTTP API sets 25 s (API Gateway ends a request at 30 s).
    mcp_call_deadline_s: float = Field(default=120.0, gt=0, le=3600)
    mcp_poll_ms: int = Field(default=100, ge=10, le=10_000)
    # How often the local server looks for suspended turns' waits past their deadline (turns/waits.py);
    # on AWS the WaitSweeperFunction runs every minute.
    wait_sweep_s: float = Field(default=5.0, gt=0)
    # How often the local server's scheduler fires schedules' due ticks (turns/schedules.py); each
    # cluster node runs it too (a tick is claimed once).
    schedule_tick_s: float = Field(default=10.0, gt=0)
    # How often the local server's webhook sender looks at the outbox (turns/webhooks.py), and whether
    # webhook URLs may reach loopback and private addresses (dev and tests; docs/webhooks.md, SSRF).
    webhook_send_s: float = Field(default=1.0, gt=0)
    webhooks_allow_private_networks: bool = False
    # AWS: the webhook sender function (template.yaml) the turn worker and the HTTP API wake with an
    # asynchronous invoke once a delivery is recorded or replayed; empty: its minute schedule only.
    webhook_sender_function: str | None = None
    # Local turn slots (adapters/local/sqlite/queue.py): turns running at once, and at most this
    # many of one tenant, so one tenant's flood leaves slots to the others (not in the open mode,
    # which has one tenant). On AWS, Lambda concurrency plays this part (SECURITY.md).
    turn_slots: int = Field(default=1000, ge=1)
    turn_slots_per_tenant: int = Field(default=750, ge=1)

    # tools (agent/tools/declarations.py, agent/tools/sources.py)
    tool_timeout_s: float = Field(default=60.0, gt=0)  # per call, unless the declaration says otherwise
    tool_max_output_chars: int = Field(default=32_000, ge=100)  # longer results are cut, with a marker
    # Media a tool result may carry to the model and the store (agent/tools/media.py), decoded bytes:
    # one block (5 MB: Anthropic's image limit), and all of one result's. Over: a placeholder and a note.
    tool_max_media_block_bytes: int = Field(default=5 * 1024 * 1024, ge=0)
    tool_max_media_result_bytes: int = Field(default=10 * 1024 * 1024, ge=0)
    # a turn waits this long for MCP servers' tool lists; a slower server is left out of it (an event)
    mcp_list_deadline_s: float = Field(default=5.0, gt=0, le=120)
    # Values HTTP tool and MCP headers may reference as {"secret": "NAME"}, by tenant ("*": every
    # tenant's): {"acme": {"WEATHER_KEY": "..."}}. Never stored, returned or logged. JSON in env.
    tool_secrets: dict[str, dict[str, SecretStr]] = Field(default_factory=dict)
    # Tools may reach loopback, private and link-local addresses (agent/tools/egress.py); off by default.
    tool_allow_private_networks: bool = False
    # The server's public base URL (https://agents.example.com): MCP OAuth's redirect URI is this +
    # /v1/mcp/oauth/callback (api/mcp_oauth.py). Unset: the request's own base URL (wrong behind a
    # proxy that rewrites the host: set it there).
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/[^\s]*)?$")
    # MCP sessions kept across turns (adapters/mcp/pool.py, docs/mcp.md; not on AWS): one per
    # (tenant, container, server), closed after this many idle seconds; at most this many per tenant
    # and per server process. Tool lists are listed again when older than the TTL (and on list_changed).
    mcp_idle_s: float = Field(default=300.0, gt=0, le=86_400)
    mcp_max_sessions_per_tenant: int = Field(default=16, ge=1)
    mcp_max_sessions: int = Field(default=128, ge=1)
    mcp_tools_ttl_s: float = Field(default=600.0, gt=0)
    # An MCP server's question to the user mid-call (agent/tools/elicitation.py) waits this long for
    # the client's answer, then is answered cancel (the call waits meanwhile; its own timeout pauses).
    mcp_elicitation_timeout_s: float = Field(default=300.0, gt=0, le=3600)
    # AWS: a call follows its 2026-07-28 MCP task this long (less when the invocation has less left);
    # a task still working then suspends the turn, and the waits sweeper follows it (turns/mcp_tasks.py).
    # Hosts that do not suspend on tasks (avm serve, cluster nodes) follow every task to its end.
    mcp_task_inline_s: float = Field(default=20.0, ge=0, le=600)
    # Sandbox jobs without bubblewrap run as plain processes of the server's user: allowed on a
    # loopback address, refused elsewhere unless this is set (adapters/sandbox/process.py).
    sandbox_allow_unisolated: bool = False
    # What one container's workspace may hold (both hosts): the files' bytes added up, and its
    # entries (files, directories, links). Past either, writes are refused and a job is stopped.
    sandbox_workspace_mb: int = Field(default=256, ge=1, le=64 * 1024)
    sandbox_workspace_entries: int = Field(default=20_000, ge=100, le=10_000_000)
    # AWS: the sandbox jobs' queue (the turn worker sends, functions/sandbox_worker consumes) and the
    # bucket of the containers' workspaces (adapters/sandbox/s3_workspaces.py). Unset: no sandbox on AWS.
    sandbox_queue_url: str | None = None
    # The tenant whose resources every tenant may read (the resource centre's platform resources).
    # How long a process keeps the config centre's API values before reading them again: the
    # delay within which a change made through /v1/config reaches every process (configcentre).
    config_cache_s: float = Field(default=5.0, ge=0, le=300)
    platform_tenant: str = Field(default="platform", min_length=1, max_length=128)
    workspace_bucket: str | None = None
    # AWS host: the S3 bucket of the knowledge index files (adapters/aws/s3_knowledge.py), under
    # knowledge/. Unset: knowledge there has no uploads and is searched by the BM25 of its record.
    knowledge_bucket: str | None = None

    # protocol limits
    max_frame_bytes: int = 256 * 1024
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)  # HTTP request bodies, refused unread
    # knowledge uploads (resources/uploads.py): a file as sent; documents and extracted text a draft
    knowledge_max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    knowledge_max_documents: int = Field(default=10_000, ge=1)
    knowledge_max_bytes: int = Field(default=200 * 1024 * 1024, ge=1024)
    # cluster host, pgvector (adapters/postgres/knowledge.py): unset, every vector query is exact
    # (perfect recall); set, a version with this many chunks of the query's dimension or more is
    # searched through the HNSW index (faster, approximate: recall 0.43 at 100k fake-llm chunks)
    knowledge_exact_below: int | None = Field(default=None, ge=0)
    # A local WebSocket client that stops reading: closed (4008) once this many frames wait for it,
    # or one frame waits this long; it resumes from its last seq (adapters/local/ws_writer.py).
    ws_send_queue_frames: int = Field(default=1024, ge=16)
    ws_send_timeout_s: float = Field(default=10.0, gt=0)
    ws_auth_deadline_s: float = Field(default=10.0, gt=0)  # a socket with no key must send `auth` by then
    # permessage-deflate on local WebSockets: off, as frames are small JSON and a zlib context per
    # connection costs memory and CPU per frame (docs/scaling.md); on for clients on slow links
    ws_deflate: bool = False
    max_connections_per_address: int = Field(default=256, ge=1)  # live local WebSockets per client IP
    # local HTTP connections not yet upgraded per client IP (hosts/http_guard.py)
    max_http_connections_per_address: int = Field(default=256, ge=1)
    max_connections_per_key: int = Field(default=2000, ge=0)  # live local WebSockets per API key; 0 = no cap
    # a local HTTP connection must complete a request's headers within this, or it is closed
    # (slowloris; hosts/http_guard.py); idle keep-alive connections close after 5 s (uvicorn)
    http_header_timeout_s: float = Field(default=10.0, gt=0)
    # ...and a request's body within this from its headers, or it is answered 408 (if nothing was
    # answered yet) and closed (a body trickled a byte at a time; hosts/http_guard.py)
    http_body_timeout_s: float = Field(default=30.0, gt=0)
    # Per tenant, whatever its number of keys (security/tenant_limits.py; 0 = no limit). A platform
    # admin may set each for one tenant (PATCH /v1/tenants/{id} {"limits": ...}).
    max_connections_per_tenant: int = Field(default=1000, ge=0)  # live WebSockets, both hosts
    max_api_keys_per_tenant: int = Field(default=50, ge=0)  # active keys made through POST /v1/auth/keys
    tenant_rate_limit_per_minute: int = Field(default=1800, ge=0)  # requests of all its keys together
    # HTTP requests answered 401 (no, bad or revoked key) per client address per minute; past it the
    # address is answered 429 without its key being checked, until the minute ends (0 = no limit)
    unauthorized_per_minute: int = Field(default=60, ge=0)

    # authentication (see SECURITY.md)
    open: bool = False  # key-less dev mode: every connection is tenant "local"; loopback only
    auth_secret: SecretStr | None = None  # HMAC key for API key hashes; locally <data_dir>/auth_secret
    auth_secret_previous: SecretStr | None = None  # still accepted while rotating auth_secret
    admin_key: SecretStr | None = None  # an `avm_...` token stored (hashed) as tenant default's admin key
    key_cache_s: float = Field(default=30.0, ge=0, le=60)  # verified keys cached: the revocation bound
    # budgets and rate limits
    rate_limit_per_minute: int = Field(default=600, ge=0)  # requests per API key; 0 = unlimited
    # requests of a key one process (a Lambda environment, `avm serve`) leases from the key's window
    # with one write, then admits from memory (security/ratelimit.py): never over the limit, but up
    # to this - 1 per process may go unused until the window ends; 1 = one write per request
    rate_lease_max: int = Field(default=10, ge=1)
    # bytes one tenant may store, every write path (security/storage_quota.py); 0 = no quota
    tenant_storage_bytes: int = Field(default=1 << 30, ge=0)
    # what one memory scope (an end user's container, or an image name) may hold (docs/memory.md)
    memory_max_items: int = Field(default=500, ge=1, le=100_000)
    memory_max_bytes: int = Field(default=256 * 1024, ge=1024, le=64 << 20)
    # frames (auth attempts included) a WebSocket may send before it has authenticated, per minute
    unauthenticated_frames_per_minute: int = Field(default=30, ge=1)
    # every frame of one local WebSocket, keyed or not: a token bucket of this rate, with a burst of
    # 4 seconds' worth; frames past it are answered `rate_limited`, and a client that goes on
    # sending past a whole burst of refusals is closed with 1008 (hosts/local_server.py)
    ws_frames_per_second: float = Field(default=50.0, gt=0)

    # the cluster host (docs/cluster.md, in progress): `avm serve` nodes sharing one PostgreSQL,
    # postgresql://user:password@host:port/dbname (libpq's URL; its password is never logged)
    database_url: SecretStr | None = None
    # each node's one connection pool (adapters/postgres/database.py): PostgreSQL's max_connections
    # must exceed nodes x max size, plus each node's listening connections
    database_pool_min_size: int = Field(default=1, ge=0, le=1000)
    database_pool_max_size: int = Field(default=10, ge=1, le=1000)
    # false: this node serves sockets and HTTP but runs no turns (its queue has no consumer here;
    # the other nodes run them). Only with database_url: a lone SQLite server must run its turns.
    run_turns: bool = True

    # AWS host (set by template.yaml; unused locally)
    table_name: str | None = None  # the one DynamoDB table
    queue_url: str | None = None  # the SQS FIFO turn queue
    ws_endpoint: str | None = None  # https://{api}.execute-api.{region}.amazonaws.com/{stage}
    provider_keys_parameter: str | None = None  # SSM SecureString (JSON) holding provider keys
    # how long a warm AWS function keeps the provider keys before reading the parameter again: a
    # rotated key reaches every function within this, without a redeploy (hosts/aws.py)
    provider_keys_ttl_s: int = Field(default=300, ge=0, le=86_400)
    # SSM SecureString (JSON) holding AVM_AUTH_SECRET (+ AVM_AUTH_SECRET_PREVIOUS): read on first use
    auth_secret_parameter: str | None = None
    # how often an AWS worker looks for an interrupt mark (an eventually consistent read, 0.5 RRU;
    # docs/cost.md): an interrupt stops the model within about this
    cancel_poll_ms: int = 1000

    # observability (docs/observability.md)
    # AWS: the functions' one log group; /v1/logs and /v1/metrics query it with Logs Insights
    log_group: str | None = None
    # AWS: the turn queue and its DLQ whose depths platform admins' /v1/metrics shows (read only;
    # default the queue of AVM_QUEUE_URL)
    metrics_queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    # the CloudWatch namespace of the EMF metrics (Powertools' variable is accepted too)
    metrics_namespace: str = Field(
        default="AgentVM",
        validation_alias=AliasChoices("AVM_METRICS_NAMESPACE", "POWERTOOLS_METRICS_NAMESPACE"),
    )
    insights_timeout_s: float = Field(default=20.0, gt=0, le=60)  # a Logs Insights query, at most
    # local: bytes of log lines kept for /v1/logs in <data_dir>/logs.db (oldest dropped); 0 = none
    log_store_max_bytes: int = Field(default=64 << 20, ge=0)
    # OpenTelemetry traces (observability/tracing.py): "console" or "otlp" (OTEL_EXPORTER_OTLP_*
    # configure the endpoint); unset: off, unless OTEL_EXPORTER_OTLP_ENDPOINT is set (then otlp)
    otel_exporter: Literal["none", "console", "otlp"] | None = None
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    # billing (observability/pricing.py; also settable through the config centre: billing.*)
    billing_markup: float = Field(default=1.05, ge=0, le=100)  # the charge is the list-price cost x this
    # per-model price overrides, USD per million tokens, JSON in env:
    # {"anthropic/claude-haiku-4-5": {"input": 1, "output": 5, "cacheRead": 0.1, "cacheWrite": 1.25}}
    billing_prices: dict[str, dict[str, float]] = Field(default_factory=dict)

    @field_validator("database_url")
    @classmethod
    def _database_url_is_postgres(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        url = urlsplit(value.get_secret_value())
        if url.scheme not in ("postgresql", "postgres") or not (url.hostname or "host=" in url.query):
            # the message names the scheme only: the URL may hold a password
            raise ValueError(
                f"AVM_DATABASE_URL must be postgresql://[user[:password]@]host[:port]/dbname, "
                f"not a {url.scheme or 'scheme-less'} URL"
            )
        return value

    @model_validator(mode="after")
    def _pool_bounds_in_order(self) -> Settings:
        if self.database_pool_min_size > self.database_pool_max_size:
            raise ValueError("AVM_DATABASE_POOL_MIN_SIZE may not exceed AVM_DATABASE_POOL_MAX_SIZE")
        if not self.run_turns and self.database_url is None:
            raise ValueError("AVM_RUN_TURNS=false needs AVM_DATABASE_URL: other nodes must run the turns")
        return self

    def database_secrets(self) -> list[str]:
        """What of ``database_url`` logs must mask: the whole URL and its password (as written and
        percent-decoded), for the log mask (logs.SecretMask)."""
        if self.database_url is None:
            return []
        url = self.database_url.get_secret_value()
        password = urlsplit(url).password or ""
        for pair in urlsplit(url).query.split("&"):
            if pair.lower().startswith("password="):
                password = pair.partition("=")[2]
        return [s for s in {url, password, unquote(password)} if s]

    def resolved_default_model(self) -> str:
        if self.default_model:
            return self.default_model
        if self.anthropic_api_key:
            return "anthropic/claude-haiku-4-5"
        if self.openai_api_key:
            return "openai/gpt-4o-mini"
        return ECHO_MODEL

    def has_provider_key(self) -> bool:
        return bool(
            self.anthropic_api_key or self.openai_api_key or self.bedrock_region or self.openai_compatible
        )


__all__ = ["ECHO_MODEL", "CompatProvider", "Settings"]
