"""A document's sections (``resources/extract.py``) cut into the chunks a knowledge index holds.

A chunk never crosses a section: it keeps its section's heading path (``"Billing > Refunds"``)
and location (a PDF page, else the heading), so a hit can be cited exactly. Within a section,
paragraphs (split at blank lines) are packed into chunks of at most ``MAX_CHARS`` characters,
aiming at ``TARGET_CHARS``; a paragraph longer than that is cut at sentence ends, and a sentence
longer than that at spaces (at ``MAX_CHARS`` when it has none). Around 1,000–1,500 characters
(200–400 tokens) a passage holds one idea with its context, small enough that a handful of them
fit a model's context cheaply, and large enough for an embedding to mean something.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentvm.ports import KnowledgeChunk

if TYPE_CHECKING:
    from agentvm.resources.extract import Section

TARGET_CHARS = 1200
MAX_CHARS = 1500
HEADING_SEPARATOR = " > "

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")
_SPACES = re.compile(r"[ \t]+")


def chunk_sections(document_id: str, title: str, sections: list[Section]) -> list[KnowledgeChunk]:
    """The chunks of one document, numbered from 0 in reading order."""
    out: list[KnowledgeChunk] = []
    for section in sections:
        path = HEADING_SEPARATOR.join(h for h in section.headings if h)
        for text in pack(section.text):
            out.append(KnowledgeChunk(document_id, title, path, section.location, len(out), text))
    return out


def pack(text: str) -> list[str]:
    """``text``'s paragraphs packed into pieces of at most ``MAX_CHARS`` characters."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = "\n".join(_SPACES.sub(" ", line).strip() for line in paragraph.strip().splitlines())
        if paragraph:
            pieces += _split(paragraph)
    out: list[str] = []
    for piece in pieces:
        if out and len(out[-1]) < TARGET_CHARS and len(out[-1]) + 2 + len(piece) <= MAX_CHARS:
            out[-1] = f"{out[-1]}\n\n{piece}"
        else:
            out.append(piece)
    return out


def _split(paragraph: str) -> list[str]:
    """A paragraph as is, or cut at sentence ends (then spaces) into pieces of at most ``MAX_CHARS``."""
    if len(paragraph) <= MAX_CHARS:
        return [paragraph]
    out: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        for part in _words(sentence):
            if current and len(current) + 1 + len(part) > MAX_CHARS:
                out.append(current)
                current = part
            else:
                current = f"{current} {part}" if current else part
    if current:
        out.append(current)
    return out


def _words(sentence: str) -> list[str]:
    """A sentence, or pieces of it cut at spaces, each at most ``MAX_CHARS``."""
    out: list[str] = []
    while len(sentence) > MAX_CHARS:
        cut = sentence.rfind(" ", 0, MAX_CHARS + 1)
        if cut <= 0:
            cut = MAX_CHARS
        out.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        out.append(sentence)
    return out


def citation(chunk: KnowledgeChunk) -> str:
    """A short reference a client can show: ``[handbook.pdf p.4 — Billing > Refunds]``."""
    where = chunk.document_id
    if chunk.location.startswith("p."):
        where = f"{where} {chunk.location}"
    path = chunk.heading_path or (chunk.location if not chunk.location.startswith("p.") else "")
    return f"[{where} — {path}]" if path else f"[{where}]"


__all__ = ["HEADING_SEPARATOR", "MAX_CHARS", "TARGET_CHARS", "chunk_sections", "citation", "pack"]
