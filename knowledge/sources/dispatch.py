"""From bytes (or a typed note) to a :class:`ParsedDocument`: format choice, shared checks, census.

``parse_bytes`` is the one entry every ingest path reaches (``parse_source`` reads a file and calls it;
reindex calls it on the base's own copy), so the checks that must hold everywhere live here:

* the type is supported (by the name's suffix; a name no suffix explains is read as text when its first
  bytes are text, :func:`require_text`, and skipped as ``unsupported_type`` when they or the rest are not),
  the size is within ``max_bytes``, the data is not empty or whitespace-only; a single compressed file
  (``notes.md.gz``) is unpacked first, within the same size limit and refusing bombs
  (:mod:`knowledge.sources.compressed`), and its inner name picks the parser;
* whatever a parser raises that is not already a :class:`SourceRejected` becomes ``parse_error`` with a
  fixed reason (the last-resort boundary; parsers map the failures they expect more precisely);
* the metadata passes the census (:func:`assert_declared`). That check is deliberately *outside* the
  boundary: an undeclared field is a bug in Quire, not a property of the file, and must not be recorded
  as a rejected source.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from knowledge.sources.census import assert_declared, blank_metadata
from knowledge.sources.decoding import looks_binary
from knowledge.sources.formats import (
    MAN_PAGE,
    SUPPORTED_SUFFIXES,
    Format,
    add_format,
    format_for,
    inner_name,
    judged_by_content,
    page_description,
    page_description_content,
    suffix_of,
)
from knowledge.sources.markdown import parse_markdown
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.ocr import DEFAULT_LANGUAGE as DEFAULT_OCR_LANGUAGE  # no engine import at module level
from knowledge.sources.plain import parse_code, parse_text
from knowledge.sources.roff import looks_like_roff, parse_man
from knowledge.sources.textutil import clean_text, clean_value, document, line_segments

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
_MIB = 1024 * 1024
SNIFF_BYTES = 8 * 1024  # a file no suffix names is judged by this much of its start (bounded, before the rest)
TEXT_BY_CONTENT = Format("text", "text/plain", by_content=True)
_NO_EXTENSION = "(no known file extension)"

Parser = Callable[..., ParsedDocument]  # (data, fmt, **options)


def _on_first_use(module: str, name: str) -> Parser:
    """A parser whose module (and its library: BeautifulSoup, pypdf, python-docx, ebooklib, ~0.5 s of
    imports together) is imported when the first such file is parsed, not by every process that
    imports this package (the CLI, the app)."""

    def parse(data: bytes, fmt: Format, **options: str | int) -> ParsedDocument:
        real: Callable[..., ParsedDocument] = getattr(importlib.import_module(module), name)
        return real(data, fmt, **options)

    return parse


# Parsers that may run OCR take the base's OCR language (knowledge/sources/ocr.py).
OCR_PARSERS = frozenset({"pdf", "image"})


_PARSERS: dict[str, tuple[Parser, str]] = {
    "text": (parse_text, "text file"),
    "markdown": (parse_markdown, "Markdown file"),
    "code": (parse_code, "source file"),
    "html": (_on_first_use("knowledge.sources.html_page", "parse_html"), "HTML page"),
    "pdf": (_on_first_use("knowledge.sources.pdf", "parse_pdf"), "PDF"),
    "docx": (_on_first_use("knowledge.sources.word", "parse_docx"), "DOCX"),
    "epub": (_on_first_use("knowledge.sources.ebook", "parse_epub"), "EPUB"),
    "image": (_on_first_use("knowledge.sources.image", "parse_image"), "image"),
    "csv": (_on_first_use("knowledge.sources.tables", "parse_csv"), "CSV table"),
    "spreadsheet": (_on_first_use("knowledge.sources.spreadsheet", "parse_spreadsheet"), "spreadsheet"),
    "slides": (_on_first_use("knowledge.sources.slides", "parse_pptx"), "slide deck"),
    "odt": (_on_first_use("knowledge.sources.opendoc", "parse_odt"), "ODT"),
    "odp": (_on_first_use("knowledge.sources.opendoc", "parse_odp"), "ODP"),
    "rtf": (_on_first_use("knowledge.sources.rtf", "parse_rtf"), "RTF"),
    "mail": (_on_first_use("knowledge.sources.mail", "parse_eml"), "e-mail message"),
    "outlook": (_on_first_use("knowledge.sources.outlook", "parse_msg"), "Outlook message"),
    "container": (_on_first_use("knowledge.sources.members", "parse_container"), "archive or mailbox"),
    "roff": (parse_man, "man page"),
}


_EXTRA: dict[str, Parser] = {}
_BUILT_IN_SUFFIXES = frozenset(SUPPORTED_SUFFIXES)


def parse_bytes(
    data: bytes, *, name: str, max_bytes: int = DEFAULT_MAX_BYTES, ocr_language: str = DEFAULT_OCR_LANGUAGE
) -> ParsedDocument:
    """Parse ``data`` as the type ``name``'s suffix says; raise :class:`SourceRejected` if it cannot be.

    PDF pages without a text layer and images are read by OCR in ``ocr_language`` (the base's setting),
    inside this call, so any limit the caller puts on parsing holds for OCR too."""
    fmt = require_format(name) or require_text(name, data[:SNIFF_BYTES])
    check_size(len(data), max_bytes)
    if fmt.compression is not None:  # read as the file inside; bombs refused while unpacking
        from knowledge.sources.compressed import decompress

        data, name = decompress(data, fmt.compression, max_bytes), inner_name(name)
    if not data.strip():
        raise SourceRejected("empty", "file is empty" if not data else "file contains only whitespace")
    judged = fmt is TEXT_BY_CONTENT
    if fmt.by_content:  # no name says the type: a man page or PostScript is told by its first bytes
        fmt = _by_content(data[:SNIFF_BYTES], fmt)
    parse, label = _PARSERS[fmt.parser]
    options: dict[str, str | int] = {"ocr_language": ocr_language} if fmt.parser in OCR_PARSERS else {}
    if fmt.parser == "container":  # which container (zip, tar and its compression, mbox) is in the name
        options = {"name": name, "max_bytes": max_bytes}
    try:
        with failing_as(f"{label} could not be parsed (unexpected content)"):
            parsed = parse(data, fmt, **options)
    except SourceRejected as rejected:
        # a file read for its content that turns out not to be text is a type Quire does not read: skipped
        if judged and rejected.code == "binary":
            raise _not_text(name) from rejected
        if judged and rejected.code == "invalid_encoding":
            raise _not_text(name, "not text in an encoding Quire recognises") from rejected
        raise
    assert_declared(parsed.parser, parsed.metadata)
    return parsed


def register_parser(suffix: str, parse: Parser) -> None:
    """Read ``suffix`` with ``parse`` (``(data, fmt) -> ParsedDocument``, a module-level function) in this
    process. Nothing registers one by itself: the caller imported ``parse``, and the parse process gets the
    same functions handed to it explicitly (:func:`extra_parsers`; ``knowledge.ingest.parse_worker``). Quire
    never imports a module because an environment variable or a file names it."""
    suffix = suffix.lower()
    if not suffix.startswith(".") or suffix in _BUILT_IN_SUFFIXES:
        raise ValueError(f"{suffix!r} is not a new file suffix")
    name = f"extra{suffix}"
    _PARSERS[name] = (parse, f"{suffix} file")
    _EXTRA[suffix] = parse
    add_format(suffix, name)


def extra_parsers() -> dict[str, Parser]:
    """The parsers :func:`register_parser` added in this process, by suffix (to hand to a parse process)."""
    return dict(_EXTRA)


def parse_note(text: str, *, title: str | None) -> ParsedDocument:
    """A note typed in the app: its text as given (line breaks normalised), one segment per line."""
    body = clean_text(text)
    if not body.strip():
        raise SourceRejected("empty", "note is empty")
    metadata = blank_metadata("note")
    metadata["title"] = clean_value(title)
    parsed = document("note", body, line_segments(body), metadata, "text/plain")
    assert_declared(parsed.parser, parsed.metadata)
    return parsed


def require_format(name: str) -> Format | None:
    """The format ``name`` says; ``None`` when the file's content decides (``formats.judged_by_content``);
    ``unsupported_type`` when the name says a type Quire does not read."""
    fmt = format_for(name)
    if fmt is None and not judged_by_content(name):
        why = page_description(name)
        raise SourceRejected("unsupported_type", why or f"unsupported file type {_shown_suffix(name)}")
    return fmt


def require_text(name: str, head: bytes) -> Format:
    """Plain text for a file no suffix names, when its first bytes (at most :data:`SNIFF_BYTES`) are text
    and not PostScript, DVI or PCL."""
    why = page_description_content(head)
    if why:
        raise SourceRejected("unsupported_type", why)
    if looks_binary(head[:SNIFF_BYTES]):
        raise _not_text(name)
    return TEXT_BY_CONTENT


def _by_content(head: bytes, fmt: Format) -> Format:
    """A man page for roff, a refusal for a page-description format, else ``fmt`` (text)."""
    why = page_description_content(head)
    if why:
        raise SourceRejected("unsupported_type", why)
    return MAN_PAGE if looks_like_roff(head) else fmt


def _not_text(name: str, why: str = "its content is not text") -> SourceRejected:
    shown = _shown_suffix(name)
    detail = f"{shown} ({why})" if shown != _NO_EXTENSION else f"(no known file extension, and {why})"
    return SourceRejected("unsupported_type", f"unsupported file type {detail}")


def _shown_suffix(name: str) -> str:
    suffix = suffix_of(name)
    return f"'{suffix[:16]}'" if suffix.isprintable() and suffix else _NO_EXTENSION


def check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise SourceRejected("too_large", f"file is {_megabytes(size)} MB, over the {_megabytes(max_bytes)} MB limit")


def _megabytes(size: int) -> str:
    value = size / _MIB
    text = f"{value:.1f}" if value >= 0.1 else f"{value:.6f}"
    return text.rstrip("0").rstrip(".") or "0"
