"""Real files for the knowledge tests, made here: PDFs (hand-built text pages, then pypdf for the
outline, encryption and a scan-like page), a Word .docx (python-docx), HTML and Markdown; and a
small real embedding model."""

from __future__ import annotations

import hashlib
import io
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """A PDF whose pages show these texts (one line each, Helvetica), built byte by byte."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 11 Tf 40 760 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
            f" /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    data = out.getvalue()
    if title is None:
        return data
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.add_metadata({"/Title": title})
    return _written(writer)


def pdf_with_outline(pages: list[str], outline: list[tuple[str, int, str | None]]) -> bytes:
    """``outline``: (title, page index, parent title or None)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(pages))))
    made = {}
    for title, page, parent in outline:
        made[title] = writer.add_outline_item(
            title=title, page_number=page, parent=made.get(parent) if parent else None
        )
    return _written(writer)


def encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(["A secret page about salaries."]))))
    writer.encrypt("s3cret", algorithm="AES-128")
    return _written(writer)


def scanned_pdf() -> bytes:
    """Pages with no text layer (what a scanner without OCR produces)."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    writer.add_blank_page(width=612, height=792)
    return _written(writer)


def _written(writer: object) -> bytes:
    out = io.BytesIO()
    writer.write(out)  # type: ignore[attr-defined]
    return out.getvalue()


def docx(*, title: str | None = "Staff guide") -> bytes:
    from docx import Document

    doc = Document()
    if title:
        doc.core_properties.title = title
    doc.add_heading("Billing", level=1)
    doc.add_paragraph("Invoices go out on the first working day of each month.")
    doc.add_heading("Refunds", level=2)
    doc.add_paragraph("Refunds reach the original card within five business days.")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Plan", "Refund window"
    table.cell(1, 0).text, table.cell(1, 1).text = "Pro", "30 days"
    doc.add_heading("Security", level=1)
    doc.add_paragraph("Two-factor authentication protects every account.")
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


HTML = """<!doctype html><html><head><title>Help centre</title><script>var tracking = 1;</script></head>
<body><nav>Home | Pricing | Login</nav>
<h1>Shipping</h1><p>Orders leave the Rotterdam warehouse within a day.</p>
<h2>Express</h2><p>Express delivery takes two days inside the EU.</p>
<h1>Returns</h1><ul><li>Returns are free for thirty days.</li></ul>
<footer>Copyright Acme</footer></body></html>"""

MARKDOWN = """# Handbook

Welcome to the handbook.

## Billing

Invoices are monthly.

### Refunds

Refunds are paid within 14 days.

```
# not a heading: inside a code block
```

Leave policy
------------

Everyone gets 25 days of leave.
"""


class BagOfWordsEmbedder:
    """A real (if small) embedding: each word hashed into one of 64 dimensions, L2-normalised.
    Texts sharing words are near; it knows nothing of stems, so it disagrees with FTS5 usefully."""

    model = "bag-of-words-64"
    dimensions = 64

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

    def embed(self, texts: Sequence[str], *, purpose: str) -> list[list[float]]:
        self.calls.append((len(texts), purpose))
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for word in text.lower().replace(".", " ").replace(";", " ").split():
                v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out
