"""Plain text and source code: decoded text, one segment per source line.

The text is the file's own text (line breaks normalised), so a segment's ``line_start`` is the line an
editor shows. Nothing is stripped or reflowed: a chunk viewer can point at the exact lines.
"""

from __future__ import annotations

from knowledge.sources.census import blank_metadata
from knowledge.sources.decoding import Decoded, decode_text
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected
from knowledge.sources.textutil import clean_text, document, line_segments


def decode_nonblank(data: bytes, declared: str | None = None) -> Decoded:
    """Decoded, cleaned text; ``empty`` when nothing but whitespace (or a bare BOM) remains."""
    decoded = decode_text(data, declared)
    text = clean_text(decoded.text)
    if not text.strip():
        raise SourceRejected("empty", "file contains only whitespace")
    return Decoded(text, decoded.encoding)


def parse_text(data: bytes, fmt: Format) -> ParsedDocument:
    decoded = decode_nonblank(data)
    metadata = blank_metadata("text")
    metadata["encoding"] = decoded.encoding
    return document("text", decoded.text, line_segments(decoded.text), metadata, fmt.mime)


def parse_code(data: bytes, fmt: Format) -> ParsedDocument:
    decoded = decode_nonblank(data)
    metadata = blank_metadata("code")
    metadata.update(encoding=decoded.encoding, language=fmt.language)
    return document("code", decoded.text, line_segments(decoded.text), metadata, fmt.mime)
