"""Crafted archives are hostile input (knowledge/sources/members.py): a member's name never becomes a path,
links and devices are never followed, bombs are refused before they expand, and reasons carry no path."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from knowledge.sources import SourceRejected, archive, members
from knowledge.sources.members import unpack
from tests.sources.builders import tar_of, zip_of

LIMIT = 50 * 1024 * 1024

TRAVERSING = [
    "../evil.txt",
    "a/../../evil.txt",
    "/etc/evil.txt",
    "C:\\evil.txt",
    "\\\\host\\share\\evil.txt",
    "..\\evil.txt",
]


@pytest.fixture(autouse=True)
def in_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # a reader that wrote members out would write here (or above, for ../)
    return work


def _nothing_written(tmp_path: Path) -> None:
    assert [p.name for p in tmp_path.rglob("*")] == ["cwd"]


def _zip_raw_names(names: list[str]) -> bytes:
    """zipfile keeps the names it is given; the test needs them exactly as an attacker writes them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name in names:
            zf.writestr(zipfile.ZipInfo(name), b"pwned")
        zf.writestr("fine/ok.txt", b"ok")
    return buffer.getvalue()


def test_zip_names_that_leave_the_archive_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    found = unpack(_zip_raw_names(TRAVERSING), "x.zip", max_bytes=LIMIT)
    assert [(m.name, m.data) for m in found.members] == [("fine/ok.txt", b"ok")]
    assert len(found.refused) == len(TRAVERSING) and {r.code for r in found.refused} == {"unreadable"}
    assert not any(r.name.startswith("/") for r in found.refused)
    _nothing_written(tmp_path)


def test_tar_links_devices_and_traversing_names_are_never_followed(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name, kind, link in [
            ("passwd", tarfile.SYMTYPE, "/etc/passwd"),
            ("hard", tarfile.LNKTYPE, "../../etc/shadow"),
            ("null", tarfile.CHRTYPE, ""),
            ("pipe", tarfile.FIFOTYPE, ""),
            ("../../escape.txt", tarfile.REGTYPE, ""),
            ("/abs.txt", tarfile.REGTYPE, ""),
        ]:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            data = b"pwned" if kind == tarfile.REGTYPE else b""
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        good = tarfile.TarInfo("ok.txt")
        good.size = 2
        tf.addfile(good, io.BytesIO(b"ok"))
    found = unpack(buffer.getvalue(), "x.tar", max_bytes=LIMIT)
    assert [(m.name, m.data) for m in found.members] == [("ok.txt", b"ok")]
    assert [(r.name, r.code) for r in found.refused] == [
        ("passwd", "symlink_not_followed"),
        ("hard", "symlink_not_followed"),
        ("null", "not_regular_file"),
        ("pipe", "not_regular_file"),
        ("../../escape.txt", "unreadable"),
        ("abs.txt", "unreadable"),
    ]
    assert all("/etc" not in r.reason for r in found.refused)
    _nothing_written(tmp_path)


def test_a_zip_symlink_member_is_not_followed() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    assert [(r.name, r.code) for r in unpack(buffer.getvalue(), "x.zip", max_bytes=LIMIT).refused] == [
        ("link", "symlink_not_followed")
    ]


def test_a_zip_bomb_member_is_refused_before_it_expands() -> None:
    bomb = zip_of({"report.pdf": b"%PDF-1.4 real", "zeros.txt": b"\x00" * (64 * 1024 * 1024)})
    found = unpack(bomb, "x.zip", max_bytes=100 * 1024 * 1024)  # the bomb by itself; the report is read
    assert [(m.name, m.data) for m in found.members] == [("report.pdf", b"%PDF-1.4 real")]
    assert [(r.name, r.code) for r in found.refused] == [("zeros.txt", "decompression_bomb")]


def test_a_tar_gz_bomb_is_refused_while_unpacking() -> None:
    import gzip

    bomb = gzip.compress(tar_of({"zeros.txt": b"\x00" * (64 * 1024 * 1024)}), 9)
    with pytest.raises(SourceRejected) as refused:
        unpack(bomb, "x.tar.gz", max_bytes=LIMIT)
    assert refused.value.code == "decompression_bomb"


def test_too_many_entries_and_too_much_in_all_refuse_the_container(monkeypatch: pytest.MonkeyPatch) -> None:
    many = zip_of({f"f{n}.txt": b"x" for n in range(members.MAX_MEMBERS + 1)})
    with pytest.raises(SourceRejected, match="more than 10000 entries") as refused:
        unpack(many, "x.zip", max_bytes=LIMIT)
    assert refused.value.code == "too_large"
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1000)  # the limit is read at call time: one knob
    with pytest.raises(SourceRejected, match="expands to more than") as refused:
        unpack(zip_of({"a.txt": b"a" * 600, "b.txt": b"b" * 600}), "x.zip", max_bytes=LIMIT)
    assert refused.value.code == "too_large"


def test_an_archive_inside_is_a_member_and_the_tree_budget_stops_the_third_level() -> None:
    """Unpacking never recurses by itself: an inner archive is a member (a child item, expanded by a job of
    its own), and the budget of the whole tree (nesting.admit, read from the stored tree) refuses an archive
    that would sit three containers below the file added."""
    from knowledge.sources.nesting import TreeBudget, admit

    deep = zip_of({"x.txt": b"deepest"})
    found = unpack(zip_of({"inner.zip": zip_of({"deep.zip": deep, "y.txt": b"inner"})}), "x.zip", max_bytes=LIMIT)
    assert [m.name for m in found.members] == ["inner.zip"]
    second = unpack(found.members[0].data, "inner.zip", max_bytes=LIMIT).members
    kept, refused = admit(TreeBudget(depth=2, descendants=2, expanded=1000, packed=1000), second, [])
    assert [(m.name, m.data) for m in kept] == [("y.txt", b"inner")]
    assert [(r.name, r.code) for r in refused] == [("deep.zip", "nested_too_deep")]
    assert admit(TreeBudget(depth=1, descendants=1, expanded=1000, packed=1000), second, [])[0] == second


def test_encrypted_member_is_skipped_and_damaged_archives_fail() -> None:
    locked = bytearray(zip_of({"secret.txt": b"ciphertext"}))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the "encrypted" bit, local and central
        at = locked.index(signature) + offset
        locked[at] |= 0x1
    assert [(r.name, r.code) for r in unpack(bytes(locked), "x.zip", max_bytes=LIMIT).refused] == [
        ("secret.txt", "encrypted")
    ]
    good = zip_of({"a.txt": b"a" * 5000})
    for name, data in (
        ("x.zip", good[: len(good) // 2]),
        ("x.zip", b"PK\x03\x04 nope"),
        ("x.tar", b"not a tar" * 100),
        ("x.mbox", b"no From line"),
    ):
        with pytest.raises(SourceRejected) as refused:
            unpack(data, name, max_bytes=LIMIT)
        assert refused.value.code == "parse_error" and "/" not in refused.value.reason, name


@pytest.mark.parametrize("raw", [*TRAVERSING, "a\x00b.txt", "a\nb.txt", "", ".", "./", "x/" + "y" * 300])
def test_safe_name_refuses_what_is_not_a_plain_relative_name(raw: str) -> None:
    assert members.safe_name(raw) is None


def test_safe_name_normalises_the_rest() -> None:
    assert members.safe_name("./docs//a\\b.txt") == "docs/a/b.txt"
    assert members.safe_name("..hidden/..x") == "..hidden/..x"  # dots inside a name are no parent step


def test_members_exactly_at_the_ratio_floor_add_up_and_a_cap_leaves_one_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member of exactly 1 MiB is under the strict per-member floor; their sum is not. Past a bound the
    rest are one refused child with the count, never one row each."""
    from knowledge.sources.model import Member, Refused
    from knowledge.sources.nesting import TreeBudget, admit

    ones = [Member(f"z{i}.txt", b"\0" * archive.RATIO_FLOOR) for i in range(8)]
    assert not any(members._bomb(len(m.data), 1024) for m in ones)  # why they slipped through before
    kept, refused = admit(TreeBudget(depth=0, descendants=0, expanded=0, packed=9000), ones, [])
    assert [m.name for m in kept] == ["z0.txt"]
    assert [(r.name, r.code) for r in refused] == [("(7 more not unpacked)", "decompression_bomb")]
    monkeypatch.setattr("knowledge.sources.nesting.MAX_DESCENDANTS", 5)
    links = [Refused(f"l{i}", "symlink_not_followed", "a link") for i in range(6)]
    kept, refused = admit(TreeBudget(depth=1, descendants=3, expanded=0, packed=10**9), ones[:1], links)
    assert len(kept) == 1 and [r.name for r in refused] == ["l0", "(5 more not unpacked)"]
    assert refused[-1].code == "too_large" and "more than 5 files in all" in refused[-1].reason
