"""What a backup's database must be before a byte of it is restored, and what a restore holds back after.

A backup folder may come from anyone and its manifest proves nothing, so a restore applies what an import
applies (:mod:`knowledge.portable.import_rules`, reused here), on the database opened as a foreign one:

* its schema equals what this Quire's migrations make at the backup's own level (the migrations it
  recorded must be a prefix of ours), plus each of its bases' vector and keyword tables: a view, a
  trigger, an index or a table Quire does not make, or a changed definition, is ``unexpected_schema``;
* ids are unique positive integers far from 2^63 (``invalid_ids``), owned-copy names on items are hashes,
  every stored vector (the float16 copies and the vec0 float32 pages) is finite (``invalid_vector``), and a
  remote endpoint carries no secret and parses (``endpoint_refused``, ``invalid_settings``).

Then, once the copy is in place and before anything runs on it (:func:`hold_back`): every original is
"not verified" (reindex reads owned copies; sync never walks it until ``quire base relocate``), every remote
endpoint waits for ``quire base confirm-endpoint``, every queued or running job is cancelled (what it
left half done is parked by the next worker's repair, for a reindex) and huey's message tables are
emptied: a backup's queue is never read, so nothing pickled in it can run.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np
from sqlalchemy import select

from jobs.schema import LIVE_STATUSES, jobs
from jobs.transport import discard_messages
from knowledge.errors import GuardRejected
from knowledge.library import bases, chunk_ids, index, tree
from knowledge.portable import import_rules
from knowledge.portable.import_rules import MAX_DIMENSION, MAX_ID, ImportRefused
from knowledge.runtime import Quire
from knowledge.store import settings as stored_settings
from knowledge.store.database import DB_FILENAME, Database, raw_apsw
from knowledge.store.migrations import MIGRATIONS, migrate

MAX_BASES = 10_000
RECORD_TABLE = "schema_migrations"
# SQLite's own statistics tables (ANALYZE, PRAGMA optimize): a database may or may not have them
STAT_TABLES = {
    ("table", "sqlite_stat1", "sqlite_stat1", "CREATE TABLE sqlite_stat1(tbl,idx,stat)"),
    ("table", "sqlite_stat4", "sqlite_stat4", "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)"),
}
Schema = set[tuple[str, str, str, str | None]]
_HIGH_SEQUENCES = f"SELECT count(*) FROM sqlite_sequence WHERE typeof(seq) != 'integer' OR seq >= {MAX_ID}"


class BackupRefused(GuardRejected):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_database(conn: apsw.Connection, backup_name: str) -> None:
    """Every check above on the backup's database (opened by ``foreign.open_database``); raises
    :class:`BackupRefused` with the import's code for the first thing Quire never writes."""
    name = f"the database in {backup_name}"
    try:
        dimensions = _check_schema(conn, name)
        _check_ids(conn, name, dimensions)
        import_rules.check_blob_names(conn, name)
        _check_vectors(conn, name, dimensions)
        _check_endpoints(conn, name)
    except ImportRefused as exc:
        raise BackupRefused(exc.code, f"{exc} (nothing was restored)") from None
    except apsw.Error:
        raise BackupRefused("damaged", f"{name} cannot be read as a Quire database (nothing was restored)") from None


def _check_schema(conn: apsw.Connection, name: str) -> dict[int, int]:
    """The schema equals ours at the backup's level; returns each base's vector dimension."""
    found = import_rules.schema_of(conn, name)
    if not any(obj[:2] == ("table", RECORD_TABLE) for obj in found):
        raise ImportRefused("unexpected_schema", f"{name} is not a Quire database (it records no migrations)")
    applied = sorted(str(r[0]) for r in conn.execute(f"SELECT name FROM {RECORD_TABLE}"))
    known = [m.name for m in MIGRATIONS]
    if set(applied) - set(known):
        raise ImportRefused("newer_format", f"{name} was made by a newer Quire; update Quire to restore it")
    if applied != known[: len(applied)]:
        raise ImportRefused("unexpected_schema", f"{name} records migrations Quire never applies in that order")
    dimensions = _dimensions(conn, name)
    expected = expected_schema(len(applied), dimensions)
    if found - (STAT_TABLES & found) != expected:
        detail = import_rules.schema_detail(found - STAT_TABLES, expected)
        raise ImportRefused(
            "unexpected_schema",
            f"{name} is not laid out as Quire writes it{detail}: views, triggers and extra or changed tables "
            "are never restored",
        )
    return dimensions


def _dimensions(conn: apsw.Connection, name: str) -> dict[int, int]:
    rows = conn.execute(f"SELECT id, dimension FROM bases LIMIT {MAX_BASES + 1}").fetchall()
    if len(rows) > MAX_BASES:
        raise ImportRefused("invalid_settings", f"{name} holds more than {MAX_BASES} knowledge bases")
    found: dict[int, int] = {}
    for base_id, dimension in rows:
        if not isinstance(base_id, int) or not 0 < base_id < MAX_ID:
            raise import_rules.refuse_ids(name, "a knowledge base id that is not a positive integer")
        if not isinstance(dimension, int) or not 0 < dimension <= MAX_DIMENSION:
            raise ImportRefused("invalid_settings", f"{name} holds a base with a vector dimension of {dimension}")
        found[base_id] = dimension
    return found


def expected_schema(level: int, dimensions: dict[int, int]) -> Schema:
    """What this Quire's first ``level`` migrations make in an empty database, plus each base's tables."""
    with tempfile.TemporaryDirectory(prefix="quire-restore-check-") as folder:
        full = Database(Path(folder) / DB_FILENAME)
        try:
            migrate(full)
            db = full if level == len(MIGRATIONS) else _migrated_through(full, level, Path(folder) / "level.db")
            with db.write() as conn:
                for base_id, dimension in dimensions.items():
                    index.create_base_index(conn, base_id, dimension)
            with db.read() as conn:
                schema = import_rules.schema_of(raw_apsw(conn), "the expected schema")
            db.dispose()
        finally:
            full.dispose()
    return schema


def _migrated_through(full: Database, level: int, path: Path) -> Database:
    """A database at an older level: the record table as ``migrate`` makes it, then the first migrations."""
    with full.read() as conn:
        record_sql = conn.exec_driver_sql(f"SELECT sql FROM sqlite_master WHERE name = '{RECORD_TABLE}'").scalar_one()
    db = Database(path)
    with db.write() as conn:
        conn.exec_driver_sql(record_sql)
    for migration in MIGRATIONS[:level]:  # each in its own transaction, as migrate applies them
        with db.write() as conn:
            migration.apply(conn)
    return db


def _id_tables(conn: apsw.Connection) -> list[str]:
    """Quire's own tables keyed by an integer ``id`` (the schema is already known to be ours; the vector
    and keyword tables' ids are checked through the rows they mirror)."""
    names = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' "
            "AND substr(name, 1, 9) NOT IN ('vec_base_', 'fts_base_')"
        )
    ]
    return [t for t in names if ("id", "INTEGER") in {(c[1], str(c[2]).upper()) for c in _columns(conn, t)}]


def _columns(conn: apsw.Connection, table: str) -> list[tuple[Any, ...]]:
    return [tuple(c) for c in conn.execute(f'PRAGMA table_info("{table}")') if c[5]]  # primary key columns


def _check_ids(conn: apsw.Connection, name: str, dimensions: dict[int, int]) -> None:
    """No id (nor counter) near 2^63, so none of Quire's counters can be pushed toward overflow."""
    for table in _id_tables(conn):
        import_rules.check_ids(conn, table, name)
    for base_id in dimensions:  # vec0 keeps a chunk's id as the rowid of its rowids table
        vec_rowids = f"SELECT count(*) FROM {index.vec_table(base_id)}_rowids WHERE rowid <= 0 OR rowid >= {MAX_ID}"
        if conn.execute(vec_rowids).fetchall()[0][0]:
            raise import_rules.refuse_ids(name, f"vectors of base {base_id} under ids Quire never gives")
        import_rules.check_ids(conn, f"{index.fts_table(base_id)}_content", name)
    has_sequences = conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'").fetchall()[0][0]
    if has_sequences and conn.execute(_HIGH_SEQUENCES).fetchall()[0][0]:
        raise import_rules.refuse_ids(name, "an id counter near the largest integer")


def check_counters(db_path: Path, backup_name: str) -> None:
    """The chunk id counter, read through the settings door on the copy (its schema already checked)."""
    db = Database(db_path)
    try:
        with db.read() as conn:
            counter = stored_settings.get(conn, chunk_ids.NEXT_CHUNK_ID)
    finally:
        db.dispose()
    if counter is not None and (not counter.isdigit() or int(counter) >= MAX_ID):
        message = f"the database in {backup_name} has a chunk id counter near the largest integer"
        raise BackupRefused("invalid_ids", f"{message} (nothing was restored)")


def _check_vectors(conn: apsw.Connection, name: str, dimensions: dict[int, int]) -> None:
    """The float16 copies search reads, and the float32 pages of each vec0 table: finite, of the right size."""
    for base_id, dimension in dimensions.items():
        copies = conn.execute("SELECT vector_f16 FROM chunks WHERE base_id = ? AND vector_f16 IS NOT NULL", (base_id,))
        for (vector,) in copies:
            _refuse_vector(name, import_rules.vector_problem(vector, dimension, np.float16))
        for (page,) in conn.execute(f"SELECT vectors FROM {index.vec_table(base_id)}_vector_chunks00"):
            if not isinstance(page, bytes) or len(page) % (4 * dimension):
                _refuse_vector(name, f"a vector page that is not made of {dimension} float32 numbers")
            _refuse_vector(name, import_rules.vector_problem(page, len(page) // 4))


def _refuse_vector(name: str, problem: str | None) -> None:
    if problem is not None:
        raise ImportRefused("invalid_vector", f"{name} holds {problem}")


def _check_endpoints(conn: apsw.Connection, name: str) -> None:
    for raw, dimension in conn.execute("SELECT embedder, dimension FROM bases WHERE embedder IS NOT NULL"):
        try:
            embedder = json.loads(raw)
        except (TypeError, ValueError):
            raise ImportRefused("invalid_settings", f"{name} holds a remote embedder Quire cannot read") from None
        import_rules.check_endpoint_config(embedder, name, dimension)


# -- after the copy ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldBack:
    originals_unverified: int
    endpoints_held_back: list[str]
    jobs_cancelled: int
    messages_discarded: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def hold_back(data_dir: Path) -> HeldBack:
    """What the restored database says about the world outside waits for a person; nothing queued runs."""
    quire = Quire.open(data_dir)
    try:
        with quire.db.write() as conn:
            unverified = tree.mark_sources_unverified(conn)
            held = bases.hold_back_endpoints(conn)
            live = [int(r[0]) for r in conn.execute(select(jobs.c.id).where(jobs.c.status.in_(LIVE_STATUSES)))]
            cancelled = quire.queue.cancel(conn, live)
            discarded = discard_messages(conn)
    finally:
        quire.close()
    return HeldBack(unverified, held, len(cancelled), discarded)
