"""The resource centre (docs/resources.md): versioned, tenant-owned resources (agents, prompts,
tools, MCP servers, knowledge) by URI, their kinds and validation, building an image from an agent
definition, and knowledge search with its tool.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.resources.build import (
        BUILT_FIELDS,
        Build,
        build_agent,
        build_into,
        dependent_of,
        edges_of,
        move_edges,
    )
    from agentvm.resources.centre import (
        Resolved,
        ResourceCentre,
        head_wire,
        search_version,
        version_wire,
    )
    from agentvm.resources.kinds import (
        FILE_TYPES,
        SPECS,
        dependencies,
        render,
        validate_spec,
    )
    from agentvm.resources.knowledge_tool import (
        KnowledgeSearchTool,
        KnowledgeToolDecl,
        knowledge_tools,
        tool_name,
    )
    from agentvm.resources.locator import (
        LOCAL,
        TYPES,
        Locator,
        RegistryType,
        format_locator,
        manifest_parts,
        parse_locator,
        registry_type,
        type_of,
    )
    from agentvm.resources.search import (
        Bm25,
        Hit,
        cached_index,
        chunk_documents,
        tokens,
    )
    from agentvm.resources.uri import (
        KINDS,
        LATEST,
        ResourceRef,
        check_kind,
        check_name,
        check_tag,
        check_version,
        is_version,
        parse,
    )

__all__ = [
    "BUILT_FIELDS",
    "Bm25",
    "Build",
    "FILE_TYPES",
    "Hit",
    "KINDS",
    "KnowledgeSearchTool",
    "KnowledgeToolDecl",
    "LATEST",
    "LOCAL",
    "Locator",
    "RegistryType",
    "Resolved",
    "ResourceCentre",
    "ResourceRef",
    "SPECS",
    "TYPES",
    "build_agent",
    "build_into",
    "cached_index",
    "check_kind",
    "check_name",
    "check_tag",
    "check_version",
    "chunk_documents",
    "dependencies",
    "dependent_of",
    "edges_of",
    "format_locator",
    "head_wire",
    "is_version",
    "knowledge_tools",
    "manifest_parts",
    "move_edges",
    "parse",
    "parse_locator",
    "registry_type",
    "render",
    "search_version",
    "tokens",
    "tool_name",
    "type_of",
    "validate_spec",
    "version_wire",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "build": [
            "BUILT_FIELDS",
            "Build",
            "build_agent",
            "build_into",
            "dependent_of",
            "edges_of",
            "move_edges",
        ],
        "centre": [
            "Resolved",
            "ResourceCentre",
            "head_wire",
            "search_version",
            "version_wire",
        ],
        "kinds": [
            "FILE_TYPES",
            "SPECS",
            "dependencies",
            "render",
            "validate_spec",
        ],
        "knowledge_tool": [
            "KnowledgeSearchTool",
            "KnowledgeToolDecl",
            "knowledge_tools",
            "tool_name",
        ],
        "locator": [
            "LOCAL",
            "Locator",
            "RegistryType",
            "TYPES",
            "format_locator",
            "manifest_parts",
            "parse_locator",
            "registry_type",
            "type_of",
        ],
        "search": [
            "Bm25",
            "Hit",
            "cached_index",
            "chunk_documents",
            "tokens",
        ],
        "uri": [
            "KINDS",
            "LATEST",
            "ResourceRef",
            "check_kind",
            "check_name",
            "check_tag",
            "check_version",
            "is_version",
            "parse",
        ],
    },
)
