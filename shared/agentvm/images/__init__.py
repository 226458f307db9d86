"""Images, the application service: an image's config, its lifecycle (create, built from an agent
resource, update, rebuild, delete), its agent (start/stop), its container, and lookups.

Use cases of ``(rt: Runtime, tenant_id: str, …)`` that the WebSocket commands (``gateway``), the
HTTP routes (``api``), sessions and the CLI call; nothing here knows a protocol.
"""

from agentvm.images.agents import start_agent, stop_agent
from agentvm.images.built import create_built, rebuild
from agentvm.images.config import DEFAULT_IMAGE_NAME, ImageConfig, check_built, check_tool_sources, tool_decls
from agentvm.images.containers import ensure_container
from agentvm.images.lifecycle import create, delete, update
from agentvm.images.lookup import image_by_agent, image_for, image_of

__all__ = [
    "DEFAULT_IMAGE_NAME",
    "ImageConfig",
    "check_built",
    "check_tool_sources",
    "create",
    "create_built",
    "delete",
    "ensure_container",
    "image_by_agent",
    "image_for",
    "image_of",
    "rebuild",
    "start_agent",
    "stop_agent",
    "tool_decls",
    "update",
]
