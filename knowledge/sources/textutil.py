"""Text clean-up and segment building shared by every parser.

Two invariants hold for every ``ParsedDocument.text`` built here:

* ``"\\n"`` is the only line break. ``\\r\\n`` and ``\\r`` become ``\\n``; the other characters that
  :meth:`str.splitlines` treats as breaks (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028/9) become a
  space, so a consumer that splits lines any way it likes still agrees with our line numbers.
* No NUL, no other C0 control except tab, and no lone surrogate: the text can always be encoded as
  UTF-8 and stored in SQLite/FTS5 without surprises.

Segments tile the text: the separator between two blocks belongs to the block before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowledge.sources.formats import PARSER_VERSIONS
from knowledge.sources.model import MetadataValue, ParsedDocument, Segment

_BREAKS_TO_SPACE = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# One pass with a callback: such characters are rare, and str.translate with a table is ~10x slower on
# large non-ASCII text than a regex scan that finds nothing.
_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ud800-\udfff]")
_MAX_METADATA_CHARS = 2000


def _replacement(match: re.Match[str]) -> str:
    char = match.group()
    if char in _BREAKS_TO_SPACE:
        return " "
    return "\ufffd" if "\ud800" <= char <= "\udfff" else ""


def clean_text(text: str) -> str:
    """Normalise line breaks and drop characters that have no place in stored text (see module doc)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _SPECIAL.sub(_replacement, text)


def clean_value(value: object) -> str | None:
    """A metadata string on one line, bounded in length; ``None`` when absent or blank."""
    if value is None:
        return None
    text = " ".join(clean_text(str(value)).split())[:_MAX_METADATA_CHARS]
    return text or None


def line_segments(text: str, first_line: int = 1) -> tuple[Segment, ...]:
    """One segment per line (its ``\\n`` included), numbered from ``first_line`` in the source."""
    segments: list[Segment] = []
    start, line, length = 0, first_line, len(text)
    while start < length:
        newline = text.find("\n", start)
        end = length if newline < 0 else newline + 1
        segments.append(Segment(start, end, None, line, line))
        start, line = end, line + 1
    return tuple(segments)


@dataclass(frozen=True)
class Block:
    """A located piece of text before joining: a page of a PDF, a chapter of an EPUB."""

    text: str
    page: int | None = None


def join_blocks(blocks: Iterable[Block], separator: str = "\n\n") -> tuple[str, tuple[Segment, ...]]:
    """Clean, trim and join non-blank blocks; one segment per block, covering its trailing separator."""
    parts: list[str] = []
    segments: list[Segment] = []
    offset = 0
    for block in blocks:
        body = clean_text(block.text).strip()
        if not body:
            continue
        if parts:
            parts.append(separator)
            previous = segments[-1]
            segments[-1] = Segment(previous.start, offset + len(separator), previous.page, None, None)
            offset += len(separator)
        parts.append(body)
        segments.append(Segment(offset, offset + len(body), block.page, None, None))
        offset += len(body)
    return "".join(parts), tuple(segments)


def document(
    parser: str, text: str, segments: tuple[Segment, ...], metadata: dict[str, MetadataValue], mime: str
) -> ParsedDocument:
    """A :class:`ParsedDocument` stamped with the parser's current version."""
    return ParsedDocument(text, segments, metadata, parser, PARSER_VERSIONS[parser], mime)
