"""``/v1/metrics`` on the local host: a scripted run moves each counter by exactly what happened,
the exposition parses with prometheus-client's own parser, a tenant sees only its own series, and
bad input gets a stable error code."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentvm.adapters.llm.scripted import Calls, Fail
from agentvm.adapters.local.prometheus_metrics import PrometheusMetrics, _quantile
from agentvm.api.app import create_app
from agentvm.errors import ProviderRejected
from agentvm.observability.metrics import estimated_cost_usd
from tests.security_harness import ManualClock, keyed_client, new_key, secure
from tests.tools import FakeTool, FixedToolSources


@pytest.fixture
async def world(harness):
    clock = ManualClock()
    secure(harness, clock)
    harness.rt.metrics = PrometheusMetrics(
        connections=harness.rt.connections, queue=harness.queue, now_ms=clock.now_ms
    )
    tokens = {
        t: await new_key(harness.rt, t, "admin") for t in ("tenant-a", "tenant-b", harness.rt.platform_tenant)
    }
    return harness, tokens


def http(h, token: str | None) -> httpx.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=create_app(h.rt))
    return httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers)


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of an exposition, parsed by the client library's own parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed, name: str, **labels: str) -> float:
    return parsed.get((name, frozenset(labels.items())), 0.0)


async def scrape(h, token: str) -> dict:
    async with http(h, token) as client:
        r = await client.get("/v1/metrics?format=prometheus")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    return samples(r.text)


async def test_a_scripted_run_moves_every_counter_by_what_happened(world):
    h, tokens = world
    weather = FakeTool("get_weather")
    h.rt.tools = FixedToolSources(weather)
    before = await scrape(h, tokens["tenant-a"])
    a = await keyed_client(h, tokens["tenant-a"])
    config = {"name": "A", "tools": [{"type": "builtin", "name": "calculator"}]}
    img = (await a.request("image_create", containerId="u1", config=config))["record"]
    missing = await a.request("image_messages", imageId="img_missing")  # a request error
    assert missing["code"] == "not_found"
    # three turns: a tool turn (one good call, one unknown tool), a plain one, a failed one
    h.model.add(Calls(("get_weather", {"city": "Paris"}), ("nope", {"city": "x"})), "Sunny in Paris.")
    await a.request("message_send", imageId=img["imageId"], content="weather?")
    await h.run_turns()
    h.model.add("Hello there friend")
    await a.request("message_send", imageId=img["imageId"], content="hi")
    await h.run_turns()
    h.model.add(Fail(ProviderRejected("bad request"), after_words="Oh"))
    await a.request("message_send", imageId=img["imageId"], content="fail")
    await h.run_turns()
    async with http(h, tokens["tenant-a"]) as client:
        assert (await client.get("/v1/usage")).status_code == 200
        assert (await client.get("/v1/resources/prompts/nothing")).status_code == 404
    usage = await h.store.list_usage("tenant-a", None)
    after = await scrape(h, tokens["tenant-a"])

    def moved(name: str, **labels: str) -> float:
        return value(after, name, tenant="tenant-a", **labels) - value(
            before, name, tenant="tenant-a", **labels
        )

    # ws: image_create, image_get, 3x message_send, and the auth frame; http: 2 + the first scrape
    assert moved("avm_requests_total", transport="ws", outcome="ok") == 5
    assert moved("avm_requests_total", transport="ws", outcome="error") == 1
    assert moved("avm_requests_total", transport="http", outcome="ok") == 2
    assert moved("avm_requests_total", transport="http", outcome="error") == 1
    assert moved("avm_errors_total", source="request", code="not_found") == 2
    assert moved("avm_errors_total", source="turn", code="provider_rejected") == 1
    assert moved("avm_turns_total", status="completed") == 2
    assert moved("avm_turns_total", status="failed") == 1
    input_tokens = sum(u.inputTokens for u in usage)
    output_tokens = sum(u.outputTokens for u in usage)
    assert input_tokens > 0 and output_tokens > 0
    assert moved("avm_tokens_total", direction="input") == input_tokens
    assert moved("avm_tokens_total", direction="output") == output_tokens
    assert moved("avm_estimated_cost_usd_total") == pytest.approx(
        estimated_cost_usd("scripted/test-1", input_tokens, output_tokens)
    )
    assert moved("avm_tool_calls_total", outcome="ok") == 1
    assert moved("avm_tool_calls_total", outcome="error") == 1
    assert moved("avm_turn_duration_seconds_count") == 3
    assert moved("avm_time_to_first_token_seconds_count") == 3
    assert value(after, "avm_active_containers", tenant="tenant-a") == 1
    assert value(after, "avm_active_connections", tenant="tenant-a") == 1
    assert weather.calls == [{"city": "Paris"}]

    async with http(h, tokens["tenant-a"]) as client:
        view = (await client.get("/v1/metrics")).json()
    assert view["scope"] == "tenant" and view["tenantId"] == "tenant-a" and view["host"] == "local"
    assert view["turns"] == {"total": 3, "errors": 1, "byStatus": {"completed": 2, "failed": 1}}
    assert view["tokens"] == {"input": input_tokens, "output": output_tokens}
    assert view["tools"] == {"calls": 2, "failures": 1}
    assert view["errors"]["byCode"] == {"not_found": 2, "provider_rejected": 1}
    assert view["requests"]["byTransport"]["ws"] == {"total": 6, "errors": 1}
    # http: usage, the 404, the first scrape, the second scrape (this JSON request counts after it)
    assert view["requests"]["byTransport"]["http"] == {"total": 4, "errors": 1}
    assert view["requests"]["successRate"] == pytest.approx(8 / 10)
    assert view["turnDurationMs"]["count"] == 3 and view["timeToFirstTokenMs"]["count"] == 3
    assert view["connections"]["active"] == 1 and view["containers"] == {"active": 1, "windowS": 900}
    assert view["queue"] == {"depth": 0, "oldestAgeS": 0.0, "deadLetters": None}


async def test_a_tenant_sees_only_its_own_series_and_a_platform_admin_sees_all(world):
    h, tokens = world
    for tenant in ("tenant-a", "tenant-b"):
        c = await keyed_client(h, tokens[tenant])
        img = (await c.request("image_create", containerId="c", config={"name": tenant}))["record"]
        h.model.add(f"reply for {tenant}")
        await c.request("message_send", imageId=img["imageId"], content="hello")
        await h.run_turns()
    async with http(h, None) as anonymous:
        assert (await anonymous.get("/v1/metrics")).status_code == 401  # counted, with no tenant

    b = await scrape(h, tokens["tenant-b"])
    assert {dict(labels).get("tenant") for _, labels in b} == {"tenant-b"}  # nothing else, nothing global
    async with http(h, tokens["tenant-b"]) as client:
        view = (await client.get("/v1/metrics")).json()
        assert view["turns"]["total"] == 1 and view["tenantId"] == "tenant-b"
        assert view["queue"]["deadLetters"] is None
        # naming another tenant (or a made-up one) is refused the same way
        for other in ("tenant-a", "tenant-nobody"):
            refused = await client.get(f"/v1/metrics?tenant={other}")
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
        assert (await client.get("/v1/metrics?tenant=tenant-b")).json()["turns"]["total"] == 1

    platform = await scrape(h, tokens[h.rt.platform_tenant])
    tenants = {dict(labels).get("tenant") for _, labels in platform}
    assert {"tenant-a", "tenant-b", None} <= tenants
    assert value(platform, "avm_unauthenticated_requests_total", transport="http", code="unauthorized") == 1
    assert any(name.startswith("process_") for name, _ in platform)  # the process's own figures
    async with http(h, tokens[h.rt.platform_tenant]) as client:
        everyone = (await client.get("/v1/metrics")).json()
        one = (await client.get("/v1/metrics?tenant=tenant-a")).json()
    assert everyone["scope"] == "platform" and everyone["turns"]["total"] == 2
    assert everyone["errors"]["byCode"]["unauthorized"] == 1 and everyone["queue"]["deadLetters"] == 0
    assert (one["scope"], one["tenantId"], one["turns"]["total"]) == ("tenant", "tenant-a", 1)


async def test_bad_metrics_requests_get_stable_codes(world):
    h, tokens = world
    client_key = await new_key(h.rt, "tenant-a", "client")
    async with http(h, tokens["tenant-a"]) as client:
        for query, status, code in (
            ("format=xml", 400, "bad_request"),
            ("since=1000", 400, "unsupported_format"),  # the local host counts since it started
            ("format=prometheus&until=yesterday", 400, "unsupported_format"),
        ):
            r = await client.get(f"/v1/metrics?{query}")
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), query
        scraped = await client.get("/v1/metrics", headers={"Accept": "text/plain;version=0.0.4"})
        assert scraped.headers["content-type"].startswith("text/plain")
    async with http(h, client_key) as client:
        r = await client.get("/v1/metrics")
        assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")


def test_percentiles_interpolate_within_buckets_like_histogram_quantile():
    cumulative = [(0.5, 50.0), (1.0, 90.0), (2.0, 100.0), (float("inf"), 100.0)]
    assert _quantile(0.5, cumulative, 100) == 500.0
    assert _quantile(0.95, cumulative, 100) == 1500.0
    assert _quantile(0.7, cumulative, 100) == 750.0
    assert _quantile(0.5, [], 0) is None
    assert _quantile(0.99, [(1.0, 1.0), (float("inf"), 10.0)], 10) == 1000.0  # +Inf: the last bound


async def test_the_local_host_wires_prometheus_metrics(tmp_path):
    from agentvm.config import Settings
    from agentvm.hosts.local import local_runtime

    host = local_runtime(Settings(data_dir=tmp_path))
    try:
        assert isinstance(host.runtime.metrics, PrometheusMetrics)
    finally:
        host.queue.close()


def test_the_estimated_cost_uses_billings_list_prices():
    from agentvm.observability.pricing import list_price

    opus = list_price("anthropic/claude-opus-4-5")
    assert opus is not None
    assert estimated_cost_usd("anthropic/claude-opus-4-5-20251101", 1_000_000, 1_000_000) == pytest.approx(
        float(opus.input + opus.output)
    )
    assert estimated_cost_usd("openai/gpt-4o-mini", 2_000_000, 0) == pytest.approx(0.30)
    assert estimated_cost_usd("echo/echo-1", 10**6, 10**6) == 0.0
    assert estimated_cost_usd("acme/unknown", 10**6, 10**6) == pytest.approx(6.0)  # Haiku-class


def test_the_mcp_session_pool_shows_in_the_platform_exposition_only():
    figures = {"open": 3, "started": 5, "reused": 40, "crashed": 1, "closed_idle": 1, "evicted": 0}
    metrics = PrometheusMetrics(mcp_figures=lambda: figures, process_metrics=False)
    metrics.request("t1", "http", None)
    text = metrics.exposition(None)[0].decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["avm_mcp_sessions_open"].samples[0].value == 3
    events = {s.labels["event"]: s.value for s in families["avm_mcp_sessions"].samples}
    assert events == {"started": 5, "reused": 40, "crashed": 1, "closed_idle": 1, "evicted": 0}
    # process-wide, like the queue's dead jobs: not in a tenant's view
    assert "avm_mcp_sessions" not in metrics.exposition("t1")[0].decode()
    # before the first turn built the tools (no pool yet): no MCP families at all
    assert "avm_mcp" not in PrometheusMetrics(mcp_figures=lambda: None).exposition(None)[0].decode()
