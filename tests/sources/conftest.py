"""Shared helpers for the source-parser tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from knowledge.sources import ParsedDocument, Segment, SourceRejected, parse_source

Writer = Callable[[str, bytes], Path]


def assert_tiles(parsed: ParsedDocument) -> None:
    """Segments cover the text exactly, in order, without gaps or overlaps."""
    assert parsed.segments, "a parsed document has at least one segment"
    assert parsed.segments[0].start == 0
    assert parsed.segments[-1].end == len(parsed.text)
    for before, after in zip(parsed.segments, parsed.segments[1:], strict=False):
        assert before.end == after.start
        assert before.start < before.end


def segment_at(parsed: ParsedDocument, needle: str) -> Segment:
    offset = parsed.text.index(needle)
    return next(s for s in parsed.segments if s.start <= offset < s.end)


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    """Write bytes to ``tmp_path/name`` and return the path."""

    def _write(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path

    return _write


def rejected(path: Path, **kwargs: int) -> SourceRejected:
    """The rejection parse_source raises for ``path``, checked to be sanitized."""
    with pytest.raises(SourceRejected) as info:
        parse_source(path, **kwargs)
    error = info.value
    assert error.reason and "\n" not in error.reason
    assert str(path.parent) not in error.reason and "Traceback" not in error.reason
    return error
