"""Text out of an uploaded file, in sections that keep their headings: PDF, Word .docx, HTML,
Markdown and plain text.

Each format is read by a maintained library, imported when a file of its type arrives (no
handler's cold start loads them; they are the ``knowledge`` extra, and in the Lambda layer):

* **PDF**: ``pypdf`` (pure Python, no system library). One section per page, located ``p.<n>``;
  the heading path of a page is the PDF's outline (bookmarks) entry that starts at or before it.
  An encrypted PDF is refused (``encrypted_document``), and so is one whose pages hold no text
  (``no_text_layer``: a scan needs OCR first, which this server does not run). pypdf's own limits
  on decompressed streams stop PDF bombs (``document_too_large``).
* **Word**: ``python-docx``. Paragraphs styled ``Heading <n>`` open sections (``Title`` names the
  document); tables are read row by row, cells joined by `` | ``, in body order. A file whose zip
  would expand past ``MAX_UNZIPPED_BYTES`` is refused unread (``document_too_large``).
* **HTML**: ``beautifulsoup4`` with the ``lxml`` parser, rather than a main-content extractor
  such as trafilatura: knowledge pages are the author's own documents, not web pages with
  boilerplate to guess away, and the ``h1``–``h6`` structure is what the chunks' heading paths
  are made of, which bs4 keeps and trafilatura flattens. ``script``, ``style``, ``nav``,
  ``header``, ``footer``, ``aside``, ``form`` and ``noscript`` are dropped.
* **Markdown**: ATX (``# Title``) and setext (``Title\\n===``) headings open sections; fenced code
  blocks are kept as they are (a ``#`` inside them is not a heading).
* **Text**: one section.

The type is the file name's extension, else the Content-Type; anything else is refused
(``unsupported_document_type``). A file that cannot be read as its type is ``invalid_document``.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.errors import (
    DocumentTooLarge,
    EncryptedDocument,
    InvalidDocument,
    NoTextLayer,
    UnsupportedDocumentType,
)

if TYPE_CHECKING:
    from collections.abc import Callable

DOCUMENT_TYPES = ("pdf", "docx", "html", "markdown", "text")
_BY_EXTENSION = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
_BY_MEDIA_TYPE = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
}
MIN_PDF_TEXT = 16  # characters of text a PDF must hold over all its pages to count as having text
MAX_UNZIPPED_BYTES = 256 * 1024 * 1024  # a .docx is a zip: what it may expand to (zip bombs)


@dataclass
class Section:
    """A run of a document's text under one heading path, at one location."""

    headings: list[str]
    location: str
    text: str


@dataclass
class Extracted:
    """A document's title (its own, else ``None``) and its sections in reading order."""

    type: str
    title: str | None
    sections: list[Section] = field(default_factory=list)


def document_type(filename: str, content_type: str | None) -> str:
    """``pdf``, ``docx``, ``html``, ``markdown`` or ``text``, by extension then media type."""
    lowered = filename.lower()
    for extension, kind in _BY_EXTENSION.items():
        if lowered.endswith(extension):
            return kind
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _BY_MEDIA_TYPE:
        return _BY_MEDIA_TYPE[media]
    raise UnsupportedDocumentType(
        f"{filename}: not a type knowledge reads (PDF, .docx, HTML, Markdown or text: "
        f"{', '.join(sorted(_BY_EXTENSION))})"
    )


def read_document(data: bytes, kind: str) -> Extracted:
    """The sections of a file of type ``kind`` (``document_type``)."""
    readers: dict[str, Callable[[bytes], Extracted]] = {
        "pdf": _pdf,
        "docx": _docx,
        "html": _html,
        "markdown": lambda d: _markdown(_decode(d)),
        "text": lambda d: Extracted("text", None, [Section([], "", _decode(d))]),
    }
    return readers[kind](data)


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data[:4096]:
        raise InvalidDocument("the file holds binary data, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # every byte string decodes; text files are often Windows-1252


# -- PDF -----------------------------------------------------------------------------------------


def _pdf(data: bytes) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise EncryptedDocument("the PDF is encrypted: upload it without its password protection")
        pages = [page.extract_text() or "" for page in reader.pages]
        outline = _pdf_outline(reader)
        meta = reader.metadata
        title = (meta.title if meta is not None else None) or None
    except LimitReachedError:  # pypdf's guard against decompression bombs
        raise DocumentTooLarge("the PDF's streams expand past what pypdf reads") from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise InvalidDocument(f"the PDF cannot be read ({type(exc).__name__})") from None
    if sum(len(p.strip()) for p in pages) < MIN_PDF_TEXT:
        raise NoTextLayer(
            f"the PDF's {len(pages)} page(s) hold no text (a scan?): run OCR on it, then upload the result"
        )
    sections = []
    for number, text in enumerate(pages, 1):
        headings = outline.get(number) or []
        if text.strip():
            sections.append(Section(headings, f"p.{number}", text))
    return Extracted("pdf", str(title).strip() or None if title else None, sections)


def _pdf_outline(reader: Any) -> dict[int, list[str]]:
    """For each page (from 1), the heading path of the outline entry in force on it."""
    starts: list[tuple[int, list[str]]] = []

    def walk(items: list[Any], path: list[str]) -> None:
        last: list[str] = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            try:
                page = reader.get_destination_page_number(item) + 1
            except Exception:  # an entry pointing nowhere: skipped, the text is what matters
                continue
            last = [*path, str(item.title).strip()]
            starts.append((page, last))

    try:
        walk(reader.outline, [])
    except Exception:  # a broken outline costs the headings, never the document
        return {}
    starts.sort(key=lambda s: s[0])
    out: dict[int, list[str]] = {}
    current: list[str] = []
    entries = iter(starts)
    pending = next(entries, None)
    for number in range(1, len(reader.pages) + 1):
        while pending is not None and pending[0] <= number:
            current = pending[1]
            pending = next(entries, None)
        out[number] = current
    return out


# -- Word ----------------------------------------------------------------------------------------

_HEADING_STYLE = re.compile(r"^Heading (\d)$")


def _docx(data: bytes) -> Extracted:
    import zipfile

    from docx import Document as open_docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        expanded = sum(item.file_size for item in zipfile.ZipFile(io.BytesIO(data)).infolist())
        if expanded > MAX_UNZIPPED_BYTES:
            raise DocumentTooLarge(
                f"the .docx file expands to {expanded} bytes (at most {MAX_UNZIPPED_BYTES})"
            )
        doc = open_docx(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise InvalidDocument(f"the .docx file cannot be read ({type(exc).__name__})") from None
    title = (doc.core_properties.title or "").strip() or None
    sections: list[Section] = []
    headings: list[str] = []
    lines: list[str] = []

    def close() -> None:
        text = "\n\n".join(lines).strip()
        if text:
            sections.append(Section(list(headings), headings[-1] if headings else "", text))
        lines.clear()

    for element in doc.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(element, doc)
            text = paragraph.text.strip()
            style = paragraph.style.name if paragraph.style is not None else ""
            level = _HEADING_STYLE.match(style or "")
            if style == "Title" and text:
                title = title or text
            elif level and text:
                close()
                depth = int(level.group(1))
                del headings[depth - 1 :]
                headings.append(text)
            elif text:
                lines.append(text)
        elif tag == "tbl":
            table = Table(element, doc)
            rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
            lines.append("\n".join(r for r in rows if r.strip(" |")))
    close()
    return Extracted("docx", title, sections)


# -- HTML ----------------------------------------------------------------------------------------

_DROPPED = ("script", "style", "nav", "header", "footer", "aside", "form", "noscript", "template")
_BLOCKS = {"p", "li", "pre", "blockquote", "td", "th", "dd", "dt", "figcaption", "caption"}


def _html(data: bytes) -> Extracted:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "lxml")
    for tag in soup(list(_DROPPED)):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    body = soup.body or soup
    sections: list[Section] = []
    headings: list[str] = []
    lines: list[str] = []

    def close() -> None:
        text = "\n\n".join(lines).strip()
        if text:
            sections.append(Section(list(headings), headings[-1] if headings else "", text))
        lines.clear()

    for element in body.find_all(True):
        name = element.name or ""
        if len(name) == 2 and name[0] == "h" and name[1] in "123456":
            text = element.get_text(" ", strip=True)
            if text:
                close()
                del headings[int(name[1]) - 1 :]
                headings.append(text)
        elif name in _BLOCKS and not element.find_parent(list(_BLOCKS)):
            text = element.get_text("\n" if name == "pre" else " ", strip=name != "pre")
            if text.strip():
                lines.append(text)
    close()
    if not sections:  # no block elements: the page's bare text
        text = body.get_text("\n", strip=True)
        if text:
            sections.append(Section([], "", text))
    return Extracted("html", title or None, sections)


# -- Markdown ------------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _markdown(text: str) -> Extracted:
    sections: list[Section] = []
    headings: list[str] = []
    lines: list[str] = []
    title: str | None = None
    fence: str | None = None

    def close() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(list(headings), headings[-1] if headings else "", body))
        lines.clear()

    def heading(depth: int, name: str) -> None:
        nonlocal title
        close()
        if depth == 1 and title is None:
            title = name
        del headings[depth - 1 :]
        headings.extend([""] * (depth - 1 - len(headings)))  # a ## under no #: an empty level
        headings.append(name)

    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            lines.append(line)
            if opened and opened.group(1) == fence:
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            lines.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            heading(len(atx.group(1)), atx.group(2))
            continue
        setext = _SETEXT.match(line)
        if setext and lines and lines[-1].strip():
            name = lines.pop().strip()
            heading(1 if setext.group(1)[0] == "=" else 2, name)
            continue
        lines.append(line)
    close()
    for section in sections:
        section.headings = [h for h in section.headings if h]
    return Extracted("markdown", title, sections)


__all__ = ["DOCUMENT_TYPES", "Extracted", "Section", "document_type", "read_document"]
