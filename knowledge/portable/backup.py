"""Backups of a whole data directory, and the way back.

``backup_data_dir`` takes SQLite's online backup of the live WAL database through apsw
(``Connection.backup``, stepped in one go: it reads one consistent snapshot and never blocks writers),
then copies the blob files the *backed-up* database lists — so the copy is consistent with itself even
while a worker keeps writing. Everything is written into ``.<name>.partial`` and renamed when complete,
owner-only (0700 folder, 0600 files), with a ``manifest.json`` (format, time, counts) and an integrity
check of the copy. The last backup's location is kept in the ``settings`` table and in ``last-backup.json`` beside the
database (readable even when the database is not), for ``quire doctor``.

``check_backup`` and ``restore_backup`` read a backup without changing it, and trust nothing in it: its
database passes every rule an import applies before a byte is copied, and what it says about the world
outside (originals, endpoints, queued work) is held back once restored (:mod:`knowledge.portable.restore_rules`).
A restore refuses a non-empty target directory unless ``force`` is given; then the old contents are moved
aside to ``<dir>.replaced-<time>`` (never deleted).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw

from knowledge.errors import Conflict, InvalidInput, StoreError
from knowledge.library import blobs
from knowledge.portable import foreign, restore_rules
from knowledge.portable.restore_rules import BackupRefused as BackupRefused
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store import settings as stored_settings
from knowledge.store.database import DB_FILENAME, raw_apsw
from knowledge.store.permissions import create_private_file, make_private, make_private_dir, write_private_bytes

Progress = Callable[[str, int, int], None]
BACKUP_FORMAT = "quire-backup"
BACKUP_FORMAT_VERSION = 1
MANIFEST = "manifest.json"
LAST_BACKUP_KEY = "backup.last_path"
LAST_BACKUP_FILE = "last-backup.json"  # beside the database: readable when the database is not


@dataclass(frozen=True)
class BackupResult:
    path: str
    blobs: int
    blobs_missing: int
    bytes: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def backup_data_dir(quire: Quire, target_root: Path, *, progress: Progress | None = None) -> BackupResult:
    require_person("back up the data directory")
    started = time.monotonic()
    report = progress or (lambda _stage, _done, _total: None)
    target_root = Path(target_root).expanduser().resolve()
    if target_root.exists() and not target_root.is_dir():
        raise InvalidInput(f"{target_root} is a file, not a folder")
    if target_root == quire.data_dir or quire.data_dir in target_root.parents:
        raise InvalidInput("a backup cannot be written inside the data directory it backs up")
    make_private_dir(target_root)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = f"quire-backup-{stamp}"
    final = target_root / name
    n = 1
    while final.exists():
        n += 1
        final = target_root / f"{name}-{n}"
    partial = target_root / f".{final.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    make_private_dir(partial)
    try:
        report("database", 0, 1)
        _online_copy(quire, partial / DB_FILENAME)
        report("database", 1, 1)
        copied, missing = _copy_blobs(partial / DB_FILENAME, quire.blobs_dir, partial / "blobs", report)
        manifest = {
            "format": BACKUP_FORMAT,
            "format_version": BACKUP_FORMAT_VERSION,
            "created_at": time.time(),
            "source": str(quire.data_dir),
            "blobs": copied,
            "blobs_missing": missing,
        }
        write_private_bytes(partial / MANIFEST, json.dumps(manifest, indent=2).encode())
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    with quire.db.write() as conn:
        stored_settings.put(conn, LAST_BACKUP_KEY, str(final))
    write_private_bytes(quire.data_dir / LAST_BACKUP_FILE, json.dumps({"path": str(final)}).encode())
    size = sum(p.stat().st_size for p in final.rglob("*") if p.is_file())
    return BackupResult(str(final), copied, missing, size, round(time.monotonic() - started, 3))


def _online_copy(quire: Quire, dest_path: Path) -> None:
    create_private_file(dest_path)
    dest = apsw.Connection(str(dest_path))
    try:
        with quire.db.autocommit() as conn:
            source = raw_apsw(conn)
            with dest.backup("main", source, "main") as step:
                step.step(-1)  # one step: one consistent snapshot of the source
        dest.execute("PRAGMA journal_mode=DELETE").fetchall()  # a backup is one self-contained file
        problems = [str(r[0]) for r in dest.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise StoreError(f"the backup copy failed its integrity check: {problems[0][:200]}")
    finally:
        dest.close()
    make_private(dest_path)


def _listed_blobs(db_path: Path) -> list[str]:
    conn = foreign.open_database(db_path)
    try:
        return [str(r[0]) for r in conn.execute("SELECT sha256 FROM blobs ORDER BY sha256")]
    finally:
        conn.close()


def _copy_blobs(db_path: Path, source_root: Path, dest_root: Path, report: Progress) -> tuple[int, int]:
    shas = _listed_blobs(db_path)
    copied = missing = 0
    for n, sha in enumerate(shas, start=1):
        if not blobs.is_blob_name(sha):  # a tampered row names no file of ours: nothing to copy
            missing += 1
            continue
        try:
            data = blobs.read(source_root, sha)
        except FileNotFoundError:
            missing += 1
            continue
        blobs.write_file(dest_root, sha, data)
        copied += 1
        if n % 200 == 0 or n == len(shas):
            report("blobs", n, len(shas))
    return copied, missing


# -- checking and restoring ---------------------------------------------------------------------


@dataclass(frozen=True)
class BackupCheck:
    path: str
    created_at: float
    blobs: int
    blobs_missing: list[str]
    integrity: str
    blobs_invalid: list[str] = field(default_factory=list)  # names that are not a hash: never used as paths

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_backup(backup: Path) -> BackupCheck:
    backup = Path(backup).expanduser().resolve()
    manifest_path = backup / MANIFEST
    if not backup.is_dir() or not manifest_path.is_file():
        raise BackupRefused("not_a_backup", f"{backup} is not a Quire backup folder (no {MANIFEST})")
    try:
        manifest = json.loads(foreign.read_small_file(manifest_path).decode("utf-8"))
    except (OSError, ValueError, foreign.ForeignFileRefused):
        raise BackupRefused("damaged", f"the manifest of {backup.name} cannot be read") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise BackupRefused("not_a_backup", f"{backup.name} is not a Quire backup")
    if int(manifest.get("format_version", 0)) > BACKUP_FORMAT_VERSION:
        raise BackupRefused("newer_format", f"{backup.name} was made by a newer Quire; update Quire to restore it")
    db_path = backup / DB_FILENAME
    try:
        conn = foreign.open_database(db_path)
        try:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
            if problems == ["ok"]:
                restore_rules.check_database(conn, backup.name)
        finally:
            conn.close()
        listed = _listed_blobs(db_path)
    except foreign.ForeignFileRefused as exc:
        raise BackupRefused("damaged", f"the database in {backup.name} cannot be used: {exc.reason}") from None
    except (apsw.Error, OSError) as exc:
        raise BackupRefused("damaged", f"the database in {backup.name} is damaged: {exc}") from None
    if problems != ["ok"]:
        raise BackupRefused("damaged", f"the database in {backup.name} is damaged: {problems[0][:200]}")
    invalid = [_shown(sha) for sha in listed if not blobs.is_blob_name(sha)]
    absent = [sha for sha in listed if blobs.is_blob_name(sha) and not blobs.blob_path(backup / "blobs", sha).is_file()]
    return BackupCheck(str(backup), float(manifest.get("created_at", 0)), len(listed), absent[:20], "ok", invalid[:20])


def _shown(name: str) -> str:
    """A tampered name, short and printable, for a report."""
    return repr(name)[:80]


def restore_backup(backup: Path, data_dir: Path, *, force: bool = False) -> dict[str, Any]:
    require_person("restore a backup")
    checked = check_backup(backup)
    source = Path(checked.path)
    data_dir = Path(data_dir).expanduser().resolve()
    moved_aside: str | None = None
    if data_dir.exists():
        if not data_dir.is_dir():
            raise InvalidInput(f"{data_dir} is a file, not a folder")
        if any(data_dir.iterdir()):
            if not force:
                raise Conflict(
                    f"{data_dir} is not empty; restore into an empty folder, or add --force to move its "
                    "contents aside first"
                )
            aside = data_dir.with_name(f"{data_dir.name}.replaced-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
            os.replace(data_dir, aside)
            moved_aside = str(aside)
    make_private_dir(data_dir)
    _copy_database(source / DB_FILENAME, data_dir / DB_FILENAME, source.name)
    held = restore_rules.hold_back(data_dir)  # before any blob, worker or window can use the copy
    restored, refused, refused_count = _restore_blobs(source, data_dir)
    return {
        "restored_from": str(source),
        "data_dir": str(data_dir),
        "blobs": restored,
        "blobs_missing": len(checked.blobs_missing),
        "blobs_invalid": checked.blobs_invalid,
        "blobs_refused": refused,  # the first 20 reasons, each naming the copy by its hash (never a path)
        "blobs_refused_count": refused_count,
        "moved_aside": moved_aside,
        **held.as_dict(),
    }


def _copy_database(source_db: Path, target_db: Path, backup_name: str) -> None:
    """Copy the backup's database, then check the copy itself again (the backup's file could have been
    swapped since ``check_backup`` read it); a copy that fails is removed."""
    create_private_file(target_db)
    src = foreign.open_database(source_db)
    dest = apsw.Connection(str(target_db))
    try:
        with dest.backup("main", src, "main") as step:
            step.step(-1)
    finally:
        dest.close()
        src.close()
    try:
        copy = foreign.open_database(target_db)
        try:
            restore_rules.check_database(copy, backup_name)
        finally:
            copy.close()
        restore_rules.check_counters(target_db, backup_name)  # opens it as Quire does: WAL from here on
    except BaseException:
        for path in (target_db, Path(f"{target_db}-wal"), Path(f"{target_db}-shm")):
            path.unlink(missing_ok=True)
        raise


def _restore_blobs(source: Path, data_dir: Path) -> tuple[int, list[str], int]:
    """Copy the backup's blob files into the new data directory: only hash-named regular files inside the
    backup's ``blobs/`` (never through a link); the rest is skipped and named in the report (the first 20
    reasons, and how many were refused)."""
    restored = 0
    refused: list[str] = []
    blob_root = source / "blobs"
    if not blob_root.is_dir() or blob_root.is_symlink():
        return 0, refused, 0
    for sha in _listed_blobs(source / DB_FILENAME):
        if not blobs.is_blob_name(sha):
            continue  # reported by check_backup as blobs_invalid
        try:
            data = blobs.read_foreign(blob_root, sha)
        except blobs.UnsafeBlobFile as exc:
            refused.append(str(exc))
            continue
        if data is not None:
            blobs.write_file(data_dir / "blobs", sha, data)
            restored += 1
    return restored, refused[:20], len(refused)


# -- keeping the last N, and automatic backups (off by default) ---------------------------------

AUTO_KEY = "backup.auto"  # JSON {"dir", "every_hours", "keep"}; absent = off
AUTO_LAST_KEY = "backup.auto.last_at"


def prune_backups(root: Path, keep: int) -> list[str]:
    """Remove the oldest Quire backups in ``root`` beyond the newest ``keep`` (only folders this code made)."""
    if keep < 1:
        raise InvalidInput("keep at least one backup")
    made = []
    for folder in Path(root).glob("quire-backup-*"):
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if manifest.get("format") == BACKUP_FORMAT:
            made.append((float(manifest.get("created_at", 0)), folder))
    made.sort()
    removed = [folder for _at, folder in made[:-keep]]
    for folder in removed:
        shutil.rmtree(folder)
    return [str(f) for f in removed]


@dataclass(frozen=True)
class AutoBackup:
    dir: str
    every_hours: float
    keep: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _setting(quire: Quire, key: str) -> str | None:
    with quire.db.read() as conn:
        return stored_settings.get(conn, key)


def auto_backup_settings(quire: Quire) -> AutoBackup | None:
    raw = _setting(quire, AUTO_KEY)
    if raw is None:
        return None
    data = json.loads(raw)
    return AutoBackup(str(data["dir"]), float(data["every_hours"]), int(data["keep"]))


def set_auto_backup(quire: Quire, settings: AutoBackup | None) -> AutoBackup | None:
    """Turn automatic backups on (a folder, an interval, how many to keep) or off (``None``)."""
    require_person("change automatic backups")
    with quire.db.write() as conn:
        if settings is None:
            stored_settings.remove(conn, AUTO_KEY)
            return None
        if settings.every_hours < 0 or settings.keep < 1:
            raise InvalidInput("the interval cannot be negative and at least one backup is kept")
        folder = Path(settings.dir).expanduser().resolve()
        if folder == quire.data_dir or quire.data_dir in folder.parents:
            raise InvalidInput("automatic backups cannot go inside the data directory they back up")
        clean = AutoBackup(str(folder), settings.every_hours, settings.keep)
        stored_settings.put(conn, AUTO_KEY, json.dumps(clean.as_dict(), sort_keys=True))
        return clean


def run_auto_backup_if_due(quire: Quire, *, now: float | None = None) -> BackupResult | None:
    """The scheduled backup, when one is configured and the last one is older than the interval."""
    settings = auto_backup_settings(quire)
    if settings is None:
        return None
    now = time.time() if now is None else now
    last = float(_setting(quire, AUTO_LAST_KEY) or 0)
    if now - last < settings.every_hours * 3600:
        return None
    result = backup_data_dir(quire, Path(settings.dir))
    with quire.db.write() as conn:
        stored_settings.put(conn, AUTO_LAST_KEY, repr(now))
    prune_backups(Path(settings.dir), settings.keep)
    return result
