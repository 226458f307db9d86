"""Host names and addresses, with the standard library only (the light client install uses it too)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an IPv4 or an IPv6 address, bracketed or not) is this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback"]
