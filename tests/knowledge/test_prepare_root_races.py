"""A folder's walk (the prepare-root job) never expands a folder that delete took: it skips a root that is gone
or deleting when the job starts, and reads the root again under the write lock before creating any child, so a
delete that lands while the folder is walked still wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.lifecycle import operations, prepare_root
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

TREE = {"a.txt": "alpha", "sub/b.txt": "beta"}


def _prepare_root_results(quire: Quire) -> list[Any]:
    with quire.db.read() as conn:
        ids = conn.execute(text("SELECT id FROM jobs WHERE type = 'knowledge.prepare-root' ORDER BY id")).scalars()
        return [quire.queue.get(int(i)).result for i in ids]


def _item_count(quire: Quire) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text("SELECT count(*) FROM items")).scalar() or 0)


def test_a_root_deleted_before_its_walk_starts_is_skipped_unread(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "docs", TREE)
    walked: list[Path] = []
    real_walk = prepare_root._walk_or_none
    monkeypatch.setattr(prepare_root, "_walk_or_none", lambda f, d, i: walked.append(f) or real_walk(f, d, i))
    (root,) = operations.add_items(quire, "kb", [PathInput(folder)]).created
    operations.delete_items(quire, "kb", [root])  # lands between the add and its walk
    drain(quire)
    assert _prepare_root_results(quire) == [{"skipped": "missing or deleting"}]
    assert walked == []  # the folder was not even read
    assert _item_count(quire) == 0  # the delete finished; nothing was created under the root


def test_a_delete_that_lands_during_the_walk_still_wins(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "docs", TREE)
    (root,) = operations.add_items(quire, "kb", [PathInput(folder)]).created
    real_walk = prepare_root._walk_or_none
    created_meanwhile: list[int] = []

    def walk_then_delete(f: Path, d: Path, ignore: list[str]) -> Any:
        found = real_walk(f, d, ignore)
        operations.delete_items(quire, "kb", [root])  # another caller, after the entry check, before the write
        return found

    real_expand = prepare_root._expand

    def expand(*args: Any) -> Any:
        created_meanwhile.append(1)
        return real_expand(*args)

    monkeypatch.setattr(prepare_root, "_walk_or_none", walk_then_delete)
    monkeypatch.setattr(prepare_root, "_expand", expand)
    drain(quire)
    assert _prepare_root_results(quire) == [{"skipped": "deleting"}]
    assert created_meanwhile == []  # the root was read again under the lock: no child was made
    assert _item_count(quire) == 0
