"""Files read into sections by the real libraries (pypdf, python-docx, beautifulsoup4 + lxml) and
cut into chunks that keep their heading path and location; bad files refused with stable codes."""

from __future__ import annotations

import pytest

from agentvm.errors import (
    DocumentTooLarge,
    EncryptedDocument,
    InvalidDocument,
    NoTextLayer,
    UnsupportedDocumentType,
)
from agentvm.ports import KnowledgeChunk
from agentvm.resources.chunking import MAX_CHARS, chunk_sections, citation, pack
from agentvm.resources.extract import Section, document_type, read_document
from tests import knowledge_files as files


def test_a_pdf_is_read_page_by_page_with_its_title():
    got = read_document(
        files.pdf(["Refunds are paid in 14 days.", "Shipping takes two days."], title="Handbook"), "pdf"
    )
    assert got.title == "Handbook"
    assert [(s.location, s.text) for s in got.sections] == [
        ("p.1", "Refunds are paid in 14 days."),
        ("p.2", "Shipping takes two days."),
    ]


def test_a_pdf_outline_gives_its_pages_heading_paths():
    data = files.pdf_with_outline(
        ["Welcome to the guide.", "Refund rules are strict.", "Parcels leave daily."],
        [("Billing", 1, None), ("Refunds", 1, "Billing"), ("Shipping", 2, None)],
    )
    chunks = chunk_sections("guide.pdf", "Guide", read_document(data, "pdf").sections)
    assert [(c.location, c.heading_path) for c in chunks] == [
        ("p.1", ""),
        ("p.2", "Billing > Refunds"),
        ("p.3", "Shipping"),
    ]
    assert citation(chunks[1]) == "[guide.pdf p.2 — Billing > Refunds]"
    assert citation(chunks[0]) == "[guide.pdf p.1]"


def test_a_word_document_keeps_heading_levels_tables_and_title():
    got = read_document(files.docx(), "docx")
    assert got.title == "Staff guide"
    assert [s.headings for s in got.sections] == [["Billing"], ["Billing", "Refunds"], ["Security"]]
    refunds = got.sections[1].text
    assert "five business days" in refunds and "Pro | 30 days" in refunds  # the table, in body order


def test_html_headings_nest_and_page_furniture_is_dropped():
    got = read_document(files.HTML.encode(), "html")
    assert got.title == "Help centre"
    assert [(s.headings, s.text) for s in got.sections] == [
        (["Shipping"], "Orders leave the Rotterdam warehouse within a day."),
        (["Shipping", "Express"], "Express delivery takes two days inside the EU."),
        (["Returns"], "Returns are free for thirty days."),
    ]
    everything = " ".join(s.text for s in got.sections)
    assert "tracking" not in everything and "Pricing" not in everything and "Copyright" not in everything


def test_markdown_headings_atx_and_setext_but_not_inside_code():
    got = read_document(files.MARKDOWN.encode(), "markdown")
    assert got.title == "Handbook"
    assert [" > ".join(s.headings) for s in got.sections] == [
        "Handbook",
        "Handbook > Billing",
        "Handbook > Billing > Refunds",
        "Handbook > Leave policy",
    ]
    assert "# not a heading" in got.sections[2].text


def test_plain_text_is_one_section_and_a_bom_is_dropped():
    got = read_document(b"\xef\xbb\xbfJust some notes.\n\nA second paragraph.", "text")
    assert got.title is None
    assert [s.text for s in got.sections] == ["Just some notes.\n\nA second paragraph."]


@pytest.mark.parametrize(
    ("filename", "content_type", "kind"),
    [
        ("a.PDF", None, "pdf"),
        ("b.docx", None, "docx"),
        ("c.htm", None, "html"),
        ("d.md", None, "markdown"),
        ("e.txt", None, "text"),
        ("upload", "application/pdf", "pdf"),
        ("upload", "text/markdown; charset=utf-8", "markdown"),
    ],
)
def test_the_type_comes_from_the_extension_then_the_media_type(filename, content_type, kind):
    assert document_type(filename, content_type) == kind


def test_an_unknown_type_is_refused_with_its_code():
    with pytest.raises(UnsupportedDocumentType) as refused:
        document_type("photo.jpg", "image/jpeg")
    assert refused.value.code == "unsupported_document_type"


@pytest.mark.parametrize(
    ("data", "kind", "error", "code"),
    [
        (files.encrypted_pdf(), "pdf", EncryptedDocument, "encrypted_document"),
        (files.scanned_pdf(), "pdf", NoTextLayer, "no_text_layer"),
        (b"%PDF-1.4\nthis is not really a pdf", "pdf", InvalidDocument, "invalid_document"),
        (b"PK\x03\x04 truncated zip", "docx", InvalidDocument, "invalid_document"),
        (b"\x00\x01\x02binary", "text", InvalidDocument, "invalid_document"),
    ],
)
def test_unreadable_files_are_refused_with_stable_codes(data, kind, error, code):
    with pytest.raises(error) as refused:
        read_document(data, kind)
    assert refused.value.code == code


def test_a_docx_that_would_expand_past_the_limit_is_refused_unread(monkeypatch):
    import agentvm.resources.extract as extract_module

    monkeypatch.setattr(extract_module, "MAX_UNZIPPED_BYTES", 10_000)
    with pytest.raises(DocumentTooLarge) as refused:
        read_document(files.docx(), "docx")  # python-docx's template alone is ~30 KB unzipped
    assert refused.value.code == "document_too_large"


def test_chunks_pack_paragraphs_and_cut_long_ones_at_sentences():
    sentence = "Refunds are paid back to the card that paid within five business days. "
    long_paragraph = sentence * 60  # ~4,300 characters: cut at sentence ends
    short = ["A short paragraph about invoices.", "Another about shipping."]
    pieces = pack("\n\n".join([*short, long_paragraph]))
    assert pieces[0] == "A short paragraph about invoices.\n\nAnother about shipping." or pieces[
        0
    ].startswith("A short paragraph")
    assert all(len(p) <= MAX_CHARS for p in pieces)
    assert all(p.rstrip().endswith(".") for p in pieces)  # whole sentences
    assert sum(1 for p in pieces if len(p) >= 1000) >= 2  # packed towards the target, not one per sentence
    assert "".join(pieces).replace("\n", "").replace(" ", "") == (
        "".join([*short, long_paragraph]).replace(" ", "")
    )


def test_a_word_longer_than_a_chunk_is_cut_at_the_limit():
    assert [len(p) for p in pack("x" * (MAX_CHARS * 2 + 10))] == [MAX_CHARS, MAX_CHARS, 10]


def test_chunks_never_cross_sections_and_number_in_reading_order():
    sections = [
        Section(["Billing"], "Billing", "Invoices."),
        Section(["Billing", "Refunds"], "Refunds", "Paid."),
    ]
    assert chunk_sections("h.md", "Handbook", sections) == [
        KnowledgeChunk("h.md", "Handbook", "Billing", "Billing", 0, "Invoices."),
        KnowledgeChunk("h.md", "Handbook", "Billing > Refunds", "Refunds", 1, "Paid."),
    ]
