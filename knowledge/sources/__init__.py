"""Parsing source files into text with locations and census-declared metadata.

The package is pure Python over pypdf, python-docx, ebooklib, BeautifulSoup/lxml and
charset-normalizer; it imports no Qt and no torch, keeps no state between calls, and is safe to call
from several worker threads or processes at once.

Entry points: :func:`parse_source` (a path; refuses non-regular files without opening them),
:func:`parse_bytes` (bytes plus a name whose suffix picks the parser, e.g. the base's own stored copy)
and :func:`parse_note`. Every refusal is a :class:`SourceRejected` with a stable ``code`` and a
sanitized ``reason``; anything else escaping is a bug. See :mod:`knowledge.sources.census` for the
metadata each parser stores or excludes, and :mod:`knowledge.sources.model` for the segment invariants.
"""

from knowledge.sources.dispatch import DEFAULT_MAX_BYTES, parse_bytes, parse_note
from knowledge.sources.files import parse_source
from knowledge.sources.formats import PARSER_VERSIONS, SUPPORTED_SUFFIXES, is_supported, unsupported_reason
from knowledge.sources.model import REJECT_CODES, ParsedDocument, RejectCode, Segment, SourceRejected

__all__ = [
    "DEFAULT_MAX_BYTES",
    "PARSER_VERSIONS",
    "REJECT_CODES",
    "SUPPORTED_SUFFIXES",
    "ParsedDocument",
    "RejectCode",
    "Segment",
    "SourceRejected",
    "is_supported",
    "parse_bytes",
    "parse_note",
    "parse_source",
    "unsupported_reason",
]
