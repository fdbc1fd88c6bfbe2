"""Crafted Outlook messages: bytes that name a file are never opened as that file, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.sources import SourceRejected, parse_bytes
from tests.sources.office_builders import make_msg


def test_a_msg_whose_bytes_are_a_path_is_not_read_from_that_path(tmp_path: Path) -> None:
    """olefile takes bytes shorter than a compound file for a file *name*: handed straight to it, this
    .msg would be read from the other message on disk. It is refused as what it is instead."""
    elsewhere = tmp_path / "private.msg"
    elsewhere.write_bytes(make_msg("Private salary figures", plain="not in this file"))
    try:
        parsed = parse_bytes(str(elsewhere).encode(), name="innocent.msg")
    except SourceRejected as exc:
        assert exc.code == "parse_error" and str(tmp_path) not in exc.reason
    else:
        raise AssertionError(f"a path's bytes parsed as a message: {parsed.text[:80]!r}")


def test_reading_a_msg_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # extract-msg's save would write here; reading must not
    parse_bytes(make_msg("Budget", plain="body", attachments=(("a.txt", b"words"),)), name="m.msg")
    assert list(tmp_path.iterdir()) == []
