from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentvm.adapters.llm.anthropic as llm_anthropic
import agentvm.adapters.llm.bedrock as llm_bedrock
import agentvm.adapters.llm.openai as llm_openai
from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.agent.retry import RetryingModelClient
from agentvm.config import CompatProvider, Settings
from agentvm.errors import BadRequest

SECRET = "sk-test-very-secret-0123456789"
REPO = Path(__file__).resolve().parents[3]


class RecordingClient:
    """Stands in for a provider client: records its constructor arguments, creates no SDK."""

    def __init__(self, *args, **kwargs) -> None:
        self.args = args
        self.kwargs = kwargs
        type(self).created.append(self)

    async def stream(self, request):  # pragma: no cover - never streamed here
        yield None


@pytest.fixture
def fakes(monkeypatch):
    """Replace the SDK-backed clients; the router imports them at first use, so patching works."""
    made = {}
    for module, name in (
        (llm_anthropic, "AnthropicModelClient"),
        (llm_openai, "OpenAIModelClient"),
        (llm_bedrock, "BedrockModelClient"),
    ):
        fake = type(name, (RecordingClient,), {"created": []})
        monkeypatch.setattr(module, name, fake)
        made[name] = fake
    return made


def _settings(**values) -> Settings:
    # Explicit values beat the environment; pin every provider so a developer's env cannot leak in.
    base = {
        "anthropic_api_key": None,
        "openai_api_key": None,
        "anthropic_base_url": None,
        "openai_base_url": None,
        "bedrock_region": None,
        "openai_compatible": {},
        "default_model": None,
    }
    return Settings(**{**base, **values})


def test_no_ref_and_no_provider_resolves_to_echo_unwrapped():
    client, name, canonical = SettingsModelResolver(_settings(echo_delay_ms=0)).resolve(None)

    assert isinstance(client, EchoModelClient)  # echo never fails, so no retry wrapper
    assert (name, canonical) == ("echo-1", "echo/echo-1")


def test_no_ref_uses_the_configured_default_model(fakes):
    resolver = SettingsModelResolver(_settings(openai_api_key=SECRET, default_model="openai/gpt-4.1-mini"))

    client, name, canonical = resolver.resolve(None)

    assert isinstance(client, RetryingModelClient)
    assert isinstance(client.inner, fakes["OpenAIModelClient"])
    assert (name, canonical) == ("gpt-4.1-mini", "openai/gpt-4.1-mini")


def test_anthropic_ref_resolves_to_a_retrying_anthropic_client(fakes):
    settings = _settings(anthropic_api_key=SECRET, anthropic_base_url="http://fake", provider_timeout_s=7.0)

    client, name, canonical = SettingsModelResolver(settings).resolve("anthropic/claude-haiku-4-5")

    assert isinstance(client, RetryingModelClient)
    assert client.inner.args == (SECRET, "http://fake", 7.0)
    assert (name, canonical) == ("claude-haiku-4-5", "anthropic/claude-haiku-4-5")


def test_clients_are_created_lazily_and_cached_per_provider(fakes):
    resolver = SettingsModelResolver(_settings(anthropic_api_key=SECRET, openai_api_key=SECRET))
    assert fakes["AnthropicModelClient"].created == []

    first, _, _ = resolver.resolve("anthropic/claude-haiku-4-5")
    second, name, _ = resolver.resolve("anthropic/claude-sonnet-4-5")

    assert first is second
    assert name == "claude-sonnet-4-5"
    assert len(fakes["AnthropicModelClient"].created) == 1
    assert fakes["OpenAIModelClient"].created == []


def test_openai_compatible_providers_use_their_base_url_and_name(fakes):
    settings = _settings(
        openai_compatible={
            "local": CompatProvider(base_url="http://127.0.0.1:11434/v1"),
            "groq": CompatProvider(base_url="https://api.groq.example/v1", api_key=SECRET),
        },
        provider_timeout_s=9.0,
    )
    resolver = SettingsModelResolver(settings)

    local, name, canonical = resolver.resolve("local/llama3.2")
    groq, _, _ = resolver.resolve("groq/llama-3.3-70b")

    assert (name, canonical) == ("llama3.2", "local/llama3.2")
    assert local.inner.args[1:3] == ("http://127.0.0.1:11434/v1", 9.0)
    assert local.inner.kwargs["provider_name"] == "local"
    assert groq.inner.args[:2] == (SECRET, "https://api.groq.example/v1")
    assert groq.inner.kwargs["provider_name"] == "groq"


def test_bedrock_needs_a_region(fakes):
    with pytest.raises(BadRequest, match="AVM_BEDROCK_REGION"):
        SettingsModelResolver(_settings()).resolve("bedrock/anthropic.claude-3-haiku")

    client, name, _ = SettingsModelResolver(_settings(bedrock_region="eu-west-1")).resolve(
        "bedrock/anthropic.claude-3-haiku-20240307-v1:0"
    )
    assert client.inner.args == ("eu-west-1",)
    assert name == "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.mark.parametrize(
    ("ref", "env_var"),
    [("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY"), ("openai/gpt-4o", "OPENAI_API_KEY")],
)
def test_unconfigured_provider_is_a_clear_bad_request(fakes, ref, env_var):
    with pytest.raises(BadRequest) as raised:
        SettingsModelResolver(_settings()).resolve(ref)

    assert str(raised.value) == f"model provider {ref.split('/')[0]!r} is not configured: set {env_var}"


def test_unknown_provider_lists_the_configured_ones(fakes):
    resolver = SettingsModelResolver(_settings(openai_api_key=SECRET))

    with pytest.raises(
        BadRequest, match="unknown model provider 'mistral'; configured providers: echo, openai"
    ):
        resolver.resolve("mistral/large")


def test_malformed_ref_is_a_bad_request():
    with pytest.raises(BadRequest, match="provider/model"):
        SettingsModelResolver(_settings()).resolve("gpt-4o")


def test_errors_never_contain_a_key(fakes):
    resolver = SettingsModelResolver(
        _settings(
            openai_api_key=SECRET,
            openai_compatible={"local": CompatProvider(base_url="http://x/v1", api_key=SECRET)},
        )
    )
    messages = []
    for ref in ("anthropic/claude", "nope/model", "bedrock/model", "broken"):
        with pytest.raises(BadRequest) as raised:
            resolver.resolve(ref)
        messages.append(str(raised.value))

    assert all(SECRET not in message for message in messages)


def test_importing_the_adapters_does_not_import_the_sdks():
    code = (
        "import sys\n"
        "import agentvm.adapters.llm.router, agentvm.adapters.llm.anthropic\n"
        "import agentvm.adapters.llm.openai, agentvm.adapters.llm.bedrock, agentvm.adapters.llm.echo\n"
        "loaded = [m for m in ('anthropic', 'openai', 'boto3', 'botocore') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("choice", "lean"), [("auto", True), ("lean", True), ("sdk", False)])
def test_provider_sdks_get_the_lean_transport_unless_told_otherwise(fakes, choice, lean, monkeypatch):
    from agentvm.adapters.llm.transport import ProviderTransport

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    resolver = SettingsModelResolver(_settings(anthropic_api_key=SECRET, provider_transport=choice))
    client, _, _ = resolver.resolve("anthropic/claude-x")
    http_client = client.inner.kwargs["http_client"]
    if lean:
        assert isinstance(http_client._transport, ProviderTransport)
    else:
        assert http_client is None


def test_prepare_makes_every_configured_provider_client_before_the_first_turn(fakes):
    resolver = SettingsModelResolver(_settings(anthropic_api_key=SECRET, openai_api_key=SECRET))
    resolver.prepare()
    assert len(fakes["AnthropicModelClient"].created) == 1
    assert len(fakes["OpenAIModelClient"].created) == 1
    resolver.resolve("anthropic/claude-x")
    assert len(fakes["AnthropicModelClient"].created) == 1  # cached, not made again


def test_with_an_http_proxy_in_the_environment_the_sdks_keep_their_own_transport(fakes, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")  # httpx would not apply it to ours
    resolver = SettingsModelResolver(_settings(anthropic_api_key=SECRET))
    client, _, _ = resolver.resolve("anthropic/claude-x")
    assert client.inner.kwargs["http_client"] is None
