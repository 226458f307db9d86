"""Anthropic's Managed Agents API at ``/anthropic/v1/...`` (docs/managed-agents.md): ``routes`` (the
FastAPI router), ``mapping`` (the API's shapes onto AgentVM's, no HTTP), ``documents`` (agents,
environments and sessions as versioned resources), ``errors`` (the API's error shape)."""

from agentvm.api.managed.routes import router

__all__ = ["router"]
