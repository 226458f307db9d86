"""The resource centre: publish immutable versions, discover, resolve with the dependency closure
pinned, move tags, delete what nothing depends on.

Resources belong to a tenant. The platform tenant's resources (``AVM_PLATFORM_TENANT``, published
by its admin keys) are readable by every tenant: a reference is looked up in the caller's tenant
first, then in the platform's. Dependencies are checked at publish (each must resolve now; a
resource that would reach itself is a cycle) and recorded as edges, so deleting a version that
another resource needs (pinned to it, through a tag pointing at it, or ``latest`` when it is the
last version) is refused with the dependents listed.

Every version is counted in its tenant's storage account (``security/storage_quota.py``): its size
(the stored record's JSON, a knowledge version's search index included) is reserved before it is
written, refused with ``storage_quota_exceeded`` past the account, and given back when it is
deleted (the delete reads the versions anyway) or when its write fails or loses a race. This covers
``/v1/resources`` and the ResourceX registry (``/v1/registry``), which publish through here.

Knowledge versions: on a host with a knowledge index (``Runtime.knowledge_index``), a version's
chunks are indexed there at publish (vectors too with the tenant's embedder: ``embedder``),
charged to the same account, searched with ``resources.hybrid.hybrid_search`` and dropped with the version
(``resources/indexing.py``); elsewhere the version carries its BM25 chunk offsets
(``resources/search.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from agentvm.errors import (
    AgentVMError,
    Conflict,
    DependencyCycle,
    InvalidResource,
    MissingDependency,
    NotFound,
    ResourceInUse,
    VersionExists,
)
from agentvm.records import RESOURCE_PLURALS, ResourceHead, ResourceVersion
from agentvm.resources.uri import (
    INTEGER,
    LATEST,
    ResourceRef,
    check_kind,
    check_name,
    check_tag,
    check_version,
    is_version,
    parse,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agentvm.ports import Clock, Embedder, KnowledgeChunk, KnowledgeIndex, ResourceStore, StorageAccount
    from agentvm.resources.indexing import EmbedderFor, MeteredEmbedder

log = logging.getLogger("agentvm.resources")

MAX_PAGE = 100
_PUBLISH_ATTEMPTS = 5


@dataclass(frozen=True)
class Resolved:
    """A resource version and the pinned versions of everything it refers to, transitively."""

    resource: ResourceVersion
    closure: dict[str, ResourceVersion]  # the URI as written -> the version it resolved to

    def to_wire(self) -> dict[str, Any]:
        return {
            "resource": version_wire(self.resource),
            "dependencies": {uri: version_wire(v) for uri, v in self.closure.items()},
        }


def version_wire(v: ResourceVersion) -> dict[str, Any]:
    out = {
        "uri": v.uri,
        "kind": v.kind,
        "name": v.name,
        "version": v.version,
        "description": v.description,
        "spec": v.spec,
        "dependencies": v.dependencies,
        "digest": v.digest,
        "createdAt": v.createdAt,
    }
    if v.index is not None:
        chunks = v.index.get("chunks", [])
        out["chunks"] = chunks if isinstance(chunks, int) else len(chunks)
    return out


def head_wire(h: ResourceHead, *, platform: bool = False) -> dict[str, Any]:
    out = {
        "uri": f"resource://{RESOURCE_PLURALS[h.kind]}/{h.name}",
        "kind": h.kind,
        "name": h.name,
        "latest": h.latest,
        "versions": h.versions,
        "tags": h.tags,
        "description": h.description,
        "updatedAt": h.updatedAt,
        "platform": platform,
    }
    if h.type is not None:
        out["type"] = h.type
    return out


class ResourceCentre:
    def __init__(
        self,
        store: ResourceStore,
        clock: Clock,
        *,
        platform_tenant: str | None = None,
        storage: Callable[[], StorageAccount | None] = lambda: None,
        knowledge: Callable[[], KnowledgeIndex | None] = lambda: None,
        embedder: EmbedderFor | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.platform_tenant = platform_tenant
        self._storage = storage  # the storage accounts (the runtime's, attached with its security)
        self._knowledge = knowledge  # the runtime's knowledge index and embedder (None: BM25 offsets)
        # a tenant's embedder (None: words only), whose tokens are billed to it (resources/indexing.py)
        self._embedder_for = embedder

    async def _embedder(self, tenant_id: str) -> MeteredEmbedder | None:
        """The tenant's embedder, or None (none chosen; or its choice cannot be used: logged, and
        the knowledge is indexed and searched by words alone)."""
        if self._embedder_for is None:
            return None
        try:
            return await self._embedder_for(tenant_id)
        except AgentVMError as exc:
            log.warning(
                "the tenant's embedding model cannot be used: words only",
                extra={"tenant_id": tenant_id, "error": str(exc)},
            )
            return None

    def knowledge_index(self) -> KnowledgeIndex | None:
        return self._knowledge()

    def _tenants(self, tenant_id: str) -> list[str]:
        if self.platform_tenant and self.platform_tenant != tenant_id:
            return [tenant_id, self.platform_tenant]
        return [tenant_id]

    # -- publish ---------------------------------------------------------------------------------
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
    ) -> ResourceVersion:
        from agentvm.resources.kinds import dependencies, validate_spec  # pydantic models: on first use

        check_kind(kind)
        check_name(name)
        if version is not None:
            check_version(version)
        for tag in tags:
            check_tag(tag)
        stored_spec = validate_spec(kind, spec)
        refs = dependencies(kind, stored_spec)
        targets = [await self._target(tenant_id, kind, name, ref) for ref in refs]
        digest = hashlib.sha256(json.dumps(stored_spec, sort_keys=True).encode()).hexdigest()
        index = None
        chunks: list[KnowledgeChunk] = []
        knowledge, metered = self._knowledge(), None
        if kind == "knowledge":  # the search index is built now, once per version
            if knowledge is not None:
                metered = await self._embedder(tenant_id)
                from agentvm.resources.indexing import chunks_for, index_record

                stored_spec, chunks = await chunks_for(knowledge, tenant_id, name, stored_spec)
                digest = hashlib.sha256(json.dumps(stored_spec, sort_keys=True).encode()).hexdigest()
                index = index_record(chunks, metered.embedder if metered is not None else None)
            elif stored_spec.get("draft"):
                raise InvalidResource(
                    "spec.draft: this server keeps no uploaded documents (no knowledge index)"
                )
            else:
                from agentvm.resources.search import chunk_documents

                index = chunk_documents(stored_spec["documents"])
        if kind == "file":
            await self._same_file_type(tenant_id, name, stored_spec["type"])
        record = None
        for _ in range(_PUBLISH_ATTEMPTS):
            existing = await self.store.list_versions(tenant_id, kind, name)
            if version is not None and any(v.version == version for v in existing):
                raise VersionExists(
                    f"{ResourceRef(kind, name, version)} is published already (versions are immutable)"
                )
            record = ResourceVersion(
                tenantId=tenant_id,
                kind=kind,
                name=name,
                version=version or _next_integer(existing),
                seq=max((v.seq for v in existing), default=0) + 1,
                spec=stored_spec,
                description=description,
                dependencies=[str(r) for r in refs],
                targets=[list(t) for t in targets],
                digest=digest,
                createdAt=self.clock.now_ms(),
                createdBy=by,
                index=index,
            )
            if await self._create_counted(record):
                if knowledge is not None and kind == "knowledge":
                    await self._index_or_undo(
                        knowledge, metered.embedder if metered is not None else None, record, chunks
                    )
                    if metered is not None:  # the chunks' embedding tokens, once per version
                        await metered.bill(f"index:{name}:{record.version}")
                break
            if version is not None:
                raise VersionExists(
                    f"resource://{RESOURCE_PLURALS[kind]}/{name}@{version} is published already"
                )
        else:
            raise Conflict("the resource is being published by someone else; try again")
        assert record is not None
        await self.store.add_edges(f"{tenant_id}|{record.uri}", targets)
        head = await self.store.get_head(tenant_id, kind, name)
        moved = {**(head.tags if head else {}), **dict.fromkeys(tags, record.version)}
        file_type = stored_spec["type"] if kind == "file" else None
        await self.store.put_head(
            ResourceHead(
                tenantId=tenant_id,
                kind=kind,
                name=name,
                latest=record.version,
                seq=record.seq,
                versions=(head.versions if head else 0) + 1,
                tags=moved,
                description=description if description is not None else (head.description if head else None),
                updatedAt=record.createdAt,
                type=head.type if head and head.type else file_type,
            )
        )
        return record

    async def _create_counted(self, record: ResourceVersion) -> bool:
        """Create the version with its size reserved first; False (nothing kept) if it exists."""
        quota = self._storage()
        reserved = 0 if quota is None else await quota.reserve(record.tenantId, stored_size(record))
        created = False
        try:
            created = await self.store.create_version(record)
        finally:
            if quota is not None and not created:
                await quota.give_back(record.tenantId, reserved)
        return created

    async def _index_or_undo(
        self,
        knowledge: KnowledgeIndex,
        embedder: Embedder | None,
        record: ResourceVersion,
        chunks: list[KnowledgeChunk],
    ) -> None:
        """Index a new knowledge version's chunks; if that fails, the version goes too."""
        from agentvm.resources.indexing import index_version

        try:
            await index_version(knowledge, embedder, self._storage(), record, chunks)
        except BaseException:
            await self.store.delete_version(record.tenantId, record.kind, record.name, record.version)
            quota = self._storage()
            if quota is not None:
                await quota.give_back(record.tenantId, stored_size(record))
            raise

    async def _same_file_type(self, tenant_id: str, name: str, file_type: str) -> None:
        head = await self.store.get_head(tenant_id, "file", name)
        if head is not None and head.type and head.type != file_type:
            raise InvalidResource(
                f"resource://files/{name} is a {head.type} file; a {file_type} file needs another name"
            )

    async def _target(
        self, tenant_id: str, kind: str, name: str, ref: ResourceRef
    ) -> tuple[str, str, str, str]:
        """Where a dependency resolves now (it must), refusing one that reaches the resource itself."""
        if (ref.kind, ref.name) == (kind, name):
            raise DependencyCycle(
                f"resource://{RESOURCE_PLURALS[kind]}/{name} cannot depend on itself ({ref})"
            )
        try:
            found = await self.get_version(tenant_id, ref)
        except NotFound:
            raise MissingDependency(f"{ref} does not exist (publish it first)") from None
        closure = await self._closure(tenant_id, found, set())
        if any((v.kind, v.name) == (kind, name) for v in closure.values()):
            raise DependencyCycle(
                f"resource://{RESOURCE_PLURALS[kind]}/{name} would depend on itself through {ref}"
            )
        return (found.tenantId, ref.kind, ref.name, ref.selector)

    # -- read ------------------------------------------------------------------------------------
    async def get_version(self, tenant_id: str, ref: ResourceRef) -> ResourceVersion:
        for tenant in self._tenants(tenant_id):
            head = await self.store.get_head(tenant, ref.kind, ref.name)
            if head is None:
                continue
            selector = head.latest if ref.selector == LATEST else head.tags.get(ref.selector, ref.selector)
            if not is_version(selector):
                break  # an unknown tag of this resource
            found = await self.store.get_version(tenant, ref.kind, ref.name, selector)
            if found is not None:
                return found
            break
        raise NotFound(f"{ref} not found")

    async def get_head(
        self, tenant_id: str, kind: str, name: str
    ) -> tuple[ResourceHead, list[ResourceVersion]]:
        for tenant in self._tenants(tenant_id):
            head = await self.store.get_head(tenant, kind, name)
            if head is not None:
                return head, await self.store.list_versions(tenant, kind, name)
        raise NotFound(f"resource://{RESOURCE_PLURALS[kind]}/{name} not found")

    async def resolve(self, tenant_id: str, ref: ResourceRef) -> Resolved:
        root = await self.get_version(tenant_id, ref)
        return Resolved(root, await self._closure(tenant_id, root, set()))

    async def _closure(
        self, tenant_id: str, version: ResourceVersion, seen: set[str]
    ) -> dict[str, ResourceVersion]:
        out: dict[str, ResourceVersion] = {}
        seen = seen | {version.uri}
        for uri in version.dependencies:
            dep = await self.get_version(tenant_id, parse(uri))
            if dep.uri in seen:
                raise DependencyCycle(f"{version.uri} reaches itself through {uri}")
            out[uri] = dep
            out.update(await self._closure(tenant_id, dep, seen))
        return out

    async def search(
        self, tenant_id: str, ref: ResourceRef, query: str, limit: int = 5
    ) -> tuple[ResourceVersion, list[Any]]:
        """The best passages of a knowledge resource for ``query`` (``search_in``)."""
        if ref.kind != "knowledge":
            raise InvalidResource(f"{ref}: only knowledge resources can be searched")
        version = await self.get_version(tenant_id, ref)
        hits, _ = await self.search_in(version, query, limit)
        return version, hits

    async def search_in(self, version: ResourceVersion, query: str, limit: int = 5) -> tuple[list[Any], str]:
        """The best passages of one knowledge version and how they were found: ``hybrid`` or
        ``words`` from the knowledge index, ``bm25`` from the version's own chunk offsets."""
        from agentvm.resources.indexing import is_indexed, search_indexed

        if not query.strip():
            raise InvalidResource("query: must not be empty")
        knowledge = self._knowledge()
        if is_indexed(version):
            if knowledge is None:
                raise InvalidResource(f"{version.uri} was indexed by a host with a knowledge index")
            metered = await self._embedder(version.tenantId)
            found = await search_indexed(
                knowledge, metered.embedder if metered is not None else None, version, query, limit
            )
            if metered is not None:  # the query's embedding tokens, to the version's owner
                await metered.bill(f"search:{version.name}:{secrets.token_hex(8)}")
            return found
        return search_version(version, query, limit), "bm25"

    async def heads(self, tenant_id: str, kind: str | None = None) -> list[tuple[ResourceHead, bool]]:
        """Every resource the tenant reads (its own, then the platform's) and whether it is the
        platform's. Filters run in memory: a tenant's heads are one query on either store."""
        if kind is not None:
            check_kind(kind)
        return [
            (head, tenant != tenant_id)
            for tenant in self._tenants(tenant_id)
            for head in await self.store.list_heads(tenant, kind)
        ]

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
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Heads of the caller's tenant, then the platform's, filtered; a page and the next cursor."""
        found: list[dict[str, Any]] = []
        for head, platform in await self.heads(tenant_id, kind):
            if prefix and not head.name.startswith(prefix):
                continue
            if tag and tag not in head.tags:
                continue
            if text and text.lower() not in f"{head.name} {head.description or ''}".lower():
                continue
            found.append(head_wire(head, platform=platform))
        page = found[cursor : cursor + limit]
        more = cursor + limit < len(found)
        return page, (cursor + limit if more else None)

    # -- change ----------------------------------------------------------------------------------
    async def tag(self, tenant_id: str, kind: str, name: str, version: str, tag: str) -> ResourceHead:
        check_tag(tag)
        head = await self.store.get_head(tenant_id, kind, name)
        if head is None or await self.store.get_version(tenant_id, kind, name, version) is None:
            raise NotFound(f"resource://{RESOURCE_PLURALS[kind]}/{name}@{version} not found")
        head = head.model_copy(update={"tags": {**head.tags, tag: version}, "updatedAt": self.clock.now_ms()})
        await self.store.put_head(head, force=True)
        return head

    async def delete(
        self, tenant_id: str, kind: str, name: str, version: str | None = None, *, untag: bool = False
    ) -> list[str]:
        """Delete one version (or every version); returns the URIs deleted. A tag pointing at the
        version refuses it, unless ``untag`` (the registry's delete): then the tag goes with it."""
        check_kind(kind)
        head = await self.store.get_head(tenant_id, kind, name)
        versions = await self.store.list_versions(tenant_id, kind, name)
        if head is None or not versions:
            raise NotFound(f"resource://{RESOURCE_PLURALS[kind]}/{name} not found")
        doomed = versions if version is None else [v for v in versions if v.version == version]
        if not doomed:
            raise NotFound(f"resource://{RESOURCE_PLURALS[kind]}/{name}@{version} not found")
        gone = {v.version for v in doomed}
        remaining = [v for v in versions if v.version not in gone]
        blockers = [
            _shown(dependent, tenant_id)
            for dependent, selector in await self.store.dependents(tenant_id, kind, name)
            if selector in gone or (selector == LATEST and not remaining) or (head.tags.get(selector) in gone)
        ]
        if version is not None and not untag:
            blockers += [f"tag {t}" for t, v in sorted(head.tags.items()) if v in gone]
        if blockers:
            raise ResourceInUse(
                f"resource://{RESOURCE_PLURALS[kind]}/{name}: {len(blockers)} dependent(s) still need it; "
                "delete or re-publish them (or move the tags) first",
                dependents=sorted(set(blockers)),
            )
        quota = self._storage()
        from agentvm.resources.indexing import unindex_version

        for v in doomed:
            await self.store.delete_version(tenant_id, kind, name, v.version)
            if quota is not None:
                await quota.give_back(tenant_id, stored_size(v))
            await unindex_version(self._knowledge(), quota, v)
            await self.store.remove_edges(f"{tenant_id}|{v.uri}", _edges(v))
        if not remaining:
            await self.store.delete_head(tenant_id, kind, name)
        else:
            last = remaining[-1]
            await self.store.put_head(
                head.model_copy(
                    update={
                        "latest": last.version,
                        "seq": last.seq,
                        "versions": len(remaining),
                        "tags": {t: v for t, v in head.tags.items() if v not in gone},
                        "updatedAt": self.clock.now_ms(),
                    }
                ),
                force=True,
            )
        return [v.uri for v in doomed]

    async def delete_tenant(self, tenant_id: str) -> int:
        """Delete every resource of a tenant being deleted (only its own resources can depend on
        them); returns how many versions. Edges go first and each head last, so an interrupted
        call leaves nothing unlisted: calling again finishes the job."""
        from agentvm.resources.indexing import unindex_version

        deleted = 0
        for head in await self.store.list_heads(tenant_id):
            for v in await self.store.list_versions(tenant_id, head.kind, head.name):
                await self.store.remove_edges(f"{tenant_id}|{v.uri}", _edges(v))
                await self.store.delete_version(tenant_id, head.kind, head.name, v.version)
                await unindex_version(self._knowledge(), None, v)  # the account goes with the tenant
                deleted += 1
            await self.store.delete_head(tenant_id, head.kind, head.name)
        knowledge = self._knowledge()
        if knowledge is not None:  # drafts too, published or not
            await knowledge.drop_owner(tenant_id)
        return deleted


def search_version(version: ResourceVersion, query: str, limit: int = 5) -> list[Any]:
    """Search one knowledge version (its index, built at publish; term statistics kept per process)."""
    from agentvm.resources.search import cached_index

    if not query.strip():
        raise InvalidResource("query: must not be empty")
    if version.index is None:
        raise InvalidResource(f"{version.uri} has no search index")
    key = f"{version.tenantId}|{version.uri}|{version.digest}"
    return cached_index(key, version.spec["documents"], version.index).search(query, limit)


def stored_size(version: ResourceVersion) -> int:
    """The bytes a version is charged: its record's JSON (the same whenever it is computed)."""
    return len(version.model_dump_json())


def _edges(version: ResourceVersion) -> list[tuple[str, str, str, str]]:
    """The version's dependency edges: (owner tenant, kind, name, selector), stored as JSON lists."""
    return [cast("tuple[str, str, str, str]", tuple(t)) for t in version.targets]


def _shown(dependent: str, tenant_id: str) -> str:
    """A dependent's URI; another tenant's (depending on a platform resource) without its name."""
    owner, uri = dependent.split("|", 1)
    return uri if owner == tenant_id else "a resource of another tenant"


def _next_integer(existing: Sequence[ResourceVersion]) -> str:
    numbers = [int(v.version) for v in existing if INTEGER.match(v.version)]
    return str(max(numbers, default=0) + 1)


__all__ = ["ResourceCentre", "Resolved", "head_wire", "search_version", "version_wire"]
