"""What ``quire doctor`` (and the window at start) says about a data directory that cannot be opened.

Everything here only reads: the database is opened read-only (``SQLITE_OPEN_READONLY``), nothing is
migrated, repaired or rewritten. A damaged database gets the integrity check's own words, the tables
those words point at, and the ways back (restore the latest backup; salvage what SQLite can still read
into a new data directory with ``quire salvage --to DIR`` (or the SQLite shell's ``.recover``)). A data
directory that is a file, missing, or read-only gets a plain sentence instead of an errno.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw
from sqlalchemy import text

from knowledge.errors import KnowledgeError
from knowledge.library import blobs
from knowledge.store.database import DB_FILENAME, Database
from knowledge.store.permissions import exposed, fix_command

LAST_BACKUP_KEY = "backup.last_path"
LAST_BACKUP_FILE = "last-backup.json"


@dataclass
class Diagnosis:
    ok: bool
    problem: str | None = None  # a code: not_a_directory, read_only, damaged, unreadable
    message: str | None = None
    integrity: list[str] = field(default_factory=list)
    damaged_tables: list[str] = field(default_factory=list)
    ways_back: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def preflight(data_dir: Path) -> Diagnosis:
    """Check what would make opening the data directory fail, without changing anything."""
    if data_dir.exists() and not data_dir.is_dir():
        return Diagnosis(
            False,
            "not_a_directory",
            f"the data directory {data_dir} is a file, not a folder; move the file away or choose another "
            "folder with --data-dir",
        )
    if not data_dir.exists():
        parent = next((p for p in data_dir.parents if p.exists()), None)
        if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
            return Diagnosis(
                False, "read_only", f"the data directory {data_dir} cannot be created: {parent} is read-only"
            )
        return Diagnosis(True)
    db_path = data_dir / DB_FILENAME
    if not os.access(data_dir, os.W_OK | os.X_OK) or (db_path.exists() and not os.access(db_path, os.W_OK)):
        return Diagnosis(
            False,
            "read_only",
            f"the data directory {data_dir} is read-only for this user; Quire needs to write there "
            "(check its owner and permissions, or copy it somewhere writable)",
        )
    if not db_path.exists() or db_path.stat().st_size == 0:
        return Diagnosis(True)
    return check_database(db_path)


def check_database(db_path: Path) -> Diagnosis:
    """Read-only integrity check of the database file; the tables it names, and the ways back."""
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return _damaged(db_path, [f"cannot open: {exc}"], [])
    try:
        try:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(100)")]
        except apsw.Error as exc:  # the check itself stopped on the damage: check table by table
            problems, tables = _table_by_table(conn)
            return _damaged(db_path, [str(exc), *problems], tables)
        if problems == ["ok"]:
            return Diagnosis(True, integrity=problems)
        return _damaged(db_path, problems, _tables_named(conn, problems))
    finally:
        conn.close()


def _table_by_table(conn: apsw.Connection) -> tuple[list[str], list[str]]:
    """``PRAGMA integrity_check(TABLE)`` and a full read of each table, one at a time."""
    try:
        names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except apsw.Error as exc:
        return [f"the schema cannot be read: {exc}"], ["sqlite_master (the schema itself)"]
    problems: list[str] = []
    damaged: list[str] = []
    for name in names:
        quoted = name.replace('"', '""')
        try:
            found = [str(r[0]) for r in conn.execute(f'PRAGMA integrity_check("{quoted}")')]
            conn.execute(f'SELECT count(*) FROM "{quoted}"').fetchall()
        except apsw.Error as exc:
            found = [str(exc)]
        if found != ["ok"]:
            damaged.append(name)
            problems.extend(f"{name}: {line}" for line in found[:5])
    return problems, damaged


def _tables_named(conn: apsw.Connection, problems: list[str]) -> list[str]:
    """Tables and indexes the problems point at: by name ("in table x") or by root page ("Tree 5")."""
    names: set[str] = set()
    for line in problems:
        names.update(re.findall(r"(?:table|index) (\w+)", line))
    pages = {int(p) for line in problems for p in re.findall(r"Tree (\d+)", line)}
    if pages:
        try:
            for name, root in conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0"):
                if int(root) in pages:
                    names.add(str(name))
        except apsw.Error:
            names.add("sqlite_master (the schema itself)")
    return sorted(names)


def _last_backup(db_path: Path) -> str | None:
    try:
        recorded = json.loads((db_path.parent / LAST_BACKUP_FILE).read_text(encoding="utf-8"))
        return str(recorded["path"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows = conn.execute("SELECT value FROM settings WHERE key = ?", (LAST_BACKUP_KEY,)).fetchall()
        finally:
            conn.close()
        return str(rows[0][0]) if rows else None
    except apsw.Error:
        return None


def _damaged(db_path: Path, problems: list[str], tables: list[str]) -> Diagnosis:
    last = _last_backup(db_path)
    restore = (
        f"restore the latest backup: quire restore {last} --data-dir NEW_DIR (or --force into this one; "
        "its contents are moved aside, not deleted)"
        if last
        else "restore a backup you made with `quire backup DIR`: quire restore BACKUP --data-dir NEW_DIR"
    )
    salvage = (
        "salvage what can still be read into a new data directory: quire --data-dir "
        f"'{db_path.parent}' salvage --to NEW_DIR (rows in damaged pages are lost; items that lost chunks are "
        "parked for reindex; search indexes are re-derived). Without Quire: sqlite3 "
        f"'{db_path}' .recover | sqlite3 NEW_DIR/{DB_FILENAME}"
    )
    where = f" (in {', '.join(tables)})" if tables else ""
    return Diagnosis(
        False,
        "damaged",
        f"the database {db_path.name} is damaged{where}; Quire has not changed it",
        integrity=problems[:100],
        damaged_tables=tables,
        ways_back=[restore, salvage],
    )


def privacy_warnings(data_dir: Path, backups: list[Path] | None = None) -> list[dict[str, str]]:
    """Places other local users can read: the data directory (and its files) and known backups."""
    warnings: list[dict[str, str]] = []
    for root, label in [(data_dir, "data directory"), *[(b, "backup") for b in backups or []]]:
        if not root.exists():
            continue
        found = exposed(root)
        if found:
            warnings.append(
                {
                    "what": label,
                    "path": str(root),
                    "readable_by_others": ", ".join(f"{e.path} ({e.mode})" for e in found[:5]),
                    "fix": fix_command(root),
                }
            )
    return warnings


def invalid_blob_names(db: Database, blobs_dir: Path, *, limit: int = 20) -> list[dict[str, str]]:
    """Owned-copy names that are not a content hash — rows of ``blobs``, names items carry, and entries of
    the blobs folder (or links in it): a damaged or tampered store. Only reads; such names are never used
    as paths (:func:`knowledge.library.blobs.blob_path` refuses them)."""
    found: list[dict[str, str]] = []

    def note(where: str, name: object) -> None:
        if len(found) < limit:
            found.append({"where": where, "name": repr(name)[:80]})

    with db.read() as conn:
        for (sha,) in conn.execute(text("SELECT sha256 FROM blobs")):
            if not blobs.is_blob_name(sha):
                note("blobs table", sha)
        for item_id, raw, txt in conn.execute(
            text(
                "SELECT id, blob_sha256, text_sha256 FROM items "
                "WHERE blob_sha256 IS NOT NULL OR text_sha256 IS NOT NULL"
            )
        ):
            for sha in (raw, txt):
                if sha is not None and not blobs.is_blob_name(sha):
                    note(f"item {item_id}", sha)
    if blobs_dir.is_dir():
        for sub in sorted(blobs_dir.iterdir()):
            if sub.is_symlink() or not sub.is_dir() or re.fullmatch(r"[0-9a-f]{2}", sub.name) is None:
                note("blobs folder", sub.name)
                continue
            for f in sub.iterdir():
                if f.name.startswith("."):
                    continue  # a write in progress (tmp + rename)
                if f.is_symlink() or not blobs.is_blob_name(sub.name + f.name):
                    note("blobs folder", f"{sub.name}/{f.name}")
    return found


def known_backups(db_path: Path) -> list[Path]:
    last = _last_backup(db_path)
    return [Path(last)] if last else []


class DataDirProblem(KnowledgeError):
    """The data directory cannot be opened; the message says why and how to get back (read-only diagnosis)."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        ways = "".join(f"\n• {w}" for w in diagnosis.ways_back)
        super().__init__(f"{diagnosis.message}{ways}")
        self.code = diagnosis.problem or "data_dir_problem"
        self.diagnosis = diagnosis


def explain_open_failure(data_dir: Path) -> DataDirProblem | None:
    """After opening failed: a diagnosis of the data directory, or None when it finds nothing wrong."""
    diagnosis = preflight(data_dir)
    return None if diagnosis.ok else DataDirProblem(diagnosis)
