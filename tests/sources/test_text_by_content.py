"""A file no suffix names is judged by its content (issue 46 item 7): text is read whatever its name, binary
is skipped on its first bytes, and nothing but a regular file is opened to be judged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knowledge.library.item import terminal_status_for
from knowledge.sources import SourceRejected, files, parse_bytes, parse_source
from knowledge.sources.dispatch import SNIFF_BYTES

from .conftest import Writer, rejected

ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64  # NUL bytes in its first KiB, like any executable

TEXTS = {
    "LICENSE": "Permission is hereby granted, free of charge, to any person obtaining a copy.\n",
    "GPL-3": "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n",
    "LGPL-2.1": "GNU LESSER GENERAL PUBLIC LICENSE\nVersion 2.1, February 1999\n",
    "notes.2024": "Planted the quinces on the south wall.\nPruned the medlar.\n",
    "Makefile": "all: quire\n\nquire: main.o\n\t$(CC) -o $@ $^\n",
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_plain_text_is_read_whatever_its_name(write: Writer, name: str) -> None:
    parsed = parse_source(write(name, TEXTS[name].encode()))
    assert (parsed.parser, parsed.mime, parsed.text) == ("text", "text/plain", TEXTS[name])
    assert parsed.metadata == {"encoding": "utf-8"} and parsed.segments[0].line_start == 1


def test_legacy_and_utf16_text_without_a_suffix_is_read(write: Writer) -> None:
    names = "Zoë Müller\nRenée Côté\n"
    assert parse_source(write("AUTHORS", names.encode("latin-1"))).text == names
    assert parse_source(write("README", "Grüße aus München\n".encode("utf-16"))).text == "Grüße aus München\n"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("core", "unsupported file type (no known file extension, and its content is not text)"),
        ("blob.2024", "unsupported file type '.2024' (its content is not text)"),
    ],
)
def test_binary_without_a_known_suffix_is_skipped_with_its_reason(write: Writer, name: str, reason: str) -> None:
    error = rejected(write(name, ELF))
    assert (error.code, error.reason) == ("unsupported_type", reason)
    assert terminal_status_for(error.code) == "skipped"  # not read by design, not a failure


def test_a_known_binary_suffix_keeps_its_verdict_and_a_known_one_its_parser(write: Writer) -> None:
    assert rejected(write("setup.exe", b"plain words")).reason == "unsupported file type '.exe'"  # never sniffed
    assert parse_source(write("page.html", b"<p>Hello there</p>")).parser == "html"


def test_only_the_first_bytes_of_a_big_binary_file_are_read(write: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write("disk.part", ELF + b"\x00" * (8 * 1024 * 1024))
    read: list[int] = []
    real_read = files._read

    def counting(handle: object, limit: int) -> bytes:
        data = real_read(handle, limit)  # type: ignore[arg-type]
        read.append(len(data))
        return data

    monkeypatch.setattr(files, "_read", counting)
    assert rejected(path).code == "unsupported_type"
    assert sum(read) <= SNIFF_BYTES


def test_a_pipe_without_a_suffix_is_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "NOTES")  # opening it for reading would block until a writer came
    assert rejected(tmp_path / "NOTES").code == "not_regular_file"


def test_text_that_turns_binary_after_its_first_bytes_is_skipped_not_failed() -> None:
    data = b"plain header line\n" * 600 + bytes(range(0x80, 0x100)) * 400  # text for 10 KiB, then not
    with pytest.raises(SourceRejected) as info:
        parse_bytes(data, name="capture.2024")
    assert (info.value.code, terminal_status_for(info.value.code)) == ("unsupported_type", "skipped")
    assert info.value.reason == "unsupported file type '.2024' (not text in an encoding Quire recognises)"


def test_an_archive_member_is_judged_the_same_way() -> None:
    assert parse_bytes(TEXTS["GPL-3"].encode(), name="docs/COPYING").text == TEXTS["GPL-3"]
    with pytest.raises(SourceRejected, match="not text"):
        parse_bytes(ELF, name="bin/tool")
