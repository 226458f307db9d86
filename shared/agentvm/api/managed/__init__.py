"""Anthropic's Managed Agents API at ``/anthropic/v1/...`` (docs/managed-agents.md): ``routes`` (the
router: ``agents``, ``environments``, ``sessions``, ``events`` joined), ``inputs`` (what a sent event
does), ``mapping`` (the API's shapes onto AgentVM's, no HTTP), ``documents`` (agents, environments
and sessions as versioned resources), ``errors`` (the API's error shape), ``common`` (auth, paging)."""

from agentvm.api.managed.routes import router, served_routes

__all__ = ["router", "served_routes"]
