"""``quire doctor``'s check of each base's keyword index against its rows (:mod:`knowledge.library.keyword_file`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from knowledge.library.keyword_file import KeywordFiles, history_differs
from knowledge.library.keyword_schema import Opened
from knowledge.library.vector_format import BaseKey, vectors_version

if TYPE_CHECKING:
    from knowledge.store.database import Database


def check_files(db: Database) -> list[dict[str, object]]:
    """``quire doctor``: each base's keyword index against its rows. One that does not match them is synced
    (caught up, or rebuilt from the rows) and says what it was; one that then still holds another set of
    chunks than the live rows (deletes whose sync a crash lost) is rebuilt from the rows."""
    files = KeywordFiles(db)
    report: list[dict[str, object]] = []
    with db.read() as conn:
        rows = conn.execute(text("SELECT id, created_at, dimension FROM bases ORDER BY id")).all()
    keys = [BaseKey(int(r[0]), float(r[1]), int(r[2])) for r in rows]
    files.remove_orphans({key.base_id for key in keys})
    for key in keys:
        with db.read() as conn:
            state = _state(conn, files, key)
        entry: dict[str, object] = {"base_id": key.base_id, "state": state}
        if state != "current":
            opened = files.sync(key.base_id)
            if opened is not None and not _holds_the_live_chunks(db, opened):
                files.remove(key.base_id)
                opened = files.sync(key.base_id)
            entry["synced_to_version"] = None if opened is None else opened.version
        report.append(entry)
    return report


def _state(conn: Connection, files: KeywordFiles, key: BaseKey) -> str:
    opened = files.peek(key)
    version = vectors_version(conn, key.base_id)
    if opened is None:
        return "missing or invalid"
    if opened.version < version:
        return "behind its rows"
    if history_differs(conn, opened.stamp, version) is not None:
        return "not its rows' history"
    if not _holds_the_live_chunks(files.db, opened):
        return "holds deleted or lacks live chunks"
    return "current"


def _holds_the_live_chunks(db: Database, opened: Opened) -> bool:
    """As many documents as live chunks up to its last id (a document is never added twice: ids only grow)."""
    with db.read() as conn:
        live = conn.execute(
            text("SELECT count(*) FROM chunks WHERE base_id = :b AND id <= :last"),
            {"b": opened.stamp.key.base_id, "last": opened.stamp.last_id},
        ).scalar_one()
    return opened.documents() == int(live)
