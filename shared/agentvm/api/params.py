"""Bounds of the path and query parameters several routers share (the gateway's bounds on ids)."""

from __future__ import annotations

from fastapi import Path

MAX_ID = 128  # the gateway's bound on ids (containers, images, sessions, turns); API key ids are 12
CONTAINER_ID = Path(min_length=1, max_length=MAX_ID)  # the gateway's bound on container ids

__all__ = ["CONTAINER_ID", "MAX_ID"]
