"""A single compressed file read as the file inside: gzip, bzip2 and xz, with the bomb checks."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from pathlib import Path

import pytest

from knowledge.sources import SourceRejected, archive, is_supported, parse_bytes, parse_source
from knowledge.sources.formats import format_for

from .builders import PNG_BYTES, make_pdf
from .conftest import Writer, rejected, segment_at

MARKDOWN = b"---\ntitle: Release notes\n---\n# Changes\n\nFixed the frobnicator.\n"


def test_which_compressed_names_are_read() -> None:
    for name in ("notes.md.gz", "changelog.gz", "changelog.Debian.gz", "x.txt.xz", "NEWS.bz2", "a.PDF.GZ"):
        assert is_supported(Path(name)), name
    for name in ("x.zip.gz", "twice.md.gz.gz", ".gz", "x.7z.xz"):
        assert not is_supported(Path(name)), name
    for name in ("archive.tar.gz", "archive.tar.xz", "a.tgz"):  # containers: their files become children
        assert is_supported(Path(name)) and format_for(name).parser == "container", name  # type: ignore[union-attr]


def test_markdown_inside_gzip_is_markdown_with_its_source_lines(write: Writer) -> None:
    parsed = parse_source(write("notes.md.gz", gzip.compress(MARKDOWN)))
    assert (parsed.parser, parsed.mime) == ("markdown", "text/markdown")
    assert parsed.metadata["title"] == "Release notes"
    assert segment_at(parsed, "frobnicator").line_start == 6  # counted in the file inside


@pytest.mark.parametrize(
    ("name", "pack"),
    [("changelog.gz", gzip.compress), ("changelog.Debian.bz2", bz2.compress), ("trace.log.xz", lzma.compress)],
)
def test_inner_name_without_a_known_suffix_is_text(write: Writer, name: str, pack: object) -> None:
    parsed = parse_source(write(name, pack(b"pkg (1.2-1) unstable; urgency=low\n  * Fix the widget.\n")))  # type: ignore[operator]
    assert parsed.parser == "text" and parsed.text.endswith("Fix the widget.\n")


def test_concatenated_members_are_read_in_order(write: Writer) -> None:
    data = gzip.compress(b"first part\n") + gzip.compress(b"second part\n") + b"\x00" * 8
    assert parse_source(write("joined.txt.gz", data)).text == "first part\nsecond part\n"
    streams = bz2.compress(b"one\n") + bz2.compress(b"two\n")
    assert parse_source(write("joined.txt.bz2", streams)).text == "one\ntwo\n"


def test_pdf_and_binary_inside(write: Writer) -> None:
    assert parse_source(write("paper.pdf.gz", gzip.compress(make_pdf([["Inside a gzip"]])))).parser == "pdf"
    assert rejected(write("logo.bin.gz", gzip.compress(PNG_BYTES * 50))).code == "binary"


def test_bomb_is_refused_before_it_is_unpacked(write: Writer) -> None:
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024), 9)  # 64 MiB of zeros in ~64 KB
    error = rejected(write("bomb.txt.gz", bomb))
    assert error.code == "decompression_bomb" and "not unpacked" in error.reason
    xz_bomb = lzma.compress(b"A" * (32 * 1024 * 1024))
    assert rejected(write("bomb.md.xz", xz_bomb)).code == "decompression_bomb"


def test_inner_file_over_the_size_limit_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    text = b"".join(b"line %d of a long log, nothing repeats exactly\n" % n for n in range(5000))
    with pytest.raises(SourceRejected) as info:
        parse_bytes(gzip.compress(text), name="big.log.gz", max_bytes=100_000)
    assert info.value.code == "too_large" and "expands" in info.value.reason
    monkeypatch.setattr(archive, "MAX_RATIO", 2)  # the ratio bound is the ZIP check's own
    monkeypatch.setattr(archive, "RATIO_FLOOR", 1000)
    with pytest.raises(SourceRejected) as info:
        parse_bytes(gzip.compress(text), name="big.log.gz")
    assert info.value.code == "decompression_bomb"


def test_damaged_and_empty_compressed_files(write: Writer) -> None:
    assert rejected(write("cut.md.gz", gzip.compress(MARKDOWN * 50)[:-40])).code == "parse_error"
    assert rejected(write("fake.txt.gz", b"plain text, not gzip")).code == "parse_error"
    assert rejected(write("fake.txt.xz", zlib.compress(b"zlib is not xz"))).code == "parse_error"
    assert rejected(write("nothing.txt.gz", gzip.compress(b""))).code == "empty"
