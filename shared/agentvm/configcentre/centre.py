"""The config centre: one settings tree (``configcentre.keys``), layered, applied without a restart.

Layers, lowest first: the built-in default (``Settings``) < the config file ``<data dir>/config.json``
(local host; read at start) < the environment < values set through the API for the server < values
set through the API for a tenant (keys that allow it). Every value says which layer it came from.

**Applying.** A turn takes its settings from ``runtime_for(rt, tenant)``: the runtime with the file
and API layers laid over what was read at start (turn settings, the default model, the provider
settings). The values set through the API are read from the store at most once per
``cache_s`` per process (``AVM_CONFIG_CACHE_S``, 5 s, on the runtime's clock): the process that served
a PUT applies it at its next turn, every other process (another Lambda execution environment,
another ``avm serve``) within ``cache_s``. The turns that start while a scope is being read share
that read (a worker invocation's batch starts its turns together): on AWS at most two strongly
consistent GetItems (``CFG#server``, ``CFG#tenant:<t>``) per ``cache_s`` per environment, 1 RRU each.

**Secrets** (provider API keys) are write-only: shown masked, never returned, logged or audited.
They reach the config store sealed (``configcentre.sealing``: AES-GCM under a key derived from the
server secret, which is not in the store), and are opened when read; a host that gives the centre
no ``sealer`` refuses them (AWS: provider keys live in the SSM parameter there).

**Audit.** Each change is recorded with who (the API key), when, old -> new (secrets as
``"********"``), and readable at ``GET /v1/config/audit``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any, Literal

from agentvm.configcentre.keys import KEYS, MASK, MODEL_KEYS, check, key
from agentvm.configcentre.sealing import SecretUnreadable, is_sealed
from agentvm.errors import Conflict, Forbidden, InvalidConfig
from agentvm.records import ConfigChange, ConfigValues

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from agentvm.config import Settings
    from agentvm.configcentre.sealing import SecretSealer
    from agentvm.ports import Clock, ConfigStore
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.config")

Source = Literal["default", "file", "env", "server", "tenant"]
SERVER = "server"
CONFIG_FILE = "config.json"
_WRITE_ATTEMPTS = 5
# Settings fields a turn reads through ``rt.turns`` (TurnSettings field names).
_TURN_FIELDS = {
    "llm.maxOutputTokens": "max_output_tokens",
    "llm.promptCaching": "prompt_caching",
    "turns.deadlineS": "turn_deadline_s",
    "turns.historyWindow": "history_window",
    "turns.historyWindowStep": "history_window_step",
    "turns.replyCache": "reply_cache",
    "compaction.thresholdTokens": "compaction_threshold_tokens",
    "compaction.model": "compaction_model",
    "sessions.autoTitle": "auto_title",
    "sessions.titleModel": "title_model",
    "streaming.cadence": "stream_cadence",
}
_PROVIDER_KEYS = (
    "llm.timeoutS",
    "llm.anthropic.apiKey",
    "llm.anthropic.baseUrl",
    "llm.openai.apiKey",
    "llm.openai.baseUrl",
)


def tenant_scope(tenant_id: str) -> str:
    return f"tenant:{tenant_id}"


def read_config_file(data_dir: Path) -> dict[str, Any]:
    """``<data_dir>/config.json``: ``{"llm.defaultModel": "...", ...}`` (or nested objects), checked
    now: an unknown key or a bad value stops the start with the key named."""
    path = data_dir / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidConfig(f"{path}: not readable JSON ({exc})", key=str(path)) from None
    if not isinstance(raw, dict):
        raise InvalidConfig(f"{path}: must be a JSON object of settings", key=str(path))
    return {name: check(name, value) for name, value in _flatten(raw).items()}


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in tree.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict) and dotted not in KEYS:
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


class ConfigCentre:
    def __init__(
        self,
        store: ConfigStore,
        settings: Settings,
        clock: Clock,
        *,
        file_values: Mapping[str, Any] | None = None,
        cache_s: float = 5.0,
        sealer: SecretSealer | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.file_values = dict(file_values or {})
        self.cache_s = cache_s
        self.sealer = sealer  # None: secrets are refused here
        self._env_fields = set(settings.model_fields_set)
        self._cache: dict[str, tuple[float, ConfigValues | None]] = {}
        # the read of a scope under way, per event loop (``_read``)
        self._reading: dict[
            tuple[asyncio.AbstractEventLoop, str], tuple[float, asyncio.Task[ConfigValues | None]]
        ] = {}
        self._provider_applied: tuple[Any, ...] | None = None

    # -- reading ------------------------------------------------------------------------------
    async def _values(self, scope: str) -> dict[str, Any]:
        cached = self._cache.get(scope)
        now = self.clock.monotonic()
        if cached is None or cached[0] <= now:
            started, record = await self._read(scope, now)
            # valid for cache_s from when the read started (a change after that: at most cache_s),
            # unless what is cached now was stored after it started (this process's PUT)
            cached = self._cache.get(scope)
            if cached is None or cached[0] < started + self.cache_s:
                self._cache[scope] = cached = (started + self.cache_s, record)
        return dict(cached[1].values) if cached[1] is not None else {}

    async def _read(self, scope: str, now: float) -> tuple[float, ConfigValues | None]:
        """One read of ``scope`` for every turn that asks while it is under way (the turns of a
        worker invocation start together, and used to read the same items once each); returns
        when it started, and what it read."""
        loop = asyncio.get_running_loop()
        key = (loop, scope)
        reading = self._reading.get(key)
        if reading is None:
            task = loop.create_task(self._get_opened(scope))
            reading = self._reading[key] = (now, task)
            task.add_done_callback(lambda done: self._forget_read(key, done))
        started, task = reading
        return started, await asyncio.shield(task)  # a turn cancelled meanwhile leaves the others' read

    def _forget_read(self, key: tuple[asyncio.AbstractEventLoop, str], done: asyncio.Task[Any]) -> None:
        if key in self._reading and self._reading[key][1] is done:
            del self._reading[key]

    async def _get_opened(self, scope: str) -> ConfigValues | None:
        """The stored values of ``scope`` with their secrets opened."""
        record = await self.store.get_values(scope)
        if record is None or self.sealer is None:
            return record
        values = dict(record.values)
        for name, value in record.values.items():
            if name in KEYS and KEYS[name].secret and isinstance(value, str):
                try:
                    values[name] = self.sealer.open(name, value)
                except SecretUnreadable:
                    log.warning(
                        "a stored secret setting opens with neither server secret; treated as unset",
                        extra={"key": name, "scope": scope},
                    )
                    values.pop(name)
        return record.model_copy(update={"values": values})

    def _sealed(self, record: ConfigValues) -> ConfigValues:
        """``record`` as it is stored: every secret sealed (``self.sealer`` is set when any is there)."""
        values = dict(record.values)
        for name, value in record.values.items():
            if name in KEYS and KEYS[name].secret and isinstance(value, str):
                assert self.sealer is not None  # set() refuses secrets without one
                values[name] = self.sealer.seal(name, value)
        return record.model_copy(update={"values": values})

    async def seal_stored_secrets(self) -> list[str]:
        """Seal the secrets an older version stored in plaintext (secrets are server settings
        only); returns their names. ``avm serve`` calls this at start."""
        if self.sealer is None:
            return []
        for _ in range(_WRITE_ATTEMPTS):
            stored = await self.store.get_values(SERVER)
            if stored is None:
                return []
            plain = sorted(
                n
                for n, v in stored.values.items()
                if n in KEYS and KEYS[n].secret and isinstance(v, str) and not is_sealed(v)
            )
            if not plain:
                return []
            opened = await self._get_opened(SERVER)
            assert opened is not None
            record = opened.model_copy(update={"version": stored.version + 1})
            if await self.store.put_values(self._sealed(record), []):
                self._cache.pop(SERVER, None)
                log.warning(
                    "sealed secret settings an older version stored in plaintext", extra={"keys": plain}
                )
                return plain
        raise Conflict("the settings are being changed by someone else; try again")

    def _base(self, name: str) -> tuple[Any, Source]:
        k = KEYS[name]
        if k.field in self._env_fields:
            value = getattr(self.settings, k.field)
            return (value.get_secret_value() if hasattr(value, "get_secret_value") else value), "env"
        if name in self.file_values:
            return self.file_values[name], "file"
        field = type(self.settings).model_fields[k.field]
        return field.get_default(call_default_factory=True), "default"

    async def resolved(self, tenant_id: str | None) -> dict[str, tuple[Any, Source]]:
        """Every key's value for ``tenant_id``'s turns (None: the server's), and its layer."""
        server = await self._values(SERVER)
        tenant = await self._values(tenant_scope(tenant_id)) if tenant_id is not None else {}
        out: dict[str, tuple[Any, Source]] = {}
        for name, k in KEYS.items():
            if k.tenant and name in tenant:
                out[name] = (tenant[name], "tenant")
            elif name in server:
                out[name] = (server[name], "server")
            else:
                out[name] = self._base(name)
        return out

    async def view(self, tenant_id: str | None, scope: str | None = None) -> dict[str, dict[str, Any]]:
        """What ``GET /v1/config`` shows: value (secrets masked), source, and what may set it.
        ``scope`` ``"server"``/``"tenant"``: only the values set through the API at that scope."""
        resolved = await self.resolved(tenant_id)
        if scope == SERVER:
            stored = await self._values(SERVER)
            resolved = {n: (v, "server") for n, v in stored.items()}
        elif scope == "tenant" and tenant_id is not None:
            stored = await self._values(tenant_scope(tenant_id))
            resolved = {n: (v, "tenant") for n, v in stored.items() if KEYS[n].tenant}
        return {name: self.entry(name, *resolved[name]) for name in KEYS if name in resolved}

    def entry(self, name: str, value: Any, source: Source) -> dict[str, Any]:
        k = KEYS[name]
        shown = (MASK if value is not None else None) if k.secret else value
        return {
            "key": name,
            "value": shown,
            "source": source,
            "secret": k.secret,
            "tenantSettable": k.tenant,
            "env": k.env_name,
            "description": k.description,
        }

    async def changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        return await self.store.list_changes(scope, limit)

    # -- writing ------------------------------------------------------------------------------
    async def set(
        self,
        changes: Mapping[str, Any],
        *,
        tenant_id: str | None,
        by: str | None,
        platform_admin: bool,
        check_model: Callable[[str], object] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Set (or, with None, remove) API values: for ``tenant_id``'s tenant, or the server's
        (``tenant_id`` None: platform admins only). All keys are checked before anything is written;
        ``check_model`` (the runtime's model resolver) refuses a model whose provider is unknown."""
        if not changes:
            raise InvalidConfig("values: give at least one setting", key="values")
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            k = key(name)
            if tenant_id is not None and not k.tenant:
                raise InvalidConfig(f"{name}: can only be set for the whole server (scope server)", key=name)
            if k.secret and value is not None and self.sealer is None:
                raise InvalidConfig(
                    f"{name}: secrets cannot be set through the API on this host; "
                    "put provider keys in the SSM parameter AVM_PROVIDER_KEYS_PARAMETER names",
                    key=name,
                )
            checked[name] = check(name, value)
            if name in MODEL_KEYS and checked[name] and check_model:
                try:
                    check_model(checked[name])
                except Exception as exc:
                    raise InvalidConfig(f"{name}: {getattr(exc, 'message', exc)}", key=name) from None
        if tenant_id is None and not platform_admin:
            raise Forbidden("server settings need a platform admin key (an admin key of the platform tenant)")
        scope = SERVER if tenant_id is None else tenant_scope(tenant_id)
        for _ in range(_WRITE_ATTEMPTS):
            current = await self._get_opened(scope)
            values = dict(current.values) if current is not None else {}
            audit = []
            now = self.clock.now_ms()
            for name, value in checked.items():
                old = values.get(name)
                if value is None:
                    values.pop(name, None)
                else:
                    values[name] = value
                if old != value:
                    audit.append(
                        ConfigChange(
                            scope=scope,
                            key=name,
                            old=_elide(name, old),
                            new=_elide(name, value),
                            by=by,
                            at=now,
                        )
                    )
            record = ConfigValues(
                scope=scope, values=values, version=(current.version if current else 0) + 1, updatedAt=now
            )
            if await self.store.put_values(self._sealed(record), audit):
                self._cache[scope] = (self.clock.monotonic() + self.cache_s, record)
                for reading in [k for k in self._reading if k[1] == scope]:  # started before it
                    self._reading.pop(reading, None)
                for change in audit:
                    log.info(
                        "setting changed",
                        extra={
                            "key": change.key,
                            "scope": scope,
                            "by": by,
                            "old": change.old,
                            "new": change.new,
                        },
                    )
                return await self.view(tenant_id)
        raise Conflict("the settings are being changed by someone else; try again")

    # -- applying -----------------------------------------------------------------------------
    async def runtime_for(self, rt: Runtime, tenant_id: str) -> Runtime:
        """``rt`` with the file and API layers applied for ``tenant_id``'s turn (``rt`` itself when
        nothing is set beyond the environment)."""
        resolved = await self.resolved(tenant_id)
        layered = {
            name: value
            for name, (value, source) in resolved.items()
            if source in ("file", "server", "tenant")
        }
        self._apply_providers(rt, resolved)
        if not layered:
            return rt
        updates: dict[str, Any] = {}
        turn_updates = {_TURN_FIELDS[n]: v for n, v in layered.items() if n in _TURN_FIELDS}
        if turn_updates:
            updates["turns"] = dataclasses.replace(rt.turns, **turn_updates)
        if "llm.defaultModel" in layered:
            updates["models"] = DefaultModelResolver(rt.models, layered["llm.defaultModel"])
        return dataclasses.replace(rt, **updates) if updates else rt

    def _apply_providers(self, rt: Runtime, resolved: Mapping[str, tuple[Any, Source]]) -> None:
        """Provider keys, URLs and timeout are the server's: the model resolver is reconfigured
        (its clients made again) when they change."""
        current = tuple((n, resolved[n][0]) for n in _PROVIDER_KEYS if resolved[n][1] in ("file", "server"))
        if current == (self._provider_applied or ()):
            return
        reconfigure = getattr(rt.models, "reconfigure", None)
        if reconfigure is None:
            return
        updates = {KEYS[n].field: v for n, v in current}
        reconfigure(self.settings.model_copy(update=_as_settings(updates)))
        self._provider_applied = current


def _as_settings(updates: dict[str, Any]) -> dict[str, Any]:
    from pydantic import SecretStr

    return {f: SecretStr(v) if f.endswith("api_key") else v for f, v in updates.items()}


def _elide(name: str, value: Any) -> Any:
    return (MASK if value is not None else None) if KEYS[name].secret else value


class DefaultModelResolver:
    """A ``ModelResolver`` whose default (for images that name no model) is the config centre's."""

    def __init__(self, inner: Any, default: str) -> None:
        self._inner = inner
        self.default = default

    def resolve(self, ref: str | None) -> Any:
        return self._inner.resolve(ref or self.default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


__all__ = ["SERVER", "ConfigCentre", "DefaultModelResolver", "read_config_file", "tenant_scope"]
