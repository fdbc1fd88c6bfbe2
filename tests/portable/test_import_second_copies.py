"""An import keeps one live item per source: an export that carries a second copy of a file (a ``deleting`` row
whose cleanup had not run yet, which an import turns live, or a duplicate a base held before migration 0033)
imports whole, the copy going ``deleting`` when the import finishes — the index refused the import before."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.errors import Conflict
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.lifecycle.recovery import repair_deleting_roots
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.portable.relocate import relocate_base
from knowledge.runtime import Quire
from knowledge.store.schema_identity import LIVE_FILE_SOURCE_INDEX
from tests.knowledge.helpers import drain
from tests.portable.helpers import synthetic_base

_COPY = (
    "INSERT INTO items (base_id, parent_id, root_id, type, name, source_path, relative_path, status, created_at,"
    " updated_at) SELECT base_id, parent_id, root_id, type, name || ' (copy)', source_path, relative_path, :status,"
    " created_at, updated_at + :later FROM items WHERE name = :name"
)


def _export_with_copies(tmp_path: Path) -> Path:
    source = open_quire(tmp_path / "source")
    try:
        synthetic_base(source, "kb", files=3, chunks_per_file=1)
        with source.db.write() as conn:
            conn.execute(text(_COPY), {"status": "deleting", "later": 10.0, "name": "doc000.txt"})
            conn.exec_driver_sql(f"DROP INDEX {LIVE_FILE_SOURCE_INDEX}")  # a base from before migration 0033
            conn.execute(text(_COPY), {"status": "failed", "later": 10.0, "name": "doc001.txt"})
        export_base(source, "kb", tmp_path / "kb.quirebase")
    finally:
        source.close()
    return tmp_path / "kb.quirebase"


def test_an_export_carrying_second_copies_imports_with_one_live_item_per_source(quire: Quire, tmp_path: Path) -> None:
    result = import_base(quire, _export_with_copies(tmp_path))

    with quire.db.read() as conn:
        assert duplicate_sources(conn, result.base_id) == []
        rows = conn.execute(
            text("SELECT name, status, source_path IS NULL FROM items WHERE type = 'file' ORDER BY name")
        ).all()
    assert [tuple(r) for r in rows] == [
        ("doc000.txt", "completed", 0),
        ("doc000.txt (copy)", "deleting", 1),
        ("doc001.txt", "completed", 0),
        ("doc001.txt (copy)", "deleting", 1),
        ("doc002.txt", "completed", 0),
    ]
    assert repair_deleting_roots(quire.queue, 100) == 2  # the normal delete path takes the copies
    drain(quire)
    with quire.db.read() as conn:
        names = conn.execute(text("SELECT name FROM items WHERE type = 'file' ORDER BY name")).scalars().all()
    assert names == ["doc000.txt", "doc001.txt", "doc002.txt"]


def test_relocating_onto_a_file_the_base_already_holds_is_a_conflict(quire: Quire, tmp_path: Path) -> None:
    """Relocate re-points every path under the old folder in one statement: when one of them lands on a file
    another live item of the base stands for, the database refuses it and nothing moves."""
    old, new = tmp_path / "was-here", tmp_path / "moved"
    source = open_quire(tmp_path / "source")
    try:
        synthetic_base(source, "kb", files=2, chunks_per_file=1, source_root=old)
        export_base(source, "kb", tmp_path / "kb.quirebase")
    finally:
        source.close()
    imported = import_base(quire, tmp_path / "kb.quirebase")
    with quire.db.write() as conn:  # the file at its new place, already added here on its own
        conn.execute(
            text(
                "INSERT INTO items (base_id, type, name, source_path, source_key, status, created_at, updated_at)"
                " VALUES (:b, 'file', 'doc000.txt', :p, :p, 'completed', 0, 0)"
            ),
            {"b": imported.base_id, "p": str(new / "doc000.txt")},
        )
    before = _sources(quire)

    with pytest.raises(Conflict, match="one item per source"):
        relocate_base(quire, "kb", str(old), str(new))
    assert _sources(quire) == before


def _sources(quire: Quire) -> list[tuple[object, ...]]:
    with quire.db.read() as conn:
        return [tuple(r) for r in conn.execute(text("SELECT id, source_path, source_unverified FROM items")).all()]
