"""What a knowledge search answers, on the wire and to the model: passages with their source.

A ``Passage`` is one hit of ``hybrid_search`` as a client sees it: the document's id and title,
the heading path and location of the chunk, a short citation to show next to an answer
(``[handbook.pdf p.4 — Billing > Refunds]``), the score and the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.resources.chunking import citation

if TYPE_CHECKING:
    from agentvm.ports import KnowledgeHit


@dataclass(frozen=True)
class Passage:
    documentId: str
    title: str
    headingPath: str
    location: str
    chunk: int  # its place among its document's chunks
    score: float
    text: str
    citation: str

    @classmethod
    def of(cls, hit: KnowledgeHit) -> Passage:
        c = hit.chunk
        return cls(
            c.document_id, c.title, c.heading_path, c.location, c.ordinal, hit.score, c.text, citation(c)
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            "documentId": self.documentId,
            "title": self.title,
            "headingPath": self.headingPath,
            "location": self.location,
            "chunk": self.chunk,
            "score": round(self.score, 6),
            "citation": self.citation,
            "text": self.text,
        }


def for_the_model(passages: list[Passage]) -> str:
    """The knowledge tool's answer: each passage numbered, with its title and citation."""
    parts = []
    for n, p in enumerate(passages, 1):
        named = p.title if p.title and p.title != p.documentId else ""
        parts.append(f"[{n}] {named + ' ' if named else ''}{p.citation}\n{p.text}")
    return "\n\n".join(parts)


__all__ = ["Passage", "for_the_model"]
