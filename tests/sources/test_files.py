"""parse_source on the file system: what is refused before (or instead of) reading, and how."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from knowledge.sources import SourceRejected, files, parse_source
from tests.support.unprivileged import as_nobody

from .conftest import Writer, rejected


@pytest.mark.timeout(10)
def test_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    error = rejected(fifo)  # opening a FIFO for reading would block: the timeout guards that
    assert (error.code, error.reason) == ("not_regular_file", "not a regular file (it is a named pipe)")


@pytest.mark.timeout(10)
def test_fifo_swapped_in_after_stat_cannot_hang_the_read(tmp_path: Path) -> None:
    fifo = tmp_path / "swapped.txt"
    os.mkfifo(fifo)
    with pytest.raises(SourceRejected) as info:
        files._read_at_most(fifo, 100)  # the non-blocking open + fstat defence behind the stat check
    assert info.value.code == "not_regular_file"


def test_directory_socket_and_device_are_not_regular_files(tmp_path: Path) -> None:
    folder = tmp_path / "folder.md"
    folder.mkdir()
    assert rejected(folder).reason == "not a regular file (it is a directory)"
    sock_path = tmp_path / "s.txt"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert rejected(sock_path).reason == "not a regular file (it is a socket)"
    if Path("/dev/null").exists():
        assert rejected(Path("/dev/null")).code == "not_regular_file"


def test_dangling_symlink_and_missing_file_are_unreadable(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "gone.txt")
    error = rejected(link)
    assert (error.code, error.reason) == ("unreadable", "file does not exist or cannot be read")
    assert rejected(tmp_path / "never-existed.txt").code == "unreadable"


def test_symlink_to_a_regular_file_is_followed(write: Writer, tmp_path: Path) -> None:
    target = write("real.txt", b"linked text")
    link = tmp_path / "alias.txt"
    link.symlink_to(target)
    assert parse_source(link).text == "linked text"


def test_chmod_000_file_is_unreadable(tmp_path: Path) -> None:
    """The kernel itself refuses the open (no patched ``os.open``). Root reads a 000 file anyway, so as root
    the parse runs in a child that dropped to ``nobody`` first; as a user it runs here."""
    folder = Path(tempfile.mkdtemp(prefix="quire-chmod-"))  # pytest's tmp_path is root-only (0700)
    try:
        folder.chmod(0o755)
        readable, locked = folder / "open.txt", folder / "locked.txt"
        readable.write_bytes(b"anyone may read this")
        locked.write_bytes(b"secret")
        locked.chmod(0)
        parse = _parse_as_nobody if os.geteuid() == 0 else _parse_here
        assert parse(readable) == ["read"]  # the process can read at all: only the bits stop it
        assert parse(locked) == ["unreadable", "file cannot be read (permission denied)"]
        if os.geteuid() == 0:
            assert parse_source(locked).text == "secret"  # root still can: the denial was the kernel's
    finally:
        shutil.rmtree(folder)


def _parse_here(path: Path) -> list[str]:
    """``parse_source(path)`` in this process: [code, reason] or ["read"]."""
    try:
        parse_source(path)
        return ["read"]
    except SourceRejected as error:
        return [error.code, error.reason]


def _parse_as_nobody(path: Path) -> list[str]:
    """:func:`_parse_here` in a forked child that dropped root for ``nobody``."""
    return list(as_nobody(lambda: _parse_here(path)))


def test_permission_error_on_open_is_unreadable(write: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same mapping, independent of who runs the tests: make the open fail as it would for a user.
    path = write("locked.txt", b"secret")

    def deny(*_args: object, **_kwargs: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", deny)
    error = rejected(path)
    assert (error.code, error.reason) == ("unreadable", "file cannot be read (permission denied)")


def test_io_error_while_reading_is_unreadable(write: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write("flaky.txt", b"data")

    def broken(*_args: object, **_kwargs: object) -> int:
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(os, "open", broken)
    assert rejected(path).reason == "file cannot be read (EIO)"


def test_larger_than_max_bytes_is_too_large(write: Writer) -> None:
    path = write("big.txt", b"x" * 2048)
    error = rejected(path, max_bytes=1024)
    assert error.code == "too_large"
    assert error.reason == "file is 0.001953 MB, over the 0.000977 MB limit"
    assert parse_source(path, max_bytes=2048).text == "x" * 2048


def test_too_large_reason_in_megabytes(write: Writer) -> None:
    path = write("big.txt", b"x" * (3 * 1024 * 1024 + 1))
    assert rejected(path, max_bytes=2 * 1024 * 1024).reason == "file is 3 MB, over the 2 MB limit"


def test_unsupported_type_is_refused_before_reading(write: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write("program.exe", b"MZ\x90\x00")
    monkeypatch.setattr(files, "_open_checked", lambda *_: pytest.fail("must not open"))
    error = rejected(path)
    assert (error.code, error.reason) == ("unsupported_type", "unsupported file type '.exe'")
    assert rejected(write("song.mp3", b"ID3")).reason == "unsupported file type '.mp3'"  # a binary type, by name


def test_empty_file(write: Writer) -> None:
    error = rejected(write("empty.md", b""))
    assert (error.code, error.reason) == ("empty", "file is empty")
