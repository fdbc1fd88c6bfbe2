"""The values every parser produces, and the one exception a parser may raise on purpose.

A parser turns bytes into a :class:`ParsedDocument`: the extracted text plus :class:`Segment` records that
tile it exactly (``segments[0].start == 0``, each ``end`` is the next ``start``, the last ``end`` is
``len(text)``), so any chunk offset maps to a page or a source line range. A line segment includes its
``\n``; a page or chapter segment includes the blank-line separator that follows it. Text-like formats
have one segment per source line (``line_start == line_end``, 1-based, counted in the original file
even when Markdown front matter was cut off); PDF has one per page with text (blank pages have none);
EPUB one per chapter; HTML and DOCX one for the whole text.

A file that cannot be ingested raises :class:`SourceRejected`. That is a *terminal* outcome, never retried:
retrying the same bytes gives the same answer, so callers record ``code`` and ``reason`` and
move on. ``reason`` is shown to people and stored, so it never carries paths, tracebacks or library
messages; :func:`failing_as` is the one place where library exceptions are turned into such reasons.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

log = logging.getLogger(__name__)

MetadataValue = str | int | None

RejectCode = Literal[
    "too_large",
    "empty",
    "binary",
    "unsupported_type",
    "invalid_encoding",
    "unreadable",
    "not_regular_file",
    "symlink_not_followed",
    "parse_error",
    "no_text",
    "decompression_bomb",
    "encrypted",
    "nested_too_deep",
]
REJECT_CODES: frozenset[str] = frozenset(get_args(RejectCode))

_MAX_REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class Segment:
    """A contiguous piece of ``ParsedDocument.text`` with where it came from in the source."""

    start: int
    end: int
    page: int | None
    line_start: int | None
    line_end: int | None


@dataclass(frozen=True)
class Member:
    """A file inside a container (an archive's member, a mailbox's message): read like a file, by its name."""

    name: str  # a safe label inside the container (knowledge.sources.members.safe_name), never a path
    data: bytes


@dataclass(frozen=True)
class Refused:
    """A member of a container that is not read, and why (as a :class:`SourceRejected` would say)."""

    name: str
    code: RejectCode
    reason: str


@dataclass(frozen=True)
class ParsedDocument:
    """Extracted text with its locations and the census-declared metadata of one source. A container's
    document also carries its ``members`` (to become child items) and the ``refused`` ones."""

    text: str
    segments: tuple[Segment, ...]
    metadata: dict[str, MetadataValue]
    parser: str
    parser_version: str
    mime: str
    members: tuple[Member, ...] = ()
    refused: tuple[Refused, ...] = ()


class SourceRejected(Exception):
    """The source cannot be ingested: a terminal, recorded outcome with a stable code."""

    code: RejectCode
    reason: str

    def __init__(self, code: RejectCode, reason: str) -> None:
        if code not in REJECT_CODES:
            raise ValueError(f"unknown rejection code {code!r}")
        # One line, bounded: the reason lands in a database column and a status bar.
        clean = " ".join(reason.split())[:_MAX_REASON_CHARS]
        if not clean:
            raise ValueError("a rejection needs a reason")
        # Both values in args keeps the exception picklable (parsing may run in a worker process).
        super().__init__(code, clean)
        self.code = code
        self.reason = clean

    def __str__(self) -> str:
        return f"{self.code}: {self.reason}"


@contextmanager
def failing_as(reason: str) -> Iterator[None]:
    """Turn any library exception raised inside the block into ``parse_error`` with ``reason``.

    This is the boundary where broad catching is right: a malformed file can make a third-party parser
    raise anything, and none of it may escape as a crash or leak into the recorded reason. The original
    exception stays chained (and logged) for whoever debugs it.
    """
    try:
        yield
    except (SourceRejected, MemoryError):
        raise  # a MemoryError is the parse process's limit speaking: the caller answers too_large
    except Exception as exc:
        log.info("parser failure mapped to parse_error: %s", reason, exc_info=True)
        raise SourceRejected("parse_error", reason) from exc
