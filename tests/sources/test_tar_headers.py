"""Tar extended headers that the interpreter's tarfile would parse in quadratic time are refused first."""

from __future__ import annotations

import io
import tarfile
import time

import pytest

from knowledge.sources import SourceRejected
from knowledge.sources.members import unpack
from tests.sources.builders import tar_of

MB = 1024 * 1024


def _raw_header(kind: bytes, payload: bytes) -> bytes:
    """A tar header block of type ``kind`` carrying ``payload``, then a regular member and the end blocks."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = kind
    info.size = len(payload)
    head = info.tobuf(format=tarfile.USTAR_FORMAT)
    padded = payload + b"\0" * (-len(payload) % tarfile.BLOCKSIZE)
    member = tarfile.TarInfo("note.txt")
    member.size = 5
    body = member.tobuf(format=tarfile.USTAR_FORMAT) + b"words" + b"\0" * (tarfile.BLOCKSIZE - 5)
    return head + padded + body + b"\0" * (2 * tarfile.BLOCKSIZE)


def _refused(data: bytes) -> SourceRejected:
    started = time.monotonic()
    with pytest.raises(SourceRejected) as info:
        unpack(data, "crafted.tar", max_bytes=MB)
    assert time.monotonic() - started < 1.0
    return info.value


def test_a_pax_header_of_digits_is_refused_not_parsed_for_seconds() -> None:
    # 20 KB of digits: tarfile's hdrcharset search backtracks over it (about 1 s here, 4 s at 40 KB).
    error = _refused(_raw_header(tarfile.XHDTYPE, b"1" * 20_000))
    assert error.code == "parse_error" and "extended header" in error.reason


def test_records_without_their_equals_sign_are_refused() -> None:
    # Each "2 " record makes tarfile scan to the only "=" at the end: quadratic in the record count.
    assert _refused(_raw_header(tarfile.XHDTYPE, b"2 " * 20_000 + b"k=v\n")).code == "parse_error"


def test_an_oversized_extended_header_or_long_name_is_too_large() -> None:
    record = b"path=" + b"a" * (300 * 1024) + b"\n"
    record = str(len(record) + 7).encode() + b" " + record
    assert _refused(_raw_header(tarfile.XHDTYPE, record)).code == "too_large"
    assert _refused(_raw_header(tarfile.GNUTYPE_LONGNAME, b"n" * (300 * 1024))).code == "too_large"


def test_ordinary_pax_and_gnu_tars_are_read() -> None:
    long_name = "deep/" * 40 + "notes.txt"  # over 100 characters: a pax path record / a GNU long name
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tf:
            info = tarfile.TarInfo(long_name)
            info.size = 5
            info.pax_headers = {"comment": "x" * 2000} if fmt == tarfile.PAX_FORMAT else {}
            tf.addfile(info, io.BytesIO(b"hello"))
        found = unpack(buffer.getvalue(), "ok.tar", max_bytes=MB)
        assert [(m.name, m.data) for m in found.members] == [(long_name, b"hello")]
    assert [m.name for m in unpack(tar_of({"a.txt": b"x"}), "t.tar", max_bytes=MB).members] == ["a.txt"]
