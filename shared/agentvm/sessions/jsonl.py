"""The session export format: JSON Lines, one record per line, version 1.

::

    {"type": "session", "format": "agentvm.session", "version": 1, "exportId": "exp_...",
     "exportedAt": <ms>, "source": {"containerId", "imageId", "sessionId", "name", "createdAt"}}
    {"type": "image", "config": {name, description?, systemPrompt?, model?, tools?, mcpServers?,
     maxSteps?, approval?, concurrency, cadence?, sideModel?,
     fastModel?, fastMaxChars?, replyCache?, contextDiet?, customData?},
     "build": {agent, resolved, pins, builtAt, history}?}
    {"type": "message", "seq": 1, "message": {<the stored AgentX Message>}}    seq 1..n, in order
    {"type": "summary", "upToSeq", "text", "model", "messages", "createdAt"}    the summary, if any
    {"type": "usage", "turnId", "kind", "model", "inputTokens", ...}    one per usage record
    {"type": "memory", "id", "topic", "text", "source", "createdAt", "updatedAt"}    one per item of
     the container's agent memory (docs/memory.md), if the host keeps memory
    {"type": "end", "messages": n, "usage": u, "memory": m, "sha256": "<hex of every byte before this line>"}

The header comes first, the image second, the messages in order, then the summary, usage and memory lines,
and ``end`` last: an export cut short has no ``end`` line and is refused. ``sha256`` guards against
damage in transit; a person editing an export (to drop a message, say) removes the field, and the
rest is still checked (counts, order, message shapes). Records may gain fields within version 1:
readers ignore fields they do not know. ``tenantId`` is never written: an export names no tenant.

Reading is strict and all up front (``read_export``), so an import refuses a bad file before it
writes anything: every error is ``invalid_import`` with the line at fault.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentvm.errors import InvalidImport
from agentvm.messages import message_from_wire, message_to_wire

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.messages import Message
    from agentvm.records import ImageRecord, SessionSummary, UsageRecord

FORMAT = "agentvm.session"
VERSION = 1
MEDIA_TYPE = "application/x-ndjson"
EXPORT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
# One message is one DynamoDB item (at most 400 KB with its keys): refused before anything is written.
MAX_MESSAGE_BYTES = 300 * 1024
CONFIG_FIELDS = (
    "name",
    "description",
    "systemPrompt",
    "model",
    "tools",
    "mcpServers",
    "maxSteps",
    "promptCaching",
    "approval",
    "concurrency",
    "cadence",
    "sideModel",
    "fastModel",
    "fastMaxChars",
    "replyCache",
    "contextDiet",
    "customData",
)


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def write_export(
    *,
    export_id: str,
    exported_at: int,
    image: ImageRecord,
    messages: Sequence[Message],
    summary: SessionSummary | None,
    usage: Sequence[UsageRecord],
    memory: Sequence[dict[str, Any]] = (),
) -> bytes:
    """The export of one session as bytes (JSON Lines)."""
    out = bytearray()
    source = {
        "containerId": image.containerId,
        "imageId": image.imageId,
        "sessionId": image.sessionId,
        "name": image.name,
        "createdAt": image.createdAt,
    }
    out += _line(
        {
            "type": "session",
            "format": FORMAT,
            "version": VERSION,
            "exportId": export_id,
            "exportedAt": exported_at,
            "source": source,
        }
    )
    config = {k: getattr(image, k) for k in CONFIG_FIELDS if getattr(image, k) is not None}
    record: dict[str, Any] = {"type": "image", "config": config}
    if image.build is not None:
        record["build"] = {k: v for k, v in image.build.items() if k != "targets"}
    out += _line(record)
    for seq, message in enumerate(messages, 1):
        out += _line({"type": "message", "seq": seq, "message": message_to_wire(message)})
    if summary is not None:
        out += _line(
            {
                "type": "summary",
                **summary.model_dump(include={"upToSeq", "text", "model", "messages", "createdAt"}),
            }
        )
    for u in usage:
        out += _line({"type": "usage", **u.model_dump(exclude={"tenantId"})})
    for m in memory:  # the container's memory items (their wire form names no tenant or scope)
        out += _line({"type": "memory", **{k: v for k, v in m.items() if k != "scope"}})
    digest = hashlib.sha256(out).hexdigest()
    end: dict[str, Any] = {"type": "end", "messages": len(messages), "usage": len(usage)}
    if memory:
        end["memory"] = len(memory)
    out += _line({**end, "sha256": digest})
    return bytes(out)


@dataclass
class SessionExport:
    """An export as read: every record checked."""

    export_id: str
    source: dict[str, Any]
    config: dict[str, Any]
    build: dict[str, Any] | None
    messages: list[Message] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    usage: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)  # {id, topic, text, source, ...}
    image_line: int = 2


def read_export(body: bytes) -> SessionExport:
    """Parse and check a whole export; ``InvalidImport`` (with the line) at the first fault."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidImport("the body is not UTF-8 text (an export is JSON Lines)") from None
    lines = text.split("\n")
    records: list[tuple[int, dict[str, Any], int]] = []  # (line number, record, byte offset of the line)
    offset = 0
    for number, raw in enumerate(lines, 1):
        start = offset
        offset += len(raw.encode()) + 1
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:  # a JSONDecodeError, or a number over Python's int digit limit
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise InvalidImport(f"not JSON ({why})", line=number) from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise InvalidImport('each line must be a JSON object with a "type"', line=number)
        records.append((number, record, start))
    if not records:
        raise InvalidImport("the body is empty: send a session export (JSON Lines)")
    return _Reader(records, body).read()


class _Reader:
    def __init__(self, records: list[tuple[int, dict[str, Any], int]], body: bytes) -> None:
        self.records = records
        self.body = body
        self.i = 0

    def _next(self) -> tuple[int, dict[str, Any], int] | None:
        if self.i >= len(self.records):
            return None
        item = self.records[self.i]
        self.i += 1
        return item

    def read(self) -> SessionExport:
        number, header, _ = self.records[0]
        self.i = 1
        if header["type"] != "session" or header.get("format") != FORMAT:
            raise InvalidImport(
                f'the first line must be the export header ({{"type": "session", "format": "{FORMAT}"}})',
                line=number,
            )
        if header.get("version") != VERSION:
            raise InvalidImport(
                f"version {header.get('version')!r} is not supported (this server reads {VERSION})",
                line=number,
            )
        export_id = header.get("exportId")
        if not isinstance(export_id, str) or not EXPORT_ID.match(export_id):
            raise InvalidImport("exportId: 1-128 characters of A-Z a-z 0-9 _ . : -", line=number)
        given = header.get("source")
        source: dict[str, Any] = given if isinstance(given, dict) else {}

        item = self._next()
        if item is None or item[1]["type"] != "image":
            raise InvalidImport(
                'the second line must be the image ({"type": "image", "config": {...}})',
                line=item[0] if item else number,
            )
        image_line, image, _ = item
        config, build = image.get("config"), image.get("build")
        if not isinstance(config, dict) or (build is not None and not isinstance(build, dict)):
            raise InvalidImport("image.config must be an object (and build, if present)", line=image_line)
        out = SessionExport(export_id, source, config, build, image_line=image_line)

        ids: set[str] = set()
        parents: list[tuple[int, str]] = []
        item = self._next()
        while item is not None and item[1]["type"] == "message":
            number, record, _ = item
            out.messages.append(self._message(number, record, len(out.messages) + 1, ids, parents))
            item = self._next()
        for number, parent in parents:
            if parent not in ids:
                raise InvalidImport(f"parentId {parent!r} is not a message of this export", line=number)
        if item is not None and item[1]["type"] == "summary":
            out.summary = self._summary(item[0], item[1], len(out.messages))
            item = self._next()
        while item is not None and item[1]["type"] == "usage":
            out.usage.append(item[1])
            item = self._next()
        while item is not None and item[1]["type"] == "memory":
            number, record, _ = item
            if not isinstance(record.get("text"), str) or not isinstance(record.get("id"), str):
                raise InvalidImport("a memory line needs its id and text (strings)", line=number)
            out.memory.append(record)
            item = self._next()
        if item is None:
            raise InvalidImport('the export is cut short: its last line must be {"type": "end", ...}')
        number, end, end_offset = item
        if end["type"] != "end":
            kinds = "message, summary, usage, memory or end"
            raise InvalidImport(
                f"unexpected {end['type']!r} line here (expected {kinds}, in that order)", line=number
            )
        if self._next() is not None:
            raise InvalidImport("nothing may follow the end line", line=self.records[self.i - 1][0])
        if end.get("memory", len(out.memory)) != len(out.memory):
            raise InvalidImport(
                f"the end line counts {end.get('memory')!r} memory items; the export holds {len(out.memory)}",
                line=number,
            )
        if end.get("messages") != len(out.messages) or end.get("usage", len(out.usage)) != len(out.usage):
            raise InvalidImport(
                f"the end line counts {end.get('messages')!r} messages and {end.get('usage')!r} usage "
                "records; "
                f"the export holds {len(out.messages)} and {len(out.usage)}",
                line=number,
            )
        digest = end.get("sha256")
        if digest is not None and hashlib.sha256(self.body[:end_offset]).hexdigest() != digest:
            raise InvalidImport(
                "sha256 does not match: the export was damaged (or edited: then drop sha256)", line=number
            )
        return out

    @staticmethod
    def _message(
        number: int, record: dict[str, Any], seq: int, ids: set[str], parents: list[tuple[int, str]]
    ) -> Message:
        if record.get("seq") != seq:
            raise InvalidImport(
                f"messages must be numbered 1, 2, ... in order: expected seq {seq}", line=number
            )
        wire = record.get("message")
        if not isinstance(wire, dict):
            raise InvalidImport("message must be an object (an AgentX Message)", line=number)
        if len(json.dumps(wire, ensure_ascii=False).encode()) > MAX_MESSAGE_BYTES:
            raise InvalidImport(f"a message may hold at most {MAX_MESSAGE_BYTES} bytes", line=number)
        try:
            message = message_from_wire(wire)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InvalidImport(f"message.{where}: {err['msg']}", line=number) from None
        if message.id in ids:
            raise InvalidImport(f"message id {message.id!r} appears twice", line=number)
        ids.add(message.id)
        parent = getattr(message, "parentId", None)
        if parent is not None:
            parents.append((number, parent))
        return message

    @staticmethod
    def _summary(number: int, record: dict[str, Any], count: int) -> dict[str, Any]:
        up_to, text = record.get("upToSeq"), record.get("text")
        if not isinstance(up_to, int) or isinstance(up_to, bool) or not 1 <= up_to <= count:
            raise InvalidImport(f"summary.upToSeq must be a message seq (1..{count})", line=number)
        if not isinstance(text, str) or not isinstance(record.get("model"), str):
            raise InvalidImport("summary.text and summary.model must be strings", line=number)
        return record


__all__ = [
    "CONFIG_FIELDS",
    "EXPORT_ID",
    "FORMAT",
    "MEDIA_TYPE",
    "VERSION",
    "SessionExport",
    "read_export",
    "write_export",
]
