"""Ports of the config centre and the resource centre (``agentvm.configcentre``, ``agentvm.resources``).

Their stores (``ConfigStore``, ``ResourceStore``), implemented by adapters, and what the runtime
holds of each centre (``ConfigCentre``, ``ResourceCentre``), implemented by the centres themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from agentvm.config import Settings
    from agentvm.ports.clock import Clock
    from agentvm.ports.knowledge import KnowledgeIndex
    from agentvm.records import ConfigChange, ConfigValues, ResourceHead, ResourceVersion


class ConfigStore(Protocol):
    """The config centre's values set through the API, one record per scope, and its audit log."""

    async def get_values(self, scope: str) -> ConfigValues | None: ...
    async def put_values(self, values: ConfigValues, changes: Sequence[ConfigChange]) -> bool:
        """Store ``values`` (whose ``version`` is one more than the stored one's, or 1 for a new
        scope) and append ``changes`` to the audit log; False if another write came first."""
        ...

    async def list_changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        """The scope's audit log, newest first."""
        ...


class ResourceStore(Protocol):
    """The resource centre's versions, heads (by name) and dependency edges, per tenant.

    An edge says "``dependent`` refers to ``(tenant, kind, name)`` with ``selector``" (a version,
    ``latest`` or a tag); ``dependent`` is ``"<tenant>|<uri>"`` of the referring version.
    """

    async def create_version(self, version: ResourceVersion) -> bool:
        """Create if absent (versions are immutable). True if this call created it."""
        ...

    async def get_version(
        self, tenant_id: str, kind: str, name: str, version: str
    ) -> ResourceVersion | None: ...
    async def list_versions(self, tenant_id: str, kind: str, name: str) -> list[ResourceVersion]:
        """Oldest first (by ``seq``)."""
        ...

    async def delete_version(self, tenant_id: str, kind: str, name: str, version: str) -> None: ...
    async def put_head(self, head: ResourceHead, *, force: bool = False) -> bool:
        """Store unless a head with a higher ``seq`` is stored (a later publish won); ``force``:
        always (after a delete). True if stored."""
        ...

    async def get_head(self, tenant_id: str, kind: str, name: str) -> ResourceHead | None: ...
    async def delete_head(self, tenant_id: str, kind: str, name: str) -> None: ...
    async def list_heads(self, tenant_id: str, kind: str | None = None) -> list[ResourceHead]:
        """By kind, then name."""
        ...

    async def add_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        """``targets``: (tenant, kind, name, selector) the dependent refers to."""
        ...

    async def remove_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None: ...
    async def dependents(self, tenant_id: str, kind: str, name: str) -> list[tuple[str, str]]:
        """(dependent, selector) of every edge to the named resource."""
        ...


# What the runtime holds of each centre (``Runtime.config``, ``Runtime.resources``). Values of the
# centres themselves (``ResourceRef``, ``Resolved``, ``Source``, the ``Runtime``) are ``Any`` here:
# ports sit below them.


class Sealer(Protocol):
    """Seals and opens secrets under a name (``configcentre.sealing.SecretSealer``): the name is
    bound to the sealed value, so a value moved under another name does not open."""

    def seal(self, name: str, value: str) -> str: ...
    def open(self, name: str, stored: str) -> str: ...


class ConfigLayers(Protocol):
    """Layered settings applied per turn (``configcentre.centre.ConfigCentre``)."""

    store: ConfigStore
    settings: Settings

    @property
    def sealer(self) -> Sealer | None:
        """None: this host seals no secrets (they are refused)."""
        ...

    async def seal_stored_secrets(self) -> list[str]: ...
    async def resolved(self, tenant_id: str | None) -> dict[str, tuple[Any, Any]]: ...
    async def view(self, tenant_id: str | None, scope: str | None = None) -> dict[str, dict[str, Any]]: ...
    def entry(self, name: str, value: Any, source: Any) -> dict[str, Any]: ...
    async def changes(self, scope: str, limit: int = 100) -> list[ConfigChange]: ...
    async def set(
        self,
        changes: Mapping[str, Any],
        *,
        tenant_id: str | None,
        by: str | None,
        platform_admin: bool,
        check_model: Callable[[str], object] | None = None,
    ) -> dict[str, dict[str, Any]]: ...
    async def runtime_for(self, rt: Any, tenant_id: str) -> Any:
        """The ``Runtime`` with the tenant's layers applied (``rt`` itself when none changes it)."""
        ...


class ResourceRegistry(Protocol):
    """Versioned resources by name, with tags and dependency edges (``resources.centre.ResourceCentre``)."""

    store: ResourceStore
    clock: Clock
    platform_tenant: str | None

    async def publish(
        self,
        tenant_id: str,
        kind: str,
        name: str,
        *,
        spec: Any,
        version: str | None = None,
        description: str | None = None,
        tags: Sequence[str] = (),
        by: str | None = None,
    ) -> ResourceVersion: ...
    async def get_version(self, tenant_id: str, ref: Any) -> ResourceVersion: ...
    async def get_head(
        self, tenant_id: str, kind: str, name: str
    ) -> tuple[ResourceHead, list[ResourceVersion]]: ...
    async def resolve(self, tenant_id: str, ref: Any) -> Any: ...
    async def search(
        self, tenant_id: str, ref: Any, query: str, limit: int = 5
    ) -> tuple[ResourceVersion, list[Any]]: ...
    async def search_in(self, version: ResourceVersion, query: str, limit: int = 5) -> tuple[list[Any], str]:
        """The best passages of one knowledge version, and the mode: ``hybrid``, ``words`` or ``bm25``."""
        ...

    def knowledge_index(self) -> KnowledgeIndex | None:
        """The host's knowledge index (None: knowledge versions carry BM25 offsets)."""
        ...

    async def heads(self, tenant_id: str, kind: str | None = None) -> list[tuple[ResourceHead, bool]]: ...
    async def discover(
        self,
        tenant_id: str,
        *,
        kind: str | None = None,
        prefix: str | None = None,
        tag: str | None = None,
        text: str | None = None,
        limit: int = 20,
        cursor: int = 0,
    ) -> tuple[list[dict[str, Any]], int | None]: ...
    async def tag(self, tenant_id: str, kind: str, name: str, version: str, tag: str) -> ResourceHead: ...
    async def delete(
        self, tenant_id: str, kind: str, name: str, version: str | None = None, *, untag: bool = False
    ) -> list[str]: ...
    async def delete_tenant(self, tenant_id: str) -> int: ...


__all__ = [
    "ConfigLayers",
    "ConfigStore",
    "ResourceRegistry",
    "ResourceStore",
    "Sealer",
]
