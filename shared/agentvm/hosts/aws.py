"""The AWS host's composition root: what every ``functions/<name>/app.py`` runs on.

``aws_runtime`` wires DynamoDB, SQS, API Gateway push, models with keys from SSM, and security on
the same table (``aws_security``); ``LambdaEntry`` / ``run_sync`` are the Lambda glue every function
shares. Nothing here does network I/O at build time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import TYPE_CHECKING, Any, TypeVar

from agentvm.hosts.tools import tool_sources
from agentvm.runtime import Runtime, turn_settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterable
    from pathlib import Path

    from aws_lambda_powertools import Logger

    from agentvm.adapters.llm.router import SettingsModelResolver
    from agentvm.config import Settings
    from agentvm.ports import Clock, KnowledgeIndex, Metrics, ModelClient, Webhooks
    from agentvm.records import TurnJob
    from agentvm.security.apikeys import ServerSecrets
    from agentvm.security.setup import LazyServerSecrets, Security

    Handler = Callable[[dict[str, Any], Any], Any]

T = TypeVar("T")
log = logging.getLogger("agentvm.hosts.aws")

# -- the AWS host -------------------------------------------------------------------------------
# Provider settings the keys parameter may carry. Other settings come from the function's
# environment (template.yaml), never from the secret.
_SECRET_FIELDS = (
    "anthropic_api_key",
    "anthropic_base_url",
    "openai_api_key",
    "openai_base_url",
    "openai_compatible",
)


def aws_runtime(settings: Settings, *, require: Iterable[str] = ("table_name",)) -> Runtime:
    """DynamoDB store and connections, SQS FIFO turn queue, API Gateway push, models by settings,
    and security (API keys, budgets, rate limits on the same table: ``aws_security``).

    Only builds objects: boto3 clients are created offline, so this does no network I/O (provider
    keys and the server secret are read later, on first use; see ``SsmKeysModelResolver`` and
    ``aws_security``). ``require`` names the settings this function cannot run
    without; a missing one fails here, with the environment variable to set. Ports whose setting a
    function was not given (``$connect`` has no queue) fail loudly if ever used; so does verifying
    a token in a function without ``AVM_AUTH_SECRET_PARAMETER``: the authenticator is always there,
    so no function ever runs unauthenticated.
    """
    from agentvm.adapters.aws.apigw_push import ApiGatewayPush
    from agentvm.adapters.aws.dynamodb.config import DynamoDbConfigStore
    from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
    from agentvm.adapters.aws.dynamodb.elicitations import POLL_S as ELICITATION_POLL_S
    from agentvm.adapters.aws.dynamodb.elicitations import DynamoDbElicitations
    from agentvm.adapters.aws.dynamodb.resources import DynamoDbResourceStore
    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from agentvm.adapters.aws.dynamodb.tenants import DynamoDbTenantStore
    from agentvm.adapters.aws.dynamodb.waits import DynamoDbToolWaits
    from agentvm.adapters.aws.sqs_queue import SqsTurnQueue
    from agentvm.adapters.aws.sqs_sandbox_jobs import SqsSandboxJobs
    from agentvm.adapters.sandbox.s3_workspaces import S3WorkspaceView
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.configcentre.centre import ConfigCentre
    from agentvm.hosts.knowledge import tenant_embedders
    from agentvm.observability.metrics import NoMetrics
    from agentvm.observability.running import TurnProgress
    from agentvm.resources.centre import ResourceCentre
    from agentvm.turns.cancel_poll import CancelPoll

    missing = sorted(name for name in {"table_name", *require} if not getattr(settings, name))
    if missing:
        names = ", ".join(f"AVM_{name.upper()}" for name in missing)
        raise RuntimeError(f"AWS host misconfigured: {names} not set")
    assert settings.table_name is not None
    runtime = Runtime(
        store=DynamoDbStore(settings.table_name),
        queue=SqsTurnQueue(settings.queue_url) if settings.queue_url else NotConfigured("queue_url"),
        connections=DynamoDbConnections(settings.table_name),
        push=ApiGatewayPush(settings.ws_endpoint) if settings.ws_endpoint else NotConfigured("ws_endpoint"),
        models=SsmKeysModelResolver(settings),
        turns=turn_settings(settings, cancel_poll_s=settings.cancel_poll_ms / 1000),
        # No stdio MCP servers on Lambda: a child process per turn, outside any isolation we control.
        # Sandbox jobs go to the sandbox worker over their own queue (the turn suspends on each).
        tools=tool_sources(settings, allow_stdio=False, remote_sandbox=bool(settings.sandbox_queue_url)),
        waits=DynamoDbToolWaits(settings.table_name),
        # MCP servers' questions as items of the table: the HTTP API or $default Lambda stores the
        # answer, the turn worker's call reads it, waiting no longer than its invocation allows
        elicitations=ElicitationDesk(
            timeout_s=settings.mcp_elicitation_timeout_s,
            store=DynamoDbElicitations(settings.table_name),
            poll_s=ELICITATION_POLL_S,
            wait_budget=INVOCATION.wait_budget_s,
        ),
        sandbox_jobs=SqsSandboxJobs(settings.sandbox_queue_url) if settings.sandbox_queue_url else None,
        # The HTTP API lists and reads workspaces from the bucket (the sandbox worker writes them).
        sandbox=S3WorkspaceView(settings.workspace_bucket) if settings.workspace_bucket else None,
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),  # replaced below (cloudwatch_metrics), as the field's default was
    )
    secrets_ = aws_server_secrets(settings)  # read from SSM on first use, by keys and by sealing
    aws_security(settings, runtime.clock, secrets_=secrets_).attach(runtime)
    runtime.resources = ResourceCentre(
        DynamoDbResourceStore(settings.table_name),
        runtime.clock,
        platform_tenant=settings.platform_tenant,
        storage=lambda: runtime.storage_quota,
        knowledge=lambda: runtime.knowledge_index,
        # each tenant's embedding model, billed, through the provider keys in SSM (as the models')
        embedder=tenant_embedders(runtime, lambda: keyed_settings(runtime, settings)),
    )
    if settings.knowledge_bucket:
        runtime.knowledge_index = s3_knowledge_index(settings.knowledge_bucket)
        from agentvm.ports import KnowledgeLimits

        runtime.knowledge_limits = KnowledgeLimits(
            max_file_bytes=settings.knowledge_max_file_bytes,
            max_documents=settings.knowledge_max_documents,
            max_bytes=settings.knowledge_max_bytes,
        )
    runtime.platform_tenant = settings.platform_tenant
    runtime.tenants = DynamoDbTenantStore(settings.table_name)
    from agentvm.adapters.aws.dynamodb.usage import DynamoDbUsageRollups

    runtime.usage = DynamoDbUsageRollups(settings.table_name)  # sums DynamoDbStore.put_usage writes
    from agentvm.adapters.aws.dynamodb.running import DynamoDbRunningTurns

    runtime.running = DynamoDbRunningTurns(settings.table_name)
    from agentvm.adapters.aws.dynamodb.sessions import DynamoDbSessionArchive

    runtime.sessions = DynamoDbSessionArchive(settings.table_name)  # session centre (search reads messages)
    from agentvm.adapters.aws.dynamodb.replies import DynamoDbReplyCache

    runtime.replies = DynamoDbReplyCache(settings.table_name)  # images opt in (replyCache)
    from agentvm.adapters.aws.dynamodb.memory import DynamoDbMemoryStore
    from agentvm.ports import MemoryLimits

    runtime.memory = DynamoDbMemoryStore(settings.table_name)  # images opt in (a memory tool)
    runtime.memory_limits = MemoryLimits(settings.memory_max_items, settings.memory_max_bytes)
    from agentvm.adapters.aws.dynamodb.schedules import DynamoDbSchedules

    # /v1/schedules on the HTTP API; functions/schedule_sweeper fires them (docs/schedules.md)
    runtime.schedules = DynamoDbSchedules(settings.table_name)
    from agentvm.adapters.aws.dynamodb.mcp_oauth import DynamoDbMcpOAuthRecords

    # tenants' sealed OAuth tokens of remote MCP servers; a browser flow ends in any function
    runtime.mcp_oauth = DynamoDbMcpOAuthRecords(settings.table_name)
    from agentvm.configcentre.sealing import SecretSealer

    # sealed under a key derived from the server secret (read from SSM on first use), as webhooks'
    runtime.mcp_oauth_sealer = SecretSealer(secrets_.newest_first)
    # No tenant_purge: purging here would be a Query per session and a scan for turns, so a deleted
    # tenant's conversations are kept and its tombstone says so (docs/tenants.md).
    # Provider keys stay in SSM on AWS: the config centre is given no sealer, so it refuses secrets.
    runtime.config = ConfigCentre(
        DynamoDbConfigStore(settings.table_name),
        settings,
        runtime.clock,
        cache_s=settings.config_cache_s,
    )
    runtime.webhooks = aws_webhooks(settings, secrets_)
    # a long MCP task suspends its turn (turns/mcp_tasks.py): its id sealed on the wait, as webhook
    # secrets are; followed inline no longer than the invocation can wait
    from agentvm.configcentre.sealing import SecretSealer
    from agentvm.ports import McpTaskSuspension

    if settings.auth_secret is not None or settings.auth_secret_parameter:  # else: nothing to seal with
        runtime.mcp_tasks = McpTaskSuspension(
            SecretSealer(secrets_.newest_first), settings.mcp_task_inline_s, INVOCATION.wait_budget_s
        )
    runtime.webhooks_allow_private = settings.webhooks_allow_private_networks
    runtime.metrics = cloudwatch_metrics(settings)
    from agentvm.observability.tracing import configure_tracing

    configure_tracing(settings)  # imports OpenTelemetry only when an exporter is configured
    if settings.log_group:  # /v1/logs: Logs Insights over the functions' group
        from agentvm.adapters.aws.cloudwatch.logs import CloudWatchLogStore

        insights = getattr(runtime.metrics, "insights", None)
        assert insights is not None  # cloudwatch_metrics made it, as AVM_LOG_GROUP is set
        runtime.logs = CloudWatchLogStore(insights, now_ms=runtime.clock.now_ms)
    return runtime


def aws_webhooks(settings: Settings, secrets_: ServerSecrets | LazyServerSecrets) -> Webhooks:
    """Webhook endpoints and the outbox on the table (``adapters/aws/dynamodb/webhooks.py``): the
    endpoints' secrets sealed under a key derived from the server secret (``configcentre.sealing``,
    as the other hosts seal them; read from SSM only when a secret is sealed or opened: by the HTTP
    API registering an endpoint, and by the sender), and, where ``AVM_WEBHOOK_SENDER_FUNCTION`` is
    set, the sender woken by an asynchronous invoke as soon as a delivery is due (docs/webhooks.md)."""
    from agentvm.adapters.aws.dynamodb.webhooks import DynamoDbWebhooks
    from agentvm.configcentre.sealing import SecretSealer

    assert settings.table_name is not None
    wake = None
    if settings.webhook_sender_function:
        from agentvm.adapters.aws.lambda_invoke import AsyncInvoke

        wake = AsyncInvoke(settings.webhook_sender_function, {"source": "agentvm.webhooks"})
    return DynamoDbWebhooks(settings.table_name, SecretSealer(secrets_.newest_first), on_due=wake)


def keyed_settings(runtime: Runtime, settings: Settings) -> Settings:
    """``settings`` with the provider keys the runtime's models use (``SsmKeysModelResolver``)."""
    models = runtime.models
    return models.settings_with_keys() if isinstance(models, SsmKeysModelResolver) else settings


def s3_knowledge_index(bucket: str, *, client: Any = None, cache_dir: str | None = None) -> KnowledgeIndex:
    """Knowledge in ``bucket``: one file per version of the local host's index (FTS5 words,
    sqlite-vec vectors; a draft: one segment per upload, indexed locally), cached in the function's
    ``/tmp`` (``adapters/aws/s3_knowledge.py``).
    Builds objects only; SQLite, sqlite-vec and the files are opened on the first knowledge call,
    so no function pays for them at its cold start."""
    from agentvm.adapters.aws.s3_knowledge import S3KnowledgeIndex

    def open_index(path: Path) -> Any:
        from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex

        return SqliteKnowledgeIndex(path)

    return S3KnowledgeIndex(bucket, open_index, client=client, cache_dir=cache_dir)


def cloudwatch_metrics(settings: Settings) -> Metrics:
    """EMF lines out; Logs Insights over ``AVM_LOG_GROUP`` (and the queues) for ``/v1/metrics``.
    Builds objects only: the boto3 clients are made on the first read (the HTTP API's)."""
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics
    from agentvm.adapters.aws.cloudwatch.logs_insights import LogsInsights

    insights = (
        LogsInsights(settings.log_group, timeout_s=settings.insights_timeout_s)
        if settings.log_group
        else None
    )
    return CloudWatchMetrics(
        namespace=settings.metrics_namespace,
        insights=insights,
        queue_url=settings.metrics_queue_url or settings.queue_url,
        dead_letter_queue_url=settings.dead_letter_queue_url,
    )


class NotConfigured:
    """Stands in for the queue or push of a function deployed without that setting."""

    def __init__(self, setting: str) -> None:
        self.setting = setting

    def _error(self) -> RuntimeError:
        return RuntimeError(f"this function has no AVM_{self.setting.upper()}: add it in template.yaml")

    async def enqueue(self, job: TurnJob) -> None:
        raise self._error()

    async def send(self, connection_id: str, payload: str) -> None:
        raise self._error()


class SsmKeysModelResolver:
    """The AWS host's ModelResolver: ``SettingsModelResolver`` plus keys from SSM Parameter Store.

    ``settings.provider_keys_parameter`` names one SecureString holding a JSON object such as
    ``{"ANTHROPIC_API_KEY": "...", "OPENAI_API_KEY": "..."}`` (the same names as the local
    environment variables). It is read on the first ``resolve``: when a turn first needs a model, or
    a frame names one (``image_create`` with ``config.model``); never at import, so no handler's
    cold start waits for SSM and KMS.

    **Rotation without a redeploy.** The value is cached by Powertools Parameters (``SSMProvider``)
    for ``settings.provider_keys_ttl_s`` (``AVM_PROVIDER_KEYS_TTL_S``, 300 s): a ``resolve`` after
    that reads the parameter again, and a changed value rebuilds the model clients with the new
    keys. A rotated key therefore reaches every warm function within the TTL; the old key should
    stay valid at the provider that long. Cost: one GetParameter per execution environment per TTL
    (standard parameters: no charge; a few ms, on the turn that comes after the TTL).
    Values are never logged, not even on errors.
    """

    def __init__(self, settings: Settings, *, ssm_client: Any = None) -> None:
        self._settings = settings
        self._ssm_client = ssm_client
        self._resolver: SettingsModelResolver | None = None
        self._value: str | None = None  # the parameter's value the resolver was built with
        self._provider: Any = None  # Powertools' SSMProvider, made on first read
        self._keyed_settings = settings  # settings plus the parameter's keys, as last read

    def resolve(self, ref: str | None) -> tuple[ModelClient, str, str]:
        return self._loaded().resolve(ref)

    def settings_with_keys(self) -> Settings:
        """The settings with the parameter's provider keys (read as ``resolve`` reads them, from
        the same cache): what the knowledge centre's embedders are built with."""
        self._loaded()
        return self._keyed_settings

    def reconfigure(self, settings: Settings) -> None:
        """Provider URLs or timeout changed in the config centre: the keys are read again with them."""
        self._settings = settings
        self._resolver = None

    def _loaded(self) -> SettingsModelResolver:
        settings = self._settings
        name = settings.provider_keys_parameter
        value = self._fetch(name) if name else None
        if value != self._value:
            if self._value is not None:
                log.info("provider keys changed: model clients rebuilt", extra={"parameter": name})
            self._resolver, self._value = None, value
        if self._resolver is None:
            from agentvm.adapters.llm.router import SettingsModelResolver

            if name and value is not None:
                keys = parse_ssm_json(name, value, holding="a JSON object of provider settings")
                log.info("provider keys loaded", extra={"parameter": name, "names": sorted(keys)})
                settings = with_provider_keys(settings, keys)
            self._resolver = SettingsModelResolver(settings)
            self._keyed_settings = settings
        return self._resolver

    def _fetch(self, name: str) -> str:
        """The parameter's decrypted value, from Powertools' cache while it is younger than the TTL."""
        if self._provider is None:
            from aws_lambda_powertools.utilities.parameters import SSMProvider

            self._provider = SSMProvider(boto3_client=self._ssm_client)
        value = self._provider.get(name, decrypt=True, max_age=self._settings.provider_keys_ttl_s)
        return str(value)


def read_ssm_json(name: str, *, ssm_client: Any = None, holding: str) -> dict[str, Any]:
    """The JSON object in the SecureString ``name`` (decrypted). Errors never quote the value.

    ``holding`` says what the parameter must hold, for the error when it holds anything else.
    """
    client = ssm_client
    if client is None:
        import boto3

        client = boto3.client("ssm")
    value = client.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    return parse_ssm_json(name, value, holding=holding)


def parse_ssm_json(name: str, value: str, *, holding: str) -> dict[str, Any]:
    """``value`` (the parameter ``name``'s) as a JSON object; an error that never quotes it."""
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        # no detail on purpose: a parse error's message can quote the secret
        raise RuntimeError(f"SSM parameter {name} must hold {holding}")
    return parsed


def with_provider_keys(settings: Settings, keys: dict[str, Any]) -> Settings:
    """``settings`` plus the provider settings in ``keys`` (named as their environment variables)."""
    from pydantic import AliasChoices, TypeAdapter, ValidationError

    names: dict[str, str] = {}
    for field in _SECRET_FIELDS:
        info = type(settings).model_fields[field]
        names[f"AVM_{field.upper()}"] = field
        if isinstance(info.validation_alias, AliasChoices):
            names.update({str(alias): field for alias in info.validation_alias.choices})
    update: dict[str, Any] = {}
    for name, value in keys.items():
        target = names.get(name)
        if target is None:
            log.warning("ignoring an unknown name in the provider keys", extra={"key_name": name})
            continue
        annotation = type(settings).model_fields[target].annotation
        assert annotation is not None  # every settings field is annotated
        try:
            update[target] = TypeAdapter(annotation).validate_python(value)
        except ValidationError:
            # no detail on purpose: pydantic's message quotes the input value
            raise RuntimeError(f"provider key {name} has an invalid value") from None
    return settings.model_copy(update=update)


def ssm_server_secrets(name: str, *, ssm_client: Any = None) -> ServerSecrets:
    """The server secrets in the SecureString ``name``: ``{"AVM_AUTH_SECRET": "...", ...}``.

    ``AVM_AUTH_SECRET_PREVIOUS`` is optional (while rotating). Errors and logs name the
    parameter and the names it holds, never a value.
    """
    # Imported here, not at module level: a handler module imports this one, and its cold start
    # should not pay for pydantic and the security models before the runtime is built.
    from agentvm.security.apikeys import ServerSecrets
    from agentvm.security.setup import SECRET_NAMES

    values = read_ssm_json(name, ssm_client=ssm_client, holding='{"AVM_AUTH_SECRET": "<at least 32 bytes>"}')
    unknown = sorted(set(values) - set(SECRET_NAMES))
    if unknown:
        log.warning("ignoring unknown names in the auth secret parameter", extra={"names": unknown})
    current, previous = (values.get(n) for n in SECRET_NAMES)
    if not isinstance(current, str) or not isinstance(previous, str | None):
        raise RuntimeError(
            f"SSM parameter {name} must hold AVM_AUTH_SECRET (and AVM_AUTH_SECRET_PREVIOUS): strings"
        )
    secrets_ = ServerSecrets(current.encode(), previous.encode() if previous else None)
    log.info("auth secret loaded", extra={"parameter": name, "names": sorted(set(values) - set(unknown))})
    return secrets_


def _not_configured() -> ServerSecrets:
    raise RuntimeError("this function has no AVM_AUTH_SECRET_PARAMETER: add it in template.yaml")


def aws_server_secrets(settings: Settings, *, ssm_client: Any = None) -> ServerSecrets | LazyServerSecrets:
    """The server secret: ``AVM_AUTH_SECRET`` when set (tests, tooling), else the SecureString named
    by ``AVM_AUTH_SECRET_PARAMETER``, read on first use (``LazyServerSecrets``; no network I/O here).
    Neither: secrets whose first use fails, naming the setting to add."""
    from agentvm.security.setup import LazyServerSecrets, server_secrets

    if settings.auth_secret is not None:
        return server_secrets(settings)
    if settings.auth_secret_parameter:
        name = settings.auth_secret_parameter
        return LazyServerSecrets(lambda: ssm_server_secrets(name, ssm_client=ssm_client))
    return LazyServerSecrets(_not_configured)


def aws_security(
    settings: Settings,
    clock: Clock,
    *,
    ssm_client: Any = None,
    secrets_: ServerSecrets | LazyServerSecrets | None = None,
) -> Security:
    """Key store, budgets and counters on the single table ``AVM_TABLE_NAME``; always authenticates.

    The server secret: ``secrets_`` (``aws_runtime`` shares one with the webhooks' sealing), else
    ``aws_server_secrets``: ``AVM_AUTH_SECRET`` when set (tests, tooling), else the SecureString named
    by ``AVM_AUTH_SECRET_PARAMETER``, read on first use (no network I/O here). A function given
    neither still gets an authenticator, whose first token check fails: there is no unauthenticated
    mode on AWS. Counter windows expire by ``clock``, like budgets and limits.
    """
    from agentvm.adapters.aws.dynamodb.budgets import DynamoDbBudgetStore
    from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
    from agentvm.adapters.aws.dynamodb.keys import DynamoDbKeyStore
    from agentvm.security.setup import build_security

    if not settings.table_name:
        raise ValueError("AVM_TABLE_NAME is not set")
    table = settings.table_name
    if secrets_ is None:
        secrets_ = aws_server_secrets(settings, ssm_client=ssm_client)
    return build_security(
        settings,
        clock,
        keys=DynamoDbKeyStore(table),
        budgets=DynamoDbBudgetStore(table),
        counters=DynamoDbCounters(table, now=lambda: clock.now_ms() / 1000),
        secrets_=secrets_,
    )


class InvocationDeadline:
    """When this execution environment's current invocation must end (Lambda runs one at a time).

    ``begin(context)`` at the start of each invocation (``hosts/lambda_entry.py``: the SQS workers);
    ``wait_budget_s`` is what an MCP server's question may still wait: the time left less
    ``reserve_s`` (for the rest of the turn: storing its outcome, sending its end), None outside an
    invocation that began one (a function that runs no turn never waits).
    """

    def __init__(self, *, reserve_s: float = 30.0, monotonic: Callable[[], float] | None = None) -> None:
        import time

        self.reserve_s = reserve_s
        self._monotonic = monotonic or time.monotonic
        self._ends_at: float | None = None

    def begin(self, context: Any) -> None:
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        self._ends_at = None if remaining is None else self._monotonic() + remaining() / 1000

    def wait_budget_s(self) -> float | None:
        if self._ends_at is None:
            return None
        return max(0.0, self._ends_at - self._monotonic() - self.reserve_s)


# This execution environment's invocation (one per process: Lambda runs one invocation at a time).
INVOCATION = InvocationDeadline()


class LambdaEntry:
    """A function module's ``lambda_handler``: ``build(aws_runtime(Settings()))``, built once.

    Inside a Lambda execution environment (``AWS_LAMBDA_FUNCTION_NAME`` is set) the handler is
    built when the module is imported, i.e. in Lambda's init phase: the runtime's clients are then
    ready before the first event, and an environment Lambda initialises ahead of traffic pays
    nothing on a request. Anywhere else (tests, tooling, ``scripts/measure_imports.py``) it is built
    on the first invocation, so a handler module imports without AWS settings. ``eager`` overrides
    the choice. Either way the handler, its runtime and its clients live as long as the execution
    environment; a missing setting fails the build with the variable to set.
    """

    def __init__(
        self,
        build: Callable[[Runtime], Handler],
        *,
        require: Iterable[str],
        logger: Logger | None = None,
        eager: bool | None = None,
    ) -> None:
        self._build = build
        self._require = tuple(require)
        self._logger = logger
        self._handler: Handler | None = None
        if eager is None:
            eager = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))  # set by Lambda's runtime
        if eager:
            self.prime()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        handler = self._handler or self.prime()
        return handler(event, context)

    def prime(self) -> Handler:
        """Build the handler now (what the first invocation does when nothing did before)."""
        from agentvm.config import Settings

        settings = Settings()
        if self._logger is not None:
            # With POWERTOOLS_SERVICE_NAME=agentvm (template.yaml) the Powertools logger is the
            # stdlib logger "agentvm", parent of the core's agentvm.* loggers: their lines come out
            # as the same JSON, with the same correlation keys, at this level.
            prepare_lambda_logger(self._logger, settings.log_level)
        from agentvm.logs import refusals

        refusals.per_minute = settings.log_refusals_per_minute  # per execution environment
        self._handler = self._build(aws_runtime(settings, require=self._require))
        return self._handler


def prepare_lambda_logger(logger: Logger, level: str) -> None:
    """The functions' Powertools logger as every Lambda runs it: at ``level``, tagged, masked and
    compact (``_tag_and_mask``); once per execution environment (``LambdaEntry``)."""
    logger.setLevel(level.upper())
    _tag_and_mask(logger)


def _tag_and_mask(logger: Logger) -> None:
    """Every line through the Powertools handler carries the bound tenant, container, session and
    turn ids (``/v1/logs`` filters on them) and has API keys and tokens masked (logs.SecretMask),
    and leaves out the keys CloudWatch already stores (``compact_lines``)."""
    from agentvm.logs import LogContext, SecretMask

    handler = logger.registered_handler
    if not any(isinstance(f, LogContext) for f in handler.filters):
        handler.addFilter(LogContext())
        handler.addFilter(SecretMask([]))
    compact_lines(logger)


# Powertools' standard keys that CloudWatch Logs already holds for every line, or that never vary
# within a function: the stack's one log group names each stream
# ``YYYY/MM/DD/<function_name>[<version>][<environment>]`` (the function's name, hence its ARN;
# its memory size is on every REPORT line); each event has its own timestamp (``@timestamp``,
# which /v1/logs and /v1/metrics query); a cold start is its stream's first invocation (and its
# REPORT line's Init Duration); the service is the one POWERTOOLS_SERVICE_NAME. Kept:
# ``function_request_id`` (Lambda's REPORT line of the same invocation has it), ``correlation_id``
# (API Gateway's request id), the level, the message and every key the code adds.
REDUNDANT_KEYS = (
    "timestamp",
    "service",
    "cold_start",
    "function_name",
    "function_arn",
    "function_memory_size",
)
# The code location stays on WARNING and above only: the message names an INFO line's code.
_QUIET_LEVELS = frozenset({"DEBUG", "INFO"})


def compact_lines(logger: Logger) -> None:
    """Leave ``REDUNDANT_KEYS`` (and an INFO or DEBUG line's ``location``) out of every line the
    Powertools ``logger`` writes; once per process (the formatter is shared by the functions'
    loggers). A line carrying an EMF document (``_aws``) keeps its ``service``: it is the metrics'
    dimension there."""
    # Any: Powertools' own formatter has a json_serializer, its base class declares none
    formatter: Any = logger.registered_formatter
    serialize = getattr(formatter, "json_serializer", None)
    if serialize is None or getattr(serialize, "compacts", False):
        return

    def compact(log: dict[str, Any]) -> str:
        for key in REDUNDANT_KEYS:
            if key != "service" or "_aws" not in log:
                log.pop(key, None)
        if log.get("level") in _QUIET_LEVELS:
            log.pop("location", None)
        return serialize(log)

    compact.compacts = True  # type: ignore[attr-defined]
    formatter.json_serializer = compact


_loop: asyncio.AbstractEventLoop | None = None


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's one event loop, created on first use and made the thread's current loop.

    Lambda freezes the process between invocations and thaws it for the next one; the loop, and
    everything bound to it (async HTTP clients of the provider SDKs, pooled connections), must
    survive that. ``asyncio.run`` per invocation would close the loop each time and break them
    ("Event loop is closed"). Mangum looks the current loop up, so it runs on this one too.
    """
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_loop)
    return _loop


async def rounds_until_done(
    round_: Callable[[], Awaitable[int]],
    *,
    context: Any = None,
    max_rounds: int | None = None,
    reserve_ms: int = 0,
) -> int:
    """Run a scheduled function's rounds of work (the sweepers, the webhook sender) until one does
    nothing, ``max_rounds`` ran, or the invocation has ``reserve_ms`` or less left (checked before
    each round, so a round always has its reserve); returns the work done. What is left waits for
    the next run."""
    done = rounds = 0
    while max_rounds is None or rounds < max_rounds:
        if context is not None and context.get_remaining_time_in_millis() <= reserve_ms:
            break
        made = await round_()
        done += made
        rounds += 1
        if made == 0:
            break
    return done


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the process's one event loop (from a sync Lambda handler)."""
    return event_loop().run_until_complete(coro)


__all__ = [
    "INVOCATION",
    "InvocationDeadline",
    "LambdaEntry",
    "NotConfigured",
    "SsmKeysModelResolver",
    "aws_runtime",
    "aws_security",
    "aws_server_secrets",
    "aws_webhooks",
    "cloudwatch_metrics",
    "compact_lines",
    "event_loop",
    "keyed_settings",
    "prepare_lambda_logger",
    "parse_ssm_json",
    "read_ssm_json",
    "rounds_until_done",
    "run_sync",
    "s3_knowledge_index",
    "ssm_server_secrets",
    "with_provider_keys",
]
