"""Resolves ``provider/model`` references to ModelClients, as configured by Settings.

Clients (and with them the provider SDKs) are created on first use and cached per provider,
so a process that only ever talks to one provider never imports the others; ``avm serve`` makes
them before it listens (``prepare``). Each client has its own HTTP connection pool, on the lean
transport where httptools is installed (``AVM_PROVIDER_TRANSPORT``, ``adapters/llm/transport.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.agent.retry import RetryingModelClient
from agentvm.errors import BadRequest
from agentvm.llm import ModelRef

if TYPE_CHECKING:
    from agentvm.config import Settings
    from agentvm.ports import ModelClient

BUILTIN_PROVIDERS = ("echo", "anthropic", "openai", "bedrock")

# Sent to OpenAI-compatible endpoints registered without a key (local servers that ignore it):
# the SDK refuses to start without one.
_NO_KEY = "unused"


class SettingsModelResolver:
    """The ModelResolver of both hosts: built-in providers plus ``settings.openai_compatible``."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._clients: dict[str, ModelClient] = {}

    def reconfigure(self, settings: Settings) -> None:
        """New provider settings (the config centre's): clients are made again on next use."""
        self._settings = settings
        self._clients.clear()

    def resolve(self, ref: str | None) -> tuple[ModelClient, str, str]:
        parsed = ModelRef.parse(ref or self._settings.resolved_default_model())
        return self.client_for(parsed.provider), parsed.name, str(parsed)

    def client_for(self, provider: str) -> ModelClient:
        """The cached client of ``provider``, created on first use."""
        client = self._clients.get(provider)
        if client is None:
            client = self._clients[provider] = self._create(provider)
        return client

    def configured_providers(self) -> list[str]:
        """Names of the providers that can be resolved with the current settings."""
        s = self._settings
        names = ["echo"]
        names += ["anthropic"] if s.anthropic_api_key else []
        names += ["openai"] if s.openai_api_key else []
        names += ["bedrock"] if s.bedrock_region else []
        names += [name for name in s.openai_compatible if name not in BUILTIN_PROVIDERS]
        return names

    def _retrying(self, client: ModelClient) -> ModelClient:
        s = self._settings
        return RetryingModelClient(
            client,
            max_attempts=s.provider_max_attempts,
            base_delay_s=s.provider_retry_base_ms / 1000,
            max_total_s=s.provider_retry_max_total_s,
        )

    def prepare(self) -> None:
        """Make the configured providers' clients now (their SDKs imported, hundreds of ms): for a
        long-lived server, before it listens, so its first turns do not wait for them."""
        for provider in self.configured_providers():
            client = self.client_for(provider)
            warm = getattr(getattr(client, "inner", client), "warm", None)
            if warm is not None:
                warm()

    def _http_client(self) -> object:
        """The SDKs' HTTP client: on the lean transport (``adapters/llm/transport.py``), or None
        for their own (``AVM_PROVIDER_TRANSPORT``)."""
        choice = self._settings.provider_transport
        if choice == "sdk":
            return None
        try:
            from agentvm.adapters.llm.transport import sdk_http_client
        except ImportError:  # no httptools (the Lambda layer): the SDKs' own transport
            if choice == "lean":
                raise
            return None
        return sdk_http_client(self._settings.provider_timeout_s)

    def _create(self, provider: str) -> ModelClient:
        s = self._settings
        if provider == "echo":
            from agentvm.adapters.llm.echo import EchoModelClient

            return EchoModelClient(delay_ms=s.echo_delay_ms)  # never fails: no retry wrapper
        if provider == "anthropic":
            if s.anthropic_api_key is None:
                raise _not_configured(provider, "set ANTHROPIC_API_KEY")
            from agentvm.adapters.llm.anthropic import AnthropicModelClient

            key = s.anthropic_api_key.get_secret_value()
            return self._retrying(
                AnthropicModelClient(
                    key, s.anthropic_base_url, s.provider_timeout_s, http_client=self._http_client()
                )
            )
        if provider == "openai":
            if s.openai_api_key is None:
                raise _not_configured(provider, "set OPENAI_API_KEY")
            from agentvm.adapters.llm.openai import OpenAIModelClient

            key = s.openai_api_key.get_secret_value()
            return self._retrying(
                OpenAIModelClient(
                    key, s.openai_base_url, s.provider_timeout_s, http_client=self._http_client()
                )
            )
        if provider == "bedrock":
            if not s.bedrock_region:
                raise _not_configured(provider, "set AVM_BEDROCK_REGION")
            from agentvm.adapters.llm.bedrock import BedrockModelClient

            return self._retrying(BedrockModelClient(s.bedrock_region, timeout_s=s.provider_timeout_s))
        compat = s.openai_compatible.get(provider)
        if compat is not None:
            from agentvm.adapters.llm.openai import OpenAIModelClient

            key = compat.api_key.get_secret_value() if compat.api_key else _NO_KEY
            return self._retrying(
                OpenAIModelClient(
                    key,
                    compat.base_url,
                    s.provider_timeout_s,
                    provider_name=provider,
                    http_client=self._http_client(),
                )
            )
        known = ", ".join(self.configured_providers())
        raise BadRequest(f"unknown model provider {provider!r}; configured providers: {known}")


def _not_configured(provider: str, hint: str) -> BadRequest:
    return BadRequest(f"model provider {provider!r} is not configured: {hint}")


__all__ = ["BUILTIN_PROVIDERS", "SettingsModelResolver"]
