"""Clock and id ports: the time the core reads and the opaque ids it makes."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def monotonic(self) -> float: ...


class Ids(Protocol):
    def new(self, prefix: str) -> str:
        """A new opaque id like ``img_mk2x9a_q8w7e6``."""
        ...


__all__ = [
    "Clock",
    "Ids",
]
