"""Preview: the walk's visibility rules, the descendant cap (refuse, never truncate) and eligibility."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import FolderTooLarge
from knowledge.ingest import walk
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from tests.folder_runs.helpers import (
    AGENT,
    PERSON,
    chmod_unreadable_check,
    doc_text,
    drain,
    make_base,
    row_counts,
)
from tests.support.files import write_tree


def tree_of(folder: Path, dirs: int, files_per_dir: int, top_files: int = 0) -> Path:
    files: dict[str, str | bytes] = {
        f"d{d:02d}/f{f:02d}.txt": f"dir {d} file {f}\n" for d in range(dirs) for f in range(files_per_dir)
    }
    files.update({f"top{n:02d}.txt": f"top {n}\n" for n in range(top_files)})
    return write_tree(folder, files)


def test_exactly_200_descendants_previews(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = tree_of(tmp_path / "f", dirs=10, files_per_dir=19)  # 10 folders + 190 files = 200
    result = folder_runs.preview(quire, PERSON, "kb", folder)
    assert result.walked == 200
    assert len(result.eligible) == 190 and result.cap == 200


def test_201_descendants_are_refused_and_nothing_is_created(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = tree_of(tmp_path / "f", dirs=10, files_per_dir=19, top_files=1)  # 201
    before = row_counts(quire)
    with pytest.raises(FolderTooLarge, match="more than 200"):
        folder_runs.preview(quire, PERSON, "kb", folder)
    with pytest.raises(FolderTooLarge):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    assert row_counts(quire) == before  # no run, no manifest, no job, no audit entry


def test_the_cap_counts_what_is_walked_not_what_is_eligible(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    write_tree(tmp_path / "f", {f"blob{n:03d}.bin": b"\x00" for n in range(201)})  # none would be ingested
    with pytest.raises(FolderTooLarge):
        folder_runs.preview(quire, PERSON, "kb", tmp_path / "f")


def test_the_cap_is_a_setting(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = tree_of(tmp_path / "f", dirs=0, files_per_dir=0, top_files=6)
    folder_runs.set_descendant_cap(quire, 5)
    with pytest.raises(FolderTooLarge, match="more than 5"):
        folder_runs.preview(quire, PERSON, "kb", folder)
    folder_runs.set_descendant_cap(quire, 6)
    assert folder_runs.preview(quire, PERSON, "kb", folder).walked == 6


def test_unreadable_subfolders_are_neither_walked_nor_counted(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    folder = tree_of(tmp_path / "f", dirs=10, files_per_dir=19)  # 200 visible
    write_tree(folder, {f"locked/inner/s{n:02d}.txt": f"secret {n}\n" for n in range(40)})
    os.chmod(folder / "locked", 0)
    try:
        if os.geteuid() == 0:
            # As root the kernel still lets us read it: with the real check the folder is over the cap.
            with pytest.raises(FolderTooLarge):
                folder_runs.preview(quire, PERSON, "kb", folder)
        # The walk decides readability in walk.is_readable_dir (os.access); model a non-root user.
        monkeypatch.setattr(walk, "is_readable_dir", chmod_unreadable_check)
        result = folder_runs.preview(quire, PERSON, "kb", folder)
        assert result.walked == 200
        assert result.unreadable_folders == ["locked"]
        assert not any(e.relative.startswith("locked") for e in result.eligible + result.ineligible)
        started = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
        assert started.outcome == "created"
        assert folder_runs.show_run(quire, started.run_id).summary.run.declared_size == 190
    finally:
        os.chmod(folder / "locked", 0o755)


def test_the_data_directory_inside_the_folder_is_invisible(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    inner = open_quire(folder / ".quire-data")  # the app's own data lives inside the folder
    try:
        make_base(inner)
        write_tree(folder, {"a.txt": "alpha\n", "b.txt": "beta\n"})
        result = folder_runs.preview(inner, PERSON, "kb", folder)
        assert result.walked == 2
        assert [e.relative for e in result.eligible] == ["a.txt", "b.txt"]
        assert result.ineligible == [] and result.unreadable_folders == []
    finally:
        inner.close()


def test_eligibility_gives_a_reason_for_every_ineligible_file(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    elsewhere = write_tree(tmp_path / "elsewhere", {"known.txt": doc_text(7)})
    operations.add_items(quire, "kb", [operations.PathInput(elsewhere / "known.txt")])
    drain(quire)
    folder = write_tree(
        tmp_path / "f",
        {
            ".quireignore": "*.log\n",
            "a.txt": doc_text(1),
            "b.md": "# Title\n\nSome markdown about lagoons.\n",
            "c.bin": b"\x00\x01\x02",
            "notes.log": "log line\n",
            "sub/.quireignore": "secret.txt\n",
            "sub/secret.txt": "hidden by sub's policy\n",
            "sub/ok.txt": doc_text(2),
            "sub/deeper/also.log": "root policy reaches down\n",
            "private/.quireignore": "*\n",
            "private/x.txt": "never listed\n",
            ".git/config": "[core]\n",
            "copy-of-known.txt": doc_text(7),
        },
    )
    (folder / "link-dir").symlink_to(folder / "sub")
    (folder / "link-out").symlink_to(elsewhere / "known.txt")

    result = folder_runs.preview(quire, AGENT, "kb", folder)  # an agent may preview

    assert [e.relative for e in result.eligible] == ["a.txt", "b.md", "sub/ok.txt"]
    assert all(e.sha256 and e.size for e in result.eligible)
    reasons = {e.relative: e.reason for e in result.ineligible}
    assert reasons == {
        "c.bin": "unsupported file type .bin",
        "notes.log": "excluded by .quireignore",
        "sub/secret.txt": "excluded by sub/.quireignore",
        "sub/deeper/also.log": "excluded by .quireignore",
        "private": "excluded by its own .quireignore",
        "link-dir": "a link to a folder is not followed",
        "link-out": "a link pointing outside the folder is not followed",
        "copy-of-known.txt": "already in the knowledge base (same content)",
    }
