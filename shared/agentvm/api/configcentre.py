"""The config centre over HTTP: ``/v1/config`` (``agentvm.configcentre``).

Admin keys only. ``GET`` shows each setting's value for the caller's tenant and where it came from
(``default``, ``file``, ``env``, ``server``, ``tenant``); secrets are masked. The platform's own
settings (its markup, prices and providers) only a platform admin sees. ``PUT`` with
``"scope": "tenant"`` (the default) sets values for the caller's tenant (keys marked
``tenantSettable``); ``"scope": "server"`` sets them for the whole server and needs a platform admin
(an admin key of the platform tenant, ``AVM_PLATFORM_TENANT``). ``null`` removes a value set
through the API. A PUT is checked whole before anything is written: one bad key or value and
nothing changes, and the error names the key (``invalid_config``, with ``key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok, stated
from agentvm.configcentre.centre import SERVER, tenant_scope
from agentvm.configcentre.keys import KEYS
from agentvm.configcentre.keys import key as setting
from agentvm.errors import Forbidden, NotFound

if TYPE_CHECKING:
    from agentvm.ports import ConfigLayers
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

Scope = Literal["tenant", "server"]
# A setting's name: one of the catalogue's; another is refused by setting() (invalid_config, naming it).
SettingName = Annotated[str, stated(enum=list(KEYS))]

# Real answers of a test server, for the documented examples.
_MODEL = {
    "key": "llm.defaultModel",
    "value": "anthropic/claude-haiku-4-5",
    "source": "tenant",
    "secret": False,
    "tenantSettable": True,
    "env": "AVM_DEFAULT_MODEL",
    "description": "the model of images that name none: provider/model",
}
_MAX_TOKENS = {
    "key": "llm.maxOutputTokens",
    "value": 2048,
    "source": "tenant",
    "secret": False,
    "tenantSettable": True,
    "env": "AVM_MAX_OUTPUT_TOKENS",
    "description": "output tokens per model call",
}
_OPENAI_KEY = {
    "key": "llm.openai.apiKey",
    "value": "********",
    "source": "server",
    "secret": True,
    "tenantSettable": False,
    "env": "OPENAI_API_KEY",
    "description": "OpenAI API key",
}
_DEADLINE = {
    "key": "turns.deadlineS",
    "value": 600.0,
    "source": "default",
    "secret": False,
    "tenantSettable": True,
    "env": "AVM_TURN_DEADLINE_S",
    "description": "seconds a whole turn may take (0 = none)",
}
_SETTINGS = {"settings": {e["key"]: e for e in (_MODEL, _MAX_TOKENS, _OPENAI_KEY, _DEADLINE)}}
_AUDIT = {
    "changes": [
        {
            "scope": "tenant:acme",
            "key": "llm.maxOutputTokens",
            "old": 2048,
            "new": 4096,
            "by": "kjkjdzxqrzfv",
            "at": 1795603949383,
        },
        {
            "scope": "tenant:acme",
            "key": "llm.defaultModel",
            "old": None,
            "new": "anthropic/claude-haiku-4-5",
            "by": "kjkjdzxqrzfv",
            "at": 1795603949378,
        },
    ]
}


class PutValues(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"scope": "tenant", "values": {"llm.defaultModel": "anthropic/claude-haiku-4-5"}},
            {"scope": "server", "values": {"llm.openai.apiKey": "sk-...", "turns.deadlineS": 300}},
        ),
    )

    scope: Scope = "tenant"
    values: dict[str, Any] = Field(description="setting -> value; null removes the value set through the API")


class PutValue(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=examples({"value": 2048}, {"value": None, "scope": "server"})
    )

    scope: Scope = "tenant"
    value: Any = Field(description="the value; null removes the value set through the API")


router = APIRouter(prefix="/config", tags=["config"])


def centre(runtime: Runtime) -> ConfigLayers:
    if runtime.config is None:
        raise NotFound("this server has no config centre")
    return runtime.config


def platform_admin(runtime: Runtime, principal: Principal) -> bool:
    """An admin key of the platform tenant, or the open dev mode (no keys: the developer)."""
    return runtime.auth is None or principal.tenant_id == runtime.platform_tenant


def visible(
    runtime: Runtime, principal: Principal, settings: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """A tenant's admin sees every setting but the platform's own (its markup, prices and
    providers: ``Key.platform``)."""
    if platform_admin(runtime, principal):
        return settings
    return {name: entry for name, entry in settings.items() if not KEYS[name].platform}


async def write(runtime: Runtime, caller: Principal, scope: Scope, values: dict[str, Any]) -> dict[str, Any]:
    principal = admin(caller)
    if scope == SERVER and not platform_admin(runtime, principal):
        raise Forbidden("server settings need a platform admin key (an admin key of the platform tenant)")
    return await centre(runtime).set(
        values,
        tenant_id=None if scope == SERVER else principal.tenant_id,
        by=principal.key_id,
        platform_admin=platform_admin(runtime, principal),
        check_model=runtime.models.resolve,
    )


@router.get(
    "",
    response_model=None,
    responses={**ok(200, "ConfigSettings", _SETTINGS, "the settings"), **error_responses(400)},
)
async def get_all(runtime: RuntimeDep, caller: Caller, scope: Scope | None = None) -> dict[str, Any]:
    """Every setting's effective value for the caller's tenant and its source; with ``scope``,
    only the values set through the API for the tenant or the server."""
    principal = admin(caller)
    return {"settings": visible(runtime, principal, await centre(runtime).view(principal.tenant_id, scope))}


@router.put(
    "",
    response_model=None,
    responses={**ok(200, "ConfigSettings", _SETTINGS, "the new effective settings"), **error_responses(400)},
)
async def put_all(runtime: RuntimeDep, caller: Caller, body: PutValues) -> dict[str, Any]:
    """Set several values at once (all or nothing); the answer is the new effective view."""
    return {
        "settings": visible(runtime, admin(caller), await write(runtime, caller, body.scope, body.values))
    }


@router.get(
    "/audit",
    response_model=None,
    responses={**ok(200, "ConfigChanges", _AUDIT, "the changes"), **error_responses(400)},
)
async def audit(
    runtime: RuntimeDep,
    caller: Caller,
    scope: Scope = "tenant",
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    """Changes made through the API, newest first: who (API key id), when, old -> new (secrets
    shown as ``********``). The server's log needs a platform admin."""
    principal = admin(caller)
    if scope == SERVER and not platform_admin(runtime, principal):
        raise Forbidden("the server's audit log needs a platform admin key")
    name = SERVER if scope == SERVER else tenant_scope(principal.tenant_id)
    return {"changes": [c.model_dump() for c in await centre(runtime).changes(name, limit)]}


@router.get(
    "/{key}",
    response_model=None,
    responses={**ok(200, "ConfigSetting", _MODEL, "the setting"), **error_responses(400)},
)
async def get_one(runtime: RuntimeDep, caller: Caller, key: SettingName) -> dict[str, Any]:
    """One setting: its effective value for the caller's tenant, and its source."""
    principal = admin(caller)
    setting(key)  # unknown: invalid_config naming it
    if KEYS[key].platform and not platform_admin(runtime, principal):
        raise Forbidden(f"{key} is the platform's: only a platform admin sees it")
    return (await centre(runtime).view(principal.tenant_id))[key]


@router.put(
    "/{key}",
    response_model=None,
    responses={
        **ok(200, "ConfigSetting", {**_MAX_TOKENS, "value": 4096}, "its new effective entry"),
        **error_responses(400),
    },
)
async def put_one(runtime: RuntimeDep, caller: Caller, key: SettingName, body: PutValue) -> dict[str, Any]:
    """Set (or with ``null`` remove) one value; the answer is its new effective entry."""
    return (await write(runtime, caller, body.scope, {key: body.value}))[key]


__all__ = ["router"]
