"""The import cursor moves by compare-and-set: an import whose cursor another process moved stops loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.errors import Conflict
from knowledge.library import bases
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.runtime import Quire
from tests.portable.helpers import synthetic_base


def test_an_import_whose_cursor_was_moved_by_another_process_stops_loudly(quire: Quire, tmp_path: Path) -> None:
    source = open_quire(tmp_path / "source")
    try:
        synthetic_base(source, "kb", files=1200, chunks_per_file=1)  # more than one page of items
        export_base(source, "kb", tmp_path / "kb.quirebase")
    finally:
        source.close()
    moved: list[int] = []

    def progress(stage: str, done: int, _total: int) -> None:
        if stage == "items" and done and not moved:  # another process takes the import over and moves on
            with quire.db.write() as conn:
                conn.execute(text("UPDATE base_imports SET cursor = cursor + 500"))
                moved.append(int(conn.execute(text("SELECT cursor FROM base_imports")).scalar_one()))

    with pytest.raises(Conflict, match="cursor"):
        import_base(quire, tmp_path / "kb.quirebase", progress=progress)
    assert moved
    with quire.db.read() as conn:  # the import did not write over the other process's cursor
        assert conn.execute(text("SELECT stage, cursor FROM base_imports")).one() == ("items", moved[0])
    assert [b.name for b in bases.list_bases(quire.db)] == []  # still hidden: nothing half-imported shows
