"""A lean reader of Server-Sent Events for the provider streams' hot path.

The official SDKs still build and send every request, authenticate it, and raise their typed
errors for a failed status (``client.messages.with_streaming_response.create(...)``,
``client.chat.completions.with_streaming_response.create(...)``); only the body of a streaming
response is read here, from the SDK's raw ``httpx`` response, instead of through the SDK's
decoder and event models. That path (an SSE decoder working line by line on ``str``, then a
pydantic model built for every event) was most of the server's CPU per streamed token; here an
event costs one ``bytes.split`` and one ``json.loads``, and the adapters read the few fields they
need from the dict (``adapters/llm/anthropic.py``, ``adapters/llm/openai.py``). A block of the
providers' own shape (``event: <name>`` then one ``data: <json>`` line) is cut with two ``find``s
instead of split into lines; any other block takes the full reader below.

What it keeps of the SSE format (https://html.spec.whatwg.org/multipage/server-sent-events.html):
events end at a blank line; ``event:`` names it; ``data:`` lines (one optional space after the
colon) are joined with newlines; comments (``:``), ``id:`` and ``retry:`` are ignored, as the
providers' SDKs ignore them; ``\\r\\n`` and lone ``\\r`` end lines too. An event cut by the end of a
network read waits for the next one; what is left when the body ends is not an event.
"""

from __future__ import annotations

_LF = b"\n"
_CR = b"\r"


class SSEReader:
    """Feed it the body's bytes as they arrive; it returns the complete events so far."""

    __slots__ = ("_rest", "_after_cr")

    def __init__(self) -> None:
        self._rest = b""
        self._after_cr = False  # the last read ended with \r: a \n starting the next is its pair

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        """The events completed by ``chunk``: ``(name, data)``, the name ``b""`` if the event had
        none. Events without data are dropped (nothing to parse), as the SDKs drop them."""
        if self._after_cr and chunk.startswith(_LF):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(_CR)
        if _CR in chunk:
            chunk = chunk.replace(b"\r\n", _LF).replace(_CR, _LF)
        data = self._rest + chunk if self._rest else chunk
        blocks = data.split(b"\n\n")
        self._rest = blocks.pop()
        events: list[tuple[bytes, bytes]] = []
        for block in blocks:
            if not block:
                continue
            if block.startswith(b"event: "):  # the providers' shape: one name line, one data line
                nl = block.find(_LF)
                if nl > 0 and block.startswith(b"data: ", nl + 1) and block.find(_LF, nl + 1) < 0:
                    events.append((block[7:nl], block[nl + 7 :]))
                    continue
            name = b""
            lines: list[bytes] = []
            for line in block.split(_LF):
                if line.startswith(b"data:"):
                    lines.append(line[6:] if line[5:6] == b" " else line[5:])
                elif line.startswith(b"event:"):
                    name = line[7:] if line[6:7] == b" " else line[6:]
            if lines:
                events.append((name, lines[0] if len(lines) == 1 else _LF.join(lines)))
        return events


__all__ = ["SSEReader"]
