"""Anthropic's Managed Agents API at ``/anthropic/v1/...`` (docs/managed-agents.md): the official
``anthropic`` SDK, with ``base_url=<server>/anthropic`` and an AgentVM key, runs against AgentVM.

Thin handlers over what exists: agents and environments are versioned documents of the resource
centre (``managed.documents``); a session is an AgentVM image and its session in the container
named after the environment, configured from the agent version (``managed.mapping.image_config``);
``user.message`` is ``turns.submit.send_message``; ``user.interrupt`` the existing interrupt;
``user.tool_confirmation`` and ``user.custom_tool_result`` answer the turn's waits
(``turns.waits.answer``); the event stream is the session's frames through the same subscriber feed
as the plain-HTTP SSE routes (``api/http_turns.py``), mapped to session events, resumable with
``Last-Event-ID``. Errors are in the API's own shape (``managed.errors``).

One module per resource: ``agents``, ``environments``, ``sessions``, ``events`` (their routes),
``inputs`` (what a sent event does), ``common`` (auth, paging, filters); this module joins them
under ``/anthropic/v1`` and answers every other path as not served.

Auth: ``x-api-key`` or ``Authorization: Bearer`` with an AgentVM key (any scope); the tenant is the
key's, and another tenant's ids answer exactly like missing ones.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.routing import APIRoute

from agentvm.api.managed import agents, environments, events, sessions
from agentvm.api.managed.common import Caller, managed_router
from agentvm.api.managed.errors import NotServed

# Not in /openapi.json: the contract is Anthropic's published API (docs/managed-agents.md lists each
# route, served, mapped or not; tests/unit/api/test_managed_agents.py keeps that list whole).
PREFIX = "/anthropic/v1"
DOMAINS = (agents, environments, sessions, events)
router = APIRouter(prefix=PREFIX, include_in_schema=False)
for _domain in DOMAINS:
    router.include_router(_domain.router)
unserved = managed_router()


# -- what is not served ----------------------------------------------------------------------------
@unserved.api_route(
    "/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
)
async def not_served(rest: str, caller: Caller) -> None:
    """Every other path of the API (files, skills, vaults, memory stores, deployments, ...)."""
    raise NotServed(f"/v1/{rest} is not served by AgentVM (docs/managed-agents.md lists what is)")


router.include_router(unserved)  # last: every path the others do not match


def served_routes() -> list[tuple[str, str]]:
    """``(method, path)`` of every route served (what the docs table and the attack suite cover)."""
    return sorted(
        (method, PREFIX + route.path)
        for domain in DOMAINS
        for route in domain.router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    )


__all__ = ["router", "served_routes"]
