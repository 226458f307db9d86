"""The config centre (``/v1/config``) on the local wiring: layered values with their source, a PUT
that changes the default model of the next turn without a restart, tenant values beating server
values, secrets write-only (never in a response, the audit or a log line), every bad key or value
refused with the key named and nothing written, and the audit log."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import asynccontextmanager

import httpx
import pytest

from agentvm.api.app import create_app
from agentvm.config import Settings
from agentvm.configcentre.centre import ConfigCentre, read_config_file
from agentvm.errors import InvalidConfig
from tests.harness import Harness
from tests.security_harness import ManualClock, new_key, secure

SECRET = "sk-live-config-centre-0123456789abcdef"


@pytest.fixture
async def world(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock())
    tokens = {t: await new_key(h.rt, t, "admin") for t in ("acme", "other", "platform")}
    tokens["acme-client"] = await new_key(h.rt, "acme", "client")

    @asynccontextmanager
    async def http(who: str = "acme"):
        transport = httpx.ASGITransport(app=create_app(h.rt))
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client

    h.http = http
    yield h
    h.queue.close()
    h.store.close()


async def _turn(h: Harness, tenant: str = "acme") -> str:
    client = await h.client(tenant)
    image = (await client.request("image_create", containerId="c", config={"name": "x"}))["record"]
    h.model.add("ok")
    await client.request("message_send", imageId=image["imageId"], content="hi")
    await h.run_turns()
    return h.model.requests[-1].model


async def test_a_put_changes_the_default_model_of_the_next_turn_without_a_restart(world):
    assert await _turn(world) == "test-1"  # the resolver's default
    async with world.http("platform") as http:
        answer = await http.put(
            "/v1/config/llm.defaultModel", json={"scope": "server", "value": "scripted/big"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["source"] == "server" and answer.json()["value"] == "scripted/big"
    assert await _turn(world) == "big"
    assert await _turn(world, "other") == "big"

    async with world.http("acme") as http:  # a tenant's own value beats the server's, for its turns only
        await http.put(
            "/v1/config", json={"values": {"llm.defaultModel": "scripted/acme", "llm.maxOutputTokens": 77}}
        )
        entry = (await http.get("/v1/config/llm.defaultModel")).json()
        assert (entry["value"], entry["source"]) == ("scripted/acme", "tenant")
    assert await _turn(world) == "acme" and world.model.requests[-1].max_tokens == 77
    assert await _turn(world, "other") == "big"

    async with world.http("acme") as http:  # null removes the tenant's value: the server's applies again
        await http.put("/v1/config/llm.defaultModel", json={"value": None})
    assert await _turn(world) == "big"


async def test_every_setting_says_where_its_value_came_from(tmp_path, world):
    (tmp_path / "config.json").write_text(json.dumps({"turns": {"historyWindow": 40}, "llm.timeoutS": 30}))
    settings = Settings(data_dir=tmp_path, max_output_tokens=512)  # as if from the environment
    centre = ConfigCentre(
        world.rt.config.store, settings, world.rt.clock, file_values=read_config_file(tmp_path), cache_s=0
    )
    world.rt.config = centre
    async with world.http("acme") as http:
        view = (await http.get("/v1/config")).json()["settings"]
    assert (view["turns.historyWindow"]["value"], view["turns.historyWindow"]["source"]) == (40, "file")
    assert (view["llm.timeoutS"]["value"], view["llm.timeoutS"]["source"]) == (30.0, "file")
    assert (view["llm.maxOutputTokens"]["value"], view["llm.maxOutputTokens"]["source"]) == (512, "env")
    assert (view["turns.deadlineS"]["value"], view["turns.deadlineS"]["source"]) == (600.0, "default")
    assert view["llm.maxOutputTokens"]["env"] == "AVM_MAX_OUTPUT_TOKENS"
    async with world.http("platform") as http:
        assert (await http.get("/v1/config")).json()["settings"]["llm.openai.apiKey"][
            "env"
        ] == "OPENAI_API_KEY"


async def test_a_tenant_admin_never_sees_the_platforms_markup_prices_or_providers(world):
    """Issue 25: the markup and the price overrides are the platform's (docs/config.md)."""
    prices = {"scripted/big": {"input": 0.1, "output": 0.2, "cacheRead": 0.01, "cacheWrite": 0.125}}
    async with world.http("platform") as http:
        answer = await http.put(
            "/v1/config",
            json={"scope": "server", "values": {"billing.markup": 1.37, "billing.prices": prices}},
        )
        assert answer.status_code == 200 and answer.json()["settings"]["billing.markup"]["value"] == 1.37
    private = {"billing.markup", "billing.prices", "llm.anthropic.apiKey", "llm.anthropic.baseUrl"}
    private |= {"llm.openai.apiKey", "llm.openai.baseUrl"}
    async with world.http("acme") as http:
        answers = [await http.get("/v1/config"), await http.get("/v1/config", params={"scope": "server"})]
        answers.append(await http.put("/v1/config", json={"values": {"llm.maxOutputTokens": 99}}))
        for answer in answers:
            assert answer.status_code == 200
            assert not private & set(answer.json()["settings"]) and "1.37" not in answer.text
        assert "turns.deadlineS" in answers[0].json()["settings"]  # what shapes its turns it still sees
        for name in private:
            refused = await http.get(f"/v1/config/{name}")
            assert refused.status_code == 403 and "platform" in refused.json()["error"]["message"]


def test_a_bad_config_file_stops_the_start_with_the_key_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"llm": {"maxOutputTokens": "lots"}}))
    with pytest.raises(InvalidConfig, match=r"llm\.maxOutputTokens"):
        read_config_file(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"llm.nope": 1}))
    with pytest.raises(InvalidConfig, match=r"llm\.nope: unknown setting"):
        read_config_file(tmp_path)


async def test_a_secret_set_through_the_api_is_never_shown_audited_or_logged(world, caplog):
    caplog.set_level(logging.DEBUG)
    async with world.http("platform") as http:
        put = await http.put("/v1/config", json={"scope": "server", "values": {"llm.openai.apiKey": SECRET}})
        one = await http.get("/v1/config/llm.openai.apiKey")
        everything = await http.get("/v1/config?scope=server")
        audit = await http.get("/v1/config/audit?scope=server")
        bad = await http.put("/v1/config", json={"scope": "server", "values": {"llm.openai.apiKey": 12345}})
    for response in (put, one, everything, audit, bad):
        assert SECRET not in response.text and "12345" not in response.text
    assert one.json()["value"] == "********" and one.json()["secret"] is True
    assert audit.json()["changes"][0]["new"] == "********"
    assert bad.status_code == 400 and bad.json()["error"]["key"] == "llm.openai.apiKey"
    assert SECRET not in caplog.text
    stored = await world.rt.config.store.get_values("server")
    assert SECRET not in stored.values["llm.openai.apiKey"]  # sealed (test_config_secrets_sealed.py)
    resolved = await world.rt.config.resolved(None)
    assert resolved["llm.openai.apiKey"] == (SECRET, "server")  # kept, for the provider client


@pytest.mark.parametrize(
    ("body", "key", "says"),
    [
        ({"values": {"llm.nope": 1}}, "llm.nope", "unknown setting"),
        ({"values": {"llm.maxOutputTokens": "many"}}, "llm.maxOutputTokens", "integer"),
        ({"values": {"llm.maxOutputTokens": 0}}, "llm.maxOutputTokens", "between 1 and"),
        ({"values": {"llm.maxOutputTokens": True}}, "llm.maxOutputTokens", "not a boolean"),
        ({"values": {"llm.defaultModel": "no-slash"}}, "llm.defaultModel", "provider/model"),
        ({"values": {"turns.historyWindow": 10}}, "turns.historyWindow", "whole server"),
        ({"values": {"llm.maxOutputTokens": 100, "turns.deadlineS": -1}}, "turns.deadlineS", "between"),
        ({"values": {}}, "values", "at least one"),
    ],
)
async def test_bad_keys_and_values_are_refused_with_the_key_named_and_nothing_written(world, body, key, says):
    async with world.http("acme") as http:
        answer = await http.put("/v1/config", json=body)
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert (error["code"], error["key"]) == ("invalid_config", key) and says in error["message"]
        assert (await http.get("/v1/config?scope=tenant")).json() == {"settings": {}}
        assert (await http.get("/v1/config/audit")).json() == {"changes": []}


async def test_server_settings_need_a_platform_admin_and_client_keys_see_nothing(world):
    async with world.http("acme") as http:
        refused = await http.put("/v1/config", json={"scope": "server", "values": {"turns.deadlineS": 5}})
        assert refused.status_code == 403
        assert (await http.get("/v1/config/audit?scope=server")).status_code == 403
    async with world.http("acme-client") as http:
        assert (await http.get("/v1/config")).status_code == 403
    assert (await world.rt.config.store.get_values("server")) is None


async def test_changes_are_audited_with_who_when_old_and_new(world):
    async with world.http("acme") as http:
        await http.put("/v1/config/llm.maxOutputTokens", json={"value": 100})
        await http.put("/v1/config/llm.maxOutputTokens", json={"value": 200})
        await http.put("/v1/config/llm.maxOutputTokens", json={"value": None})
        changes = (await http.get("/v1/config/audit")).json()["changes"]
    assert [(c["old"], c["new"]) for c in changes] == [(200, None), (100, 200), (None, 100)]
    assert all(c["by"] and c["scope"] == "tenant:acme" and c["at"] for c in changes)
    async with world.http("other") as http:
        assert (await http.get("/v1/config/audit")).json() == {"changes": []}
        assert (await http.get("/v1/config/llm.maxOutputTokens")).json()["source"] == "default"


class CountingConfigStore:
    """The local config store; counts the reads of each scope. While ``held`` is set, a read's
    answer (read at once) is held until it is cleared: a read that takes a while."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.reads: dict[str, int] = {}
        self.held: asyncio.Event | None = None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def get_values(self, scope: str):
        self.reads[scope] = self.reads.get(scope, 0) + 1
        values = await self.inner.get_values(scope)
        held = self.held
        if held is not None and (self.held_scopes is None or scope in self.held_scopes):
            if self.held_scopes is not None:
                self.held_scopes.discard(scope)  # the next read of it only
            await held.wait()
        return values

    def hold(self, *scopes: str) -> asyncio.Event:
        """Hold the reads from now on (of ``scopes``: the next one of each) until ``release``."""
        self.held, self.held_scopes = asyncio.Event(), set(scopes) if scopes else None
        return self.held

    def release(self) -> None:
        assert self.held is not None
        self.held.set()
        self.held = None


async def test_the_turns_of_a_batch_share_one_read_of_each_scope_per_cache_period(world):
    """A worker invocation starts its turns together: each scope is read once for all of them,
    and again once ``cache_s`` has passed; a value stored by another process meanwhile applies then."""
    clock = ManualClock()
    store = CountingConfigStore(world.rt.config.store)
    centre = ConfigCentre(store, Settings(), clock, cache_s=5)
    store.hold()  # the reads take a while: every turn asks before the first one answers
    turns = [asyncio.create_task(centre.runtime_for(world.rt, "acme")) for _ in range(10)]
    await asyncio.sleep(0.01)
    store.release()
    await asyncio.gather(*turns)
    assert store.reads == {"server": 1, "tenant:acme": 1}

    other_process = ConfigCentre(store.inner, Settings(), ManualClock(), cache_s=5)
    await other_process.set(
        {"llm.maxOutputTokens": 77}, tenant_id="acme", by="key_other", platform_admin=False
    )
    clock.advance(4.9)
    rt = await centre.runtime_for(world.rt, "acme")
    assert store.reads == {"server": 1, "tenant:acme": 1} and rt.turns.max_output_tokens != 77

    clock.advance(0.1)  # cache_s after the read started
    rt = await centre.runtime_for(world.rt, "acme")
    assert store.reads == {"server": 2, "tenant:acme": 2} and rt.turns.max_output_tokens == 77


async def test_a_put_applies_to_the_next_turn_even_while_an_older_read_is_under_way(world):
    clock = ManualClock()
    store = CountingConfigStore(world.rt.config.store)
    centre = ConfigCentre(store, Settings(), clock, cache_s=5)
    store.hold("tenant:acme")
    before = asyncio.create_task(centre.runtime_for(world.rt, "acme"))  # it reads before the PUT
    await asyncio.sleep(0.01)
    assert store.reads == {"server": 1, "tenant:acme": 1}
    clock.advance(0.01)

    await centre.set({"llm.maxOutputTokens": 77}, tenant_id="acme", by="key_admin", platform_admin=False)
    store.release()  # the older read answers after the PUT, with what it read before it
    await before

    rt = await centre.runtime_for(world.rt, "acme")  # not the value the older read found
    assert rt.turns.max_output_tokens == 77


async def test_a_tenant_can_turn_prompt_caching_off_for_its_turns(world):
    await _turn(world)
    assert world.model.requests[-1].prompt_caching is True  # on by default
    async with world.http("acme") as http:
        answer = await http.put("/v1/config/llm.promptCaching", json={"value": False})
        assert answer.status_code == 200, answer.text
    await _turn(world)
    assert world.model.requests[-1].prompt_caching is False
    await _turn(world, "other")
    assert world.model.requests[-1].prompt_caching is True
