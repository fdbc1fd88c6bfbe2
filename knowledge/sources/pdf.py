"""PDF through pypdf: one segment per page that has text, with its 1-based page number.

Outcomes, each with a fixed reason so the recorded message never depends on pypdf's wording:

* no ``%PDF-`` header, or a structure pypdf cannot read (truncated, damaged) → ``parse_error``;
* encrypted, and the empty user password does not open it → ``parse_error`` "PDF is encrypted";
* pages without a text layer (scans) are rendered with pdfium (``pypdfium2``) at a resolution chosen for
  their print and read by local OCR in parallel (``knowledge/sources/pdf_ocr.py``, ``ocr.py``); pages that
  have a text layer never are, so OCR costs nothing there;
* no text from the text layer nor from OCR → ``no_text``, saying how many pages had no text layer;
* ruled tables (pages that draw a grid, spotted while pypdf walks the page) are read by pdfplumber
  (``knowledge/sources/pdf_tables.py``) and follow their page's text as ``header: value`` rows, located
  on that page, so a search for a cell's value with its column name finds the row.

``metadata["ocr"]`` is the OCR language and ``metadata["ocr_pages"]`` the pages (``1-3,7``) whose text
came from OCR, by which chunks are marked as OCR'd text; both ``None`` when no page needed OCR.

A single page whose text cannot be extracted (a broken font or content stream) is skipped and logged,
not fatal: losing one page beats losing the book. Ligature characters (U+FB00 to U+FB06, common in
typeset PDFs) are expanded so that a search for "file" matches "ﬁle".
"""

from __future__ import annotations

import io
import logging
import unicodedata
from collections.abc import Callable
from datetime import datetime

from pypdf import DocumentInformation, PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError

from knowledge.sources import ocr, pdf_ocr, pdf_tables
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.image import page_ranges
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

log = logging.getLogger(__name__)

# pypdf logs a warning for every robustness fix it applies to a non-compliant file; one sloppy PDF can
# write thousands of lines. Errors still get through.
logging.getLogger("pypdf").setLevel(logging.ERROR)

_HEADER_WINDOW = 1024  # readers accept junk before the header; the PDF spec's tolerance is 1 KiB
_LIGATURES = str.maketrans({chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)})
_DAMAGED = "PDF is damaged or truncated"


def parse_pdf(data: bytes, fmt: Format, *, ocr_language: str = ocr.DEFAULT_LANGUAGE) -> ParsedDocument:
    if b"%PDF-" not in data[:_HEADER_WINDOW]:
        raise SourceRejected("parse_error", "not a PDF file (no %PDF header)")
    reader = _open(data)
    with failing_as(f"{_DAMAGED} (cannot read page tree)"):
        page_count = len(reader.pages)
    if page_count == 0:
        raise SourceRejected("no_text", "PDF has no pages")
    probes = [pdf_tables.RuleProbe() for _ in range(page_count)]
    pages = [_page_text(reader, index, probes[index]) for index in range(page_count)]
    untexted = [index for index, page in enumerate(pages) if not (page or "").strip()]
    ocr_read = pdf_ocr.ocr_pages(data, untexted, ocr_language) if untexted else {}
    texts = [ocr_read.get(index, page or "") for index, page in enumerate(pages)]
    tables = pdf_tables.page_tables(data, [index for index, probe in enumerate(probes) if probe.ruled()])
    text, segments = join_blocks(_page_blocks(texts, tables))
    if not text:
        if None in pages and not ocr_read:
            raise SourceRejected("parse_error", f"{_DAMAGED} (no page text could be read)")
        raise SourceRejected("no_text", _no_text_message(page_count, len(untexted)))
    metadata = blank_metadata("pdf")
    read_pages = page_ranges(index + 1 for index, page in ocr_read.items() if page)
    metadata.update(
        _info_fields(reader),
        page_count=page_count,
        ocr=ocr_language if read_pages else None,
        ocr_pages=read_pages,
    )
    return document("pdf", text, segments, metadata, fmt.mime)


def _page_blocks(texts: list[str], tables: dict[int, list[str]]) -> list[Block]:
    """Each page's text, then its tables' rows, all located on that page."""
    blocks: list[Block] = []
    for index, page in enumerate(texts):
        blocks.append(Block(page, index + 1))
        blocks.extend(Block(table.translate(_LIGATURES), index + 1) for table in tables.get(index, ()))
    return blocks


def _no_text_message(page_count: int, untexted: int) -> str:
    pages = f"{page_count} page{'s' if page_count != 1 else ''}"
    if untexted == page_count:
        return f"no text found: the PDF has {pages} without a text layer (images) and OCR found nothing"
    return f"no text found: the PDF has {pages}, {untexted} without a text layer, and OCR found nothing"


def _open(data: bytes) -> PdfReader:
    with failing_as(f"{_DAMAGED} (cannot read document structure)"):
        reader = PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    if encrypted:
        _decrypt(reader)
    return reader


def _decrypt(reader: PdfReader) -> None:
    """Many PDFs are encrypted only to restrict printing/copying: the empty user password opens them."""
    try:
        result = reader.decrypt("")
    except DependencyError as exc:
        raise SourceRejected("parse_error", "PDF is encrypted with a method Quire cannot read") from exc
    except Exception as exc:
        raise SourceRejected("parse_error", "PDF is encrypted and could not be opened") from exc
    if result == PasswordType.NOT_DECRYPTED:
        raise SourceRejected("parse_error", "PDF is encrypted (a password is needed to open it)")


def _page_text(reader: PdfReader, index: int, probe: pdf_tables.RuleProbe) -> str | None:
    """The page's text, or ``None`` when pypdf fails on it (logged; the other pages still count).
    ``probe`` sees the page's drawing operators on the way, to tell whether the page may hold a table."""
    try:
        return reader.pages[index].extract_text(visitor_operand_before=probe.visit).translate(_LIGATURES)
    except LimitReachedError as exc:  # pypdf's own output cap on one stream: a decompression bomb
        raise SourceRejected("decompression_bomb", "PDF has a stream that expands past the limit; not read") from exc
    except Exception:
        log.info("PDF page %d: text extraction failed; page skipped", index + 1, exc_info=True)
        return None


def _info_fields(reader: PdfReader) -> dict[str, MetadataValue]:
    """The stored document-information fields; a malformed one (a bad date string) becomes ``None``."""
    info = _safely(lambda: reader.metadata)
    if not isinstance(info, DocumentInformation):
        return {}
    return {
        "title": clean_value(_safely(lambda: info.title)),
        "author": clean_value(_safely(lambda: info.author)),
        "subject": clean_value(_safely(lambda: info.subject)),
        "keywords": clean_value(_safely(lambda: info.keywords)),
        "created": _iso(_safely(lambda: info.creation_date)),
        "modified": _iso(_safely(lambda: info.modification_date)),
    }


def _safely(read: Callable[[], object]) -> object:
    try:
        return read()
    except Exception:
        log.info("PDF metadata field unreadable; stored as empty", exc_info=True)
        return None


def _iso(value: object) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None
