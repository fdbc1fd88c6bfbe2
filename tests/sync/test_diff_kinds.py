"""Each kind of change to a synced folder ends in the right diff, items and search results (real files,
real model, real queue; the reconcile runs in-process here, the worker-process tests are elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.runtime import Quire
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree
from tests.sync.helpers import counting_encoder, drain, keyword_hits, live_paths, reconcile_now, synced_folder

quire = pytest.fixture(params=ENGINES)(engine_quire)  # every test here runs on SQLite and on PostgreSQL

FILES = {
    "alpha.txt": "The alpha document mentions zebracorn twice. zebracorn.",
    "beta.md": "# Beta\n\nBeta talks about quokkafish in the lagoon.",
    "docs/gamma.txt": "Gamma lives in docs and mentions narwhalite.",
    "docs/deep/delta.txt": "Delta is deep and mentions axolotlium.",
}


def _set_mtime_past(path: Path) -> None:
    """Edits in these tests are older than the quiet period (the quiet period has its own test)."""
    st = os.stat(path)
    os.utime(path, (st.st_atime - 10, st.st_mtime - 10))


def test_add_edit_delete_each_end_in_the_right_diff_and_search(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    assert keyword_hits(quire, "zebracorn") == ["alpha.txt"]

    (folder / "new.txt").write_text("A brand new file about pangolinite.")
    _set_mtime_past(folder / "new.txt")
    (folder / "beta.md").write_text("# Beta\n\nBeta now talks about capybarine instead.")
    _set_mtime_past(folder / "beta.md")
    (folder / "alpha.txt").unlink()
    out = reconcile_now(quire, root.id)
    assert out.stood_down is None
    assert {k: v for k, v in out.counts.items() if v} == {"added": 1, "changed": 1, "removed": 1}
    # removed leaves search in the reconcile's own transaction, before any cleanup job ran
    assert keyword_hits(quire, "zebracorn") == []
    drain(quire)
    assert keyword_hits(quire, "pangolinite") == ["new.txt"]
    assert keyword_hits(quire, "capybarine") == ["beta.md"]
    assert keyword_hits(quire, "quokkafish") == []
    assert "alpha.txt" not in live_paths(quire)
    again = reconcile_now(quire, root.id)
    assert not any(again.counts.values()), again.counts  # the scan of a synced folder finds nothing left
    assert again.hashed == 0


def test_move_and_folder_rename_keep_material_and_embed_nothing(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    encoder = counting_encoder(quire)
    _item, root = synced_folder(quire, folder)
    with quire.db.read() as conn:
        before = dict(conn.execute(text("SELECT relative_path, id FROM items")).all())
    encoder.texts_seen.clear()

    (folder / "alpha.txt").rename(folder / "docs" / "alpha-moved.txt")
    (folder / "docs").rename(folder / "papers")
    out = reconcile_now(quire, root.id)
    counts = {k: v for k, v in out.counts.items() if v}
    assert counts == {"added": 2, "moved": 3, "removed": 2}, out.changes  # dirs papers, papers/deep; dirs docs…
    drain(quire)
    assert encoder.texts_seen == []  # nothing re-embedded
    paths = live_paths(quire)
    assert "papers/alpha-moved.txt" in paths and "docs/gamma.txt" not in paths
    with quire.db.read() as conn:
        after = dict(conn.execute(text("SELECT relative_path, id FROM items WHERE status != 'deleting'")).all())
    assert after["papers/alpha-moved.txt"] == before["alpha.txt"]  # the same row moved
    assert after["papers/deep/delta.txt"] == before["docs/deep/delta.txt"]
    assert keyword_hits(quire, "zebracorn") == ["papers/alpha-moved.txt"]
    assert keyword_hits(quire, "axolotlium") == ["papers/deep/delta.txt"]
    assert set(paths.values()) == {"completed"}


def test_unreadable_file_is_kept_with_a_reason_never_removed(quire: Quire, tmp_path: Path) -> None:
    """Unreadable is simulated by replacing the file with a FIFO (as root, chmod 000 does not stop reading)."""
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    (folder / "beta.md").unlink()
    os.mkfifo(folder / "beta.md")
    out = reconcile_now(quire, root.id)
    assert [c["kind"] for c in out.changes] == ["unreadable"]
    assert out.changes[0]["reason"] == "unreadable"
    drain(quire)
    assert keyword_hits(quire, "quokkafish") == ["beta.md"]  # kept as it was


def test_touch_without_new_bytes_restamps_without_reindexing(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    encoder = counting_encoder(quire)
    _item, root = synced_folder(quire, folder)
    encoder.texts_seen.clear()
    os.utime(folder / "alpha.txt", (1_000_000, 1_000_000))
    out = reconcile_now(quire, root.id)
    assert out.counts["changed"] == 1 and out.hashed == 1
    drain(quire)
    assert encoder.texts_seen == []
    second = reconcile_now(quire, root.id)
    assert not any(second.counts.values()) and second.hashed == 0
