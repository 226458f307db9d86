"""How a message's wire JSON is stored in its DynamoDB item: as text, or zlib-compressed.

DynamoDB bills a write per started KB of the item and a read per 4 KB of the items read, and a
message is the hot path's biggest item: the standard turn's ~1 KB messages cost 2 WRU each as
text. Compressed (zlib, as AWS's DynamoDB best practices suggest for large attributes) the same
message fits in one KB: the user message and the reply each cost 1 WRU instead of 2, and a turn's
history read (20 such messages) about half the read units. Chat text compresses to ~50-65 % at that
size; the CPU is tens of microseconds per message.

An item holds exactly one of ``body`` (the JSON as text) and ``bodyz`` (binary: the zlib stream of
its UTF-8), so items written before compression, and small messages (below ``COMPRESS_FROM`` bytes,
or when compressing saves under 10 %), keep the readable ``body``. Every reader goes through
``stored_body``/``raw_body``: nothing else knows the difference. The price: a compressed message is
not readable as text in the DynamoDB console.
"""

from __future__ import annotations

import zlib
from typing import Any

COMPRESS_FROM = 512  # bytes of JSON: below this, compression saves no unit
_LEVEL = 6  # zlib's default: within a few % of 9 on chat text, at half the CPU


def body_attributes(body: str) -> dict[str, Any]:
    """The attributes to store ``body`` under: ``{"body": text}`` or ``{"bodyz": bytes}``."""
    raw = body.encode()
    if len(raw) >= COMPRESS_FROM:
        packed = zlib.compress(raw, _LEVEL)
        if len(packed) <= 0.9 * len(raw):
            return {"bodyz": packed}
    return {"body": body}


def stored_body(body: str | None, bodyz: bytes | None) -> str:
    """The JSON text of a message item (a PynamoDB ``MessageItem``'s ``body`` and ``bodyz``)."""
    if body is not None:
        return body
    if bodyz is None:
        raise ValueError("a message item holds neither body nor bodyz")
    return zlib.decompress(bodyz).decode()


def raw_body(item: dict[str, Any]) -> str:
    """The JSON text of a message item as the low-level client returns it (``{"body": {"S": ...}}``)."""
    if "body" in item:
        return str(item["body"]["S"])
    return stored_body(None, item["bodyz"]["B"])


__all__ = ["COMPRESS_FROM", "body_attributes", "raw_body", "stored_body"]
