"""The scan reads no file of an unchanged tree and pages item rows correctly; agents cannot decide for a person."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pytest

from knowledge import sync
from knowledge.errors import Forbidden
from knowledge.principal import Principal, acting_as
from knowledge.runtime import Quire
from tests.support.files import write_tree
from tests.sync.helpers import reconcile_now, synced_folder

scan = import_module("knowledge.sync.scan")


def test_unchanged_tree_opens_no_file_and_pages_rows_across_boundaries(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"d{n % 4}/f{n:03d}.txt": f"file {n} about thing{n}" for n in range(90)}
    folder = write_tree(tmp_path / "f", files)
    _item, root = synced_folder(quire, folder)
    monkeypatch.setattr(scan, "ROW_PAGE", 7)  # many pages, boundaries inside folders

    def no_reading(path: Path) -> str:
        raise AssertionError(f"the unchanged scan opened {path.name}")

    monkeypatch.setattr(scan, "content_sha", no_reading)
    out = reconcile_now(quire, root.id)
    assert not any(out.counts.values()) and out.hashed == 0 and out.files_seen == 90
    monkeypatch.undo()
    (folder / "d3" / "f087.txt").write_text("changed content, longer than before")
    import os

    st = os.stat(folder / "d3" / "f087.txt")
    os.utime(folder / "d3" / "f087.txt", (st.st_atime - 10, st.st_mtime - 10))
    monkeypatch.setattr(scan, "ROW_PAGE", 7)
    out = reconcile_now(quire, root.id)
    assert [(c["kind"], c["path"]) for c in out.changes] == [("changed", "d3/f087.txt")]


def test_a_missing_folder_is_unreadable_not_removed(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", {"a.txt": "alpha", "b/c.txt": "gamma"})
    _item, root = synced_folder(quire, folder)
    folder.rename(tmp_path / "elsewhere")  # an unplugged drive looks like this
    out = reconcile_now(quire, root.id)
    assert {c["kind"] for c in out.changes} == {"unreadable"} and out.applied == 0


def test_agents_cannot_turn_sync_on_apply_or_dismiss(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", {"a.txt": "alpha"})
    item_id, root = synced_folder(quire, folder, mode="review")
    with acting_as(Principal.agent("bot")):
        with pytest.raises(Forbidden):
            sync.enable_sync(quire, "kb", item_id)
        with pytest.raises(Forbidden):
            sync.disable_sync(quire, "kb", item_id)
        with pytest.raises(Forbidden):
            sync.dismiss(quire, root.id, ["a.txt"], "agent:bot")
        with pytest.raises(Forbidden):
            reconcile_now(quire, root.id, apply_review=True)
    assert [r.item_id for r in sync.list_roots(quire.db)] == [item_id]
