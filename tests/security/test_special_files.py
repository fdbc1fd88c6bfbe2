"""Special files never hang or exhaust Quire, and nothing outside the folder it was given is read.

Crafted folders through the real CLI: a FIFO named ``.quireignore``, one that links to the zero device,
a 10 MB one, one linking to a file outside the folder, and a source swapped for a link to an outside file
between the walk and the read. The kernel's own record (inotify, ``tests/support/opens.py``) shows the
outside files and the pipe were never opened; a hang fails on the timeout instead of blocking the suite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from knowledge.sources import SourceRejected
from knowledge.sources.files import BECAME_LINK, SMALL_FILE_BYTES, read_small_file, read_source
from knowledge.sync.scan import content_sha
from tests.conftest import quire_cli
from tests.support.files import write_tree
from tests.support.opens import OpenWatch

SECRET = "zanzibarquokka"  # a word only the outside file holds
OUTSIDE_LINK = "a link pointing outside the folder is not followed"


def ok(data_dir: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = quire_cli("--json", *args, data_dir=data_dir, timeout=120)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A private file beside (not inside) the folders Quire is given."""
    secret = tmp_path / "private" / "diary.txt"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\n*.txt\n")  # as an ignore file it would exclude every .txt
    return secret


def hostile_folder(folder: Path, outside: Path) -> Path:
    """A folder whose sub-folders each carry a hostile ``.quireignore`` beside one ordinary file."""
    write_tree(
        folder,
        {
            "keep.txt": "An ordinary note about herons.",
            "pipe/a.txt": "below a pipe",
            "zero/b.txt": "below the zero device",
            "huge/c.txt": "below a huge ignore file",
            "leak/d.txt": "below a link out of the folder",
            "fine/.quireignore": "skip.txt\n",
            "fine/skip.txt": "excluded as written",
            "fine/e.txt": "kept",
        },
    )
    os.mkfifo(folder / "pipe" / ".quireignore")
    os.symlink("/dev/zero", folder / "zero" / ".quireignore")
    with open(folder / "huge" / ".quireignore", "wb") as f:
        f.write(b"*.md\n" * (2 * 1024 * 1024))  # 10 MB of rules
    os.symlink(outside, folder / "leak" / ".quireignore")
    return folder


@pytest.mark.timeout(240)
def test_preview_of_hostile_ignore_files_returns_with_reasons_and_reads_nothing_outside(
    tmp_path: Path, outside: Path
) -> None:
    data = tmp_path / "data"
    folder = hostile_folder(tmp_path / "docs", outside)
    huge = folder / "huge" / ".quireignore"
    assert huge.stat().st_size == 10 * 1024 * 1024
    ok(data, "base", "create", "kb", "--precision", "fp32")
    with OpenWatch(outside, folder / "pipe" / ".quireignore", huge) as watch:
        watch.prove_it_sees(outside, huge)
        preview = ok(data, "run", "preview", "kb", str(folder))
        opened = watch.opened()
    assert opened == []  # neither the outside file, nor the pipe, nor the 10 MB file was opened
    assert sorted(e["path"] for e in preview["eligible"]) == ["fine/e.txt", "keep.txt"]
    reasons = {e["path"]: e["reason"] for e in preview["ineligible"]}
    unusable = "excluded: its own .quireignore cannot be used: "
    assert reasons == {
        "pipe": unusable + "not a regular file (it is a named pipe)",
        "zero": unusable + OUTSIDE_LINK,
        "huge": unusable + "larger than 64 KiB",
        "leak": unusable + OUTSIDE_LINK,
        "fine/skip.txt": "excluded by fine/.quireignore",
    }
    assert str(tmp_path) not in json.dumps(preview["ineligible"])


@pytest.mark.timeout(300)
def test_adding_a_folder_whose_own_ignore_file_is_a_pipe_finishes_and_says_why(tmp_path: Path, outside: Path) -> None:
    """prepare-root (the worker's walk) meets a FIFO at the root and hostile files below it."""
    data = tmp_path / "data"
    folder = hostile_folder(tmp_path / "docs", outside)
    fifo_root = write_tree(tmp_path / "piped", {"note.txt": "A note that the pipe governs."})
    os.mkfifo(fifo_root / ".quireignore")
    ok(data, "base", "create", "kb", "--precision", "fp32")
    with OpenWatch(outside, fifo_root / ".quireignore", folder / "pipe" / ".quireignore") as watch:
        ok(data, "add", "kb", str(folder), str(fifo_root))
        ok(data, "worker", "--until-idle")
        assert watch.opened() == []
    items = {i["source_path"]: i for i in ok(data, "items", "kb")["items"]}
    note = items[str(fifo_root / "note.txt")]
    assert (note["status"], note["error_code"]) == ("skipped", "excluded")
    assert note["error_message"] == "excluded: .quireignore cannot be used: not a regular file (it is a named pipe)"
    listed = {Path(p).relative_to(folder).as_posix() for p in items if p.startswith(str(folder) + os.sep)}
    assert listed == {"keep.txt", "fine", "fine/e.txt", "fine/skip.txt"}  # unusable rules: folder not walked
    assert items[str(folder / "keep.txt")]["status"] == "completed"
    hits = ok(data, "search", "kb", SECRET, "--mode", "keyword")["hits"]
    assert hits == []


@pytest.mark.timeout(300)
def test_a_source_swapped_for_an_outside_link_after_the_walk_is_skipped_unread(tmp_path: Path, outside: Path) -> None:
    """The walk saw a regular file; by the time it is read (a reindex) it links out of the folder."""
    data = tmp_path / "data"
    folder = write_tree(tmp_path / "docs", {"notes.txt": "Herons wade in shallow water.", "other.txt": "Owls."})
    ok(data, "base", "create", "kb", "--precision", "fp32")
    ok(data, "add", "kb", str(folder))
    ok(data, "worker", "--until-idle")
    item = next(i for i in ok(data, "items", "kb")["items"] if i["name"] == "notes.txt")
    assert item["status"] == "completed"

    (folder / "notes.txt").unlink()
    os.symlink(outside, folder / "notes.txt")
    with OpenWatch(outside) as watch:
        watch.prove_it_sees(outside)
        ok(data, "reindex", "kb", str(item["id"]))
        ok(data, "worker", "--until-idle")
        assert watch.opened() == []  # the link's target was never opened

    after = next(i for i in ok(data, "items", "kb")["items"] if i["id"] == item["id"])
    assert (after["status"], after["error_code"], after["error_message"]) == (
        "skipped",
        "symlink_not_followed",
        OUTSIDE_LINK,
    )
    assert ok(data, "search", "kb", SECRET, "--mode", "keyword")["hits"] == []
    assert ok(data, "search", "kb", "herons", "--mode", "keyword")["hits"] == []  # the old copy is not used either


# -- the one reader, on what the CLI cannot time: a swap between the resolve and the open ------------------


@pytest.mark.timeout(30)
def test_the_reader_refuses_links_out_of_the_root_and_special_files_without_opening_them(
    tmp_path: Path, outside: Path
) -> None:
    root = write_tree(tmp_path / "root", {"inside.txt": "inside", "sub/real.txt": "real"})
    os.symlink(outside, root / "out.txt")
    os.symlink(root / "sub" / "real.txt", root / "alias.txt")
    os.mkfifo(root / "pipe.txt")
    with open(root / "big.txt", "wb") as f:
        f.truncate(SMALL_FILE_BYTES + 1)
    with OpenWatch(outside, root / "pipe.txt", root / "big.txt") as watch:
        for path, code in ((root / "out.txt", "symlink_not_followed"), (root / "pipe.txt", "not_regular_file")):
            with pytest.raises(SourceRejected) as small:
                read_small_file(path, root=root)
            with pytest.raises(SourceRejected) as source:
                read_source(path, root=root)
            assert small.value.code == source.value.code == code
            with pytest.raises(OSError):
                content_sha(path, root)  # the sync scan's hash
        with pytest.raises(SourceRejected) as big:
            read_small_file(root / "big.txt", root=root)
        assert (big.value.code, big.value.reason) == ("too_large", "larger than 64 KiB")
        assert watch.opened() == []
    assert read_small_file(root / "alias.txt", root=root) == b"real"  # a link inside the root is fine
    assert read_source(root / "alias.txt", root=root) == b"real"


@pytest.mark.timeout(30)
def test_a_folder_on_the_way_swapped_for_a_link_after_the_resolve_is_caught_at_the_descriptor(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath said ``root/sub/diary.txt``; before the open, ``sub`` became a link to the outside folder.
    O_NOFOLLOW on the last component alone would open the outside file; the open from the root's
    descriptor, folder by folder, stops at the link."""
    from knowledge.sources import files

    root = write_tree(tmp_path / "root", {"sub/diary.txt": "the inside diary"})
    resolve = files.resolve_within

    def swap_after_resolving(path: Path, root_: Path | None) -> str:
        real = resolve(path, root_)
        (root / "sub" / "diary.txt").unlink()
        (root / "sub").rmdir()
        os.symlink(outside.parent, root / "sub")
        return real

    monkeypatch.setattr(files, "resolve_within", swap_after_resolving)
    assert outside.name == "diary.txt"  # the outside file has the inside one's name
    with OpenWatch(outside) as watch:
        watch.prove_it_sees(outside)
        with pytest.raises(SourceRejected) as refused:
            read_source(root / "sub" / "diary.txt", root=root)
        assert watch.opened() == []  # the outside diary was never opened
    assert (refused.value.code, refused.value.reason) == ("symlink_not_followed", BECAME_LINK)


@pytest.mark.timeout(300)
def test_a_sync_scan_meets_a_pipe_ignore_file_and_an_outside_link_and_reads_neither(
    tmp_path: Path, outside: Path
) -> None:
    data = tmp_path / "data"
    folder = write_tree(
        tmp_path / "docs",
        {"keep.txt": "Herons wade.", "notes.txt": "Owls hunt at night.", "sub/inner.txt": "Badgers dig setts."},
    )
    ok(data, "base", "create", "kb", "--precision", "fp32")
    root_id = ok(data, "add", "kb", str(folder), "--sync")["created"][0]
    ok(data, "worker", "--until-idle")

    os.mkfifo(folder / "sub" / ".quireignore")  # the synced folder's rules turn into a pipe
    (folder / "notes.txt").unlink()
    os.symlink(outside, folder / "notes.txt")  # and a synced file into a link out of the folder
    with OpenWatch(outside, folder / "sub" / ".quireignore") as watch:
        watch.prove_it_sees(outside)
        ran = ok(data, "sync", "run", "kb", str(root_id))
        ok(data, "worker", "--until-idle")
        assert watch.opened() == []
    said = {c["path"]: (c["kind"], c["reason"]) for c in ran["changes"]}
    assert said["notes.txt"] == ("unreadable", "symlink_not_followed")  # kept as it was, the link not followed
    assert said["sub/inner.txt"][0] == "removed"
    items = {Path(i["source_path"]).relative_to(folder).as_posix(): i for i in ok(data, "items", "kb")["items"][1:]}
    assert "sub/inner.txt" not in items  # its folder's rules cannot be used: excluded, as preview says
    assert items["keep.txt"]["status"] == "completed"
    assert ok(data, "search", "kb", SECRET, "--mode", "keyword")["hits"] == []


@pytest.mark.timeout(300)
def test_a_folder_run_re_judges_a_source_swapped_for_an_outside_link_and_a_pipe_ignore_file(
    tmp_path: Path, outside: Path
) -> None:
    """Between the run's start (its walk and manifest) and the worker's read, a source becomes a link out
    of the folder and a folder's rules become a pipe: each settles with its reason, neither is opened."""
    data = tmp_path / "data"
    folder = hostile_folder(tmp_path / "docs", outside)
    ok(data, "base", "create", "kb", "--precision", "fp32")
    run_id = ok(data, "run", "start", "kb", str(folder))["run_id"]

    (folder / "keep.txt").unlink()
    os.symlink(outside, folder / "keep.txt")
    (folder / "fine" / ".quireignore").unlink()
    os.mkfifo(folder / "fine" / ".quireignore")
    with OpenWatch(outside, folder / "fine" / ".quireignore") as watch:
        watch.prove_it_sees(outside)
        ok(data, "worker", "--until-idle")
        assert watch.opened() == []
    shown = ok(data, "run", "show", str(run_id))
    settled = {s["relative_path"]: (s["disposition"], s["reason"]) for s in shown["sources"]}
    assert settled == {
        "keep.txt": ("outside_run_root", "the file now points outside the folder"),
        "fine/e.txt": (
            "excluded",
            "a folder on its path is excluded: its own .quireignore cannot be used: "
            "not a regular file (it is a named pipe)",
        ),
    }
    assert ok(data, "search", "kb", SECRET, "--mode", "keyword")["hits"] == []
