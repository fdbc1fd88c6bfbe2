"""The package contract others code against: interface, invariants, sanitized failures, isolation."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from knowledge.sources import (
    PARSER_VERSIONS,
    REJECT_CODES,
    SUPPORTED_SUFFIXES,
    ParsedDocument,
    Segment,
    SourceRejected,
    dispatch,
    is_supported,
    parse_bytes,
    parse_source,
)
from knowledge.sources.formats import Format

from .conftest import assert_tiles
from .test_census import FIXTURES


@pytest.mark.parametrize("parser", sorted(FIXTURES))
def test_every_parser_tiles_its_text_and_stamps_its_version(parser: str) -> None:
    parsed = FIXTURES[parser]()
    assert_tiles(parsed)
    assert parsed.parser_version == PARSER_VERSIONS[parser]
    assert "\r" not in parsed.text and "\x00" not in parsed.text
    assert parsed.text.encode("utf-8")  # always storable


def test_supported_suffixes_and_is_supported() -> None:
    assert all(s.startswith(".") and s == s.lower() for s in SUPPORTED_SUFFIXES)
    assert {".txt", ".md", ".py", ".html", ".pdf", ".docx", ".epub", ".json", ".yml"} <= SUPPORTED_SUFFIXES
    assert is_supported(Path("Report.PDF")) and is_supported(PurePosixPath("/x/y/notes.Md"))
    assert is_supported(Path("photo.png")) and is_supported(Path("scan.TIFF"))  # read by OCR (issue 12)
    assert not is_supported(Path("notes.7z")) and not is_supported(Path("archive.rar"))
    assert is_supported(Path("Makefile")) and is_supported(Path("notes.2024"))  # their content decides (issue 46)


def test_name_may_carry_directories() -> None:
    assert parse_bytes(b"x = 1\n", name="some/dir/Module.PY").metadata["language"] == "python"


def test_library_failures_become_sanitized_parse_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(data: bytes, fmt: Format) -> ParsedDocument:
        raise RuntimeError("cannot open /home/ann/private/diary.txt\nTraceback (most recent call last)")

    monkeypatch.setitem(dispatch._PARSERS, "text", (explode, "text file"))
    with pytest.raises(SourceRejected) as info:
        parse_bytes(b"hello", name="diary.txt")
    assert (info.value.code, info.value.reason) == ("parse_error", "text file could not be parsed (unexpected content)")
    assert isinstance(info.value.__cause__, RuntimeError)  # kept for logs, never in the reason


def test_reasons_never_contain_the_path(tmp_path: Path) -> None:
    cases = {"a.pdf": b"%PDF-1.4 nonsense", "b.docx": b"nope", "c.txt": b"\x00\x01", "d.exe": b"MZ"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SourceRejected) as info:
            parse_source(tmp_path / name)
        assert str(tmp_path) not in info.value.reason and name not in info.value.reason


def test_source_rejected_shape() -> None:
    error = SourceRejected("parse_error", "  two\nlines  ")
    assert (error.code, error.reason, str(error)) == ("parse_error", "two lines", "parse_error: two lines")
    copy = pickle.loads(pickle.dumps(error))  # parsing may run in a worker process
    assert (copy.code, copy.reason) == (error.code, error.reason)
    assert len(SourceRejected("empty", "x" * 1000).reason) == 300
    with pytest.raises(ValueError):
        SourceRejected("exploded", "reason")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SourceRejected("empty", "   ")
    assert {
        "too_large", "empty", "binary", "unsupported_type", "invalid_encoding", "unreadable",
        "not_regular_file", "parse_error", "no_text", "decompression_bomb", "symlink_not_followed", "encrypted",
        "nested_too_deep",
    } == REJECT_CODES  # fmt: skip


def test_parsed_document_is_frozen_and_picklable() -> None:
    parsed = parse_bytes(b"a\nb\n", name="a.txt")
    assert pickle.loads(pickle.dumps(parsed)) == parsed
    with pytest.raises(AttributeError):
        parsed.text = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        parsed.segments[0].start = 5  # type: ignore[misc]
    assert parsed.segments[0] == Segment(0, 2, None, 1, 1)


def test_imports_no_qt_and_no_torch() -> None:
    code = (
        "import sys, knowledge.sources\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'torch', 'sentence_transformers'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2], timeout=60)
