"""Where tools may connect: public addresses only, unless the operator allows private networks.

An image's author chooses the URLs of its HTTP tools and MCP servers. Left unchecked, a tenant
could point one at the server's own loopback services, the cloud's metadata endpoint
(169.254.169.254) or a private network behind it (server-side request forgery). So before a tool
connects, its host is resolved and every address must be public; ``AVM_TOOL_ALLOW_PRIVATE_NETWORKS``
lifts the rule (a developer's laptop, tests, a deployment whose tools live in its own VPC).

The check resolves the name itself, then the HTTP client resolves it again: a DNS server that
answers differently the second time (rebinding) is not stopped by this. Blocking that needs the
connection pinned to the checked address, which the HTTP and MCP clients do not offer; noted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


class EgressRefused(PermissionError):
    """The destination is not a public address (the message names the host, never the query)."""


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_public(url: str) -> None:
    """Raise ``EgressRefused`` unless every address ``url``'s host resolves to is public."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise EgressRefused("the URL has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EgressRefused(f"cannot resolve {host}: {exc.strerror or exc}") from None
    for info in infos:
        if not _is_public(str(info[4][0])):
            raise EgressRefused(
                f"{host} is a private, loopback or link-local address: tools may only reach public "
                "addresses (AVM_TOOL_ALLOW_PRIVATE_NETWORKS lifts this)"
            )


__all__ = ["EgressRefused", "check_public"]
