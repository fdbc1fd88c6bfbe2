"""Owner-only by default; online backups and restores; doctor on widened, damaged and unusable data dirs."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from sqlalchemy import text

from app.cli.commands_doctor import data_dir_checks
from knowledge.compose import open_quire
from knowledge.library import blobs
from knowledge.portable.backup import BackupRefused, backup_data_dir, check_backup, restore_backup
from knowledge.portable.export import export_base
from knowledge.runtime import Quire
from knowledge.store.database import DB_FILENAME
from tests.conftest import python_proc, quire_cli, wait_until
from tests.portable.helpers import base_content, synthetic_base


@pytest.fixture(autouse=True)
def desktop_umask() -> Iterator[None]:
    """A typical desktop umask (022): without care, new files would be world-readable."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _all_private(root: Path) -> list[str]:
    """Paths under root (itself included) that group or others can read; empty when all is private."""
    wide = [str(root)] if _mode(root) & 0o077 else []
    for p in root.rglob("*"):
        if _mode(p) & 0o077:
            wide.append(f"{p} {oct(_mode(p))}")
    return wide


def test_fresh_data_dir_database_wal_and_blobs_are_owner_only(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"
    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "kb", files=3, chunks_per_file=2)
        assert (data_dir / f"{DB_FILENAME}-wal").exists()  # open: the WAL is there, and private too
        assert _mode(data_dir) == 0o700
        assert _mode(data_dir.parent) == 0o700
        assert _mode(data_dir / DB_FILENAME) == 0o600
        assert list((data_dir / "blobs").rglob("*"))
        assert _all_private(data_dir) == []
    finally:
        quire.close()


def test_export_and_backup_are_owner_only(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=3, chunks_per_file=2)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    result = export_base(quire, "kb", shared / "kb.quirebase")
    assert _mode(Path(result.path)) == 0o600
    backup = backup_data_dir(quire, shared / "backups")
    assert _all_private(Path(backup.path)) == []
    assert backup.blobs == 3


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Quire]:
    """A data directory Quire created itself (the shared fixture's directory is made by the test harness)."""
    q = open_quire(tmp_path / "fresh")
    yield q
    q.close()


def test_doctor_flags_a_widened_data_dir_and_backup(fresh: Quire, tmp_path: Path) -> None:
    quire = fresh
    synthetic_base(quire, "kb", files=2, chunks_per_file=2)
    backup = Path(backup_data_dir(quire, tmp_path / "backups").path)
    clean = data_dir_checks(quire.data_dir)
    assert clean["ok"] and clean["privacy"] == []
    os.chmod(quire.data_dir, 0o755)
    os.chmod(quire.data_dir / DB_FILENAME, 0o644)
    os.chmod(backup, 0o755)
    report = data_dir_checks(quire.data_dir)
    by_what = {w["what"]: w for w in report["privacy"]}
    assert set(by_what) == {"data directory", "backup"}
    assert DB_FILENAME in by_what["data directory"]["readable_by_others"]
    assert by_what["data directory"]["fix"].startswith("chmod -R go-rwx")
    # the advice works
    os.system(by_what["data directory"]["fix"])  # the exact command doctor tells people to run
    os.system(by_what["backup"]["fix"])
    assert data_dir_checks(quire.data_dir)["privacy"] == []


# Another process commits all the time: each transaction adds one row ``w.<n>`` and moves the counter
# ``w.count`` to n, so a consistent snapshot holds exactly ``w.count`` rows named ``w.<n>``.
WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sqlalchemy import text
    from knowledge.store.database import Database

    db = Database(Path(sys.argv[1]) / "quire.sqlite3")
    stop = Path(sys.argv[2])
    n = 0
    while not stop.exists():
        n += 1
        with db.write() as conn:
            conn.execute(text("INSERT INTO settings (key, value) VALUES (:k, :v)"), {"k": f"w.{n}", "v": str(n)})
            conn.execute(text("DELETE FROM settings WHERE key = 'w.count'"))
            conn.execute(text("INSERT INTO settings (key, value) VALUES ('w.count', :v)"), {"v": str(n)})
    """
)


def _writer_count(data_dir: Path) -> tuple[int, int]:
    """(the counter, the rows it counts) as one snapshot of ``data_dir`` sees them."""
    conn = apsw.Connection(str(data_dir / DB_FILENAME), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.execute("BEGIN")
        count = conn.execute("SELECT value FROM settings WHERE key = 'w.count'").fetchall()
        rows = conn.execute("SELECT count(*) FROM settings WHERE key LIKE 'w.%' AND key != 'w.count'").fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    return (int(count[0][0]) if count else 0), int(rows[0][0])


def test_backup_while_writing_restores_to_the_same_content(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=8, chunks_per_file=3)
    before = base_content(quire, "kb")
    stop = tmp_path / "stop-writing"
    writer = python_proc("-c", WRITER, str(quire.data_dir), str(stop))
    try:
        wait_until(lambda: _writer_count(quire.data_dir)[0] >= 20, timeout=120)  # writing before the backup
        done = quire_cli("--json", "backup", str(tmp_path / "backups"), data_dir=quire.data_dir)
        assert done.returncode == 0, done.stderr
        backup = Path(json.loads(done.stdout)["path"])
        copied, copied_rows = _writer_count(backup)
        assert copied >= 20 and copied_rows == copied  # one consistent snapshot of a database being written
        wait_until(lambda: _writer_count(quire.data_dir)[0] > copied, timeout=120)  # and writing after it
    finally:
        stop.touch()
        writer.communicate(timeout=60)
    assert writer.returncode == 0
    synthetic_base(quire, "later", files=2, chunks_per_file=2, seed=9)  # after the backup: not in it
    checked = check_backup(backup)
    assert checked.integrity == "ok" and checked.blobs_missing == []
    target = tmp_path / "restored"
    restored = quire_cli("--json", "restore", str(backup), data_dir=target)
    assert restored.returncode == 0, restored.stderr
    again = open_quire(target)
    try:
        assert base_content(again, "kb") == before
        assert [b for b in json.loads(quire_cli("--json", "base", "list", data_dir=target).stdout)["bases"]]
        assert {
            b["name"] for b in json.loads(quire_cli("--json", "base", "list", data_dir=target).stdout)["bases"]
        } == {"kb"}
        for sha in (r[7] for r in before["items"] if r[7]):
            assert blobs.blob_path(again.blobs_dir, sha).is_file()
    finally:
        again.close()
    assert _all_private(target) == []


def test_restore_refuses_a_non_empty_dir_without_force(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=2, chunks_per_file=2)
    backup = Path(backup_data_dir(quire, tmp_path / "backups").path)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    refused = quire_cli("--json", "restore", str(backup), data_dir=occupied)
    assert refused.returncode == 4
    assert (occupied / "keep.txt").read_text() == "mine" and not (occupied / DB_FILENAME).exists()
    forced = restore_backup(backup, occupied, force=True)
    assert (Path(forced["moved_aside"]) / "keep.txt").read_text() == "mine"
    assert (occupied / DB_FILENAME).exists()


def test_a_damaged_backup_is_refused(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=2, chunks_per_file=2)
    backup = Path(backup_data_dir(quire, tmp_path / "backups").path)
    db = backup / DB_FILENAME
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)
    with pytest.raises(BackupRefused, match="damaged"):
        check_backup(backup)
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(BackupRefused, match="damaged"):
        restore_backup(backup, target)
    assert list(target.iterdir()) == []  # refused before anything was copied


def damage_table(db_path: Path, table: str = "chunks") -> None:
    """Overwrite the root page of a table's b-tree with noise (what a torn copy looks like).

    ``sqlite_master`` damages the schema page's b-tree part (the 100-byte file header is kept)."""
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    page_size = conn.execute("PRAGMA page_size").fetchall()[0][0]
    if table == "sqlite_master":
        offset, length = 100, page_size - 100
    else:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchall()[0][0]
        offset, length = (root - 1) * page_size, page_size
    conn.close()
    with open(db_path, "r+b") as f:
        f.seek(offset)
        f.write(bytes((n * 37) % 251 for n in range(length)))


def test_doctor_diagnoses_a_damaged_database_without_changing_it(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=30, chunks_per_file=6)
    backup_data_dir(quire, tmp_path / "backups")
    data_dir = quire.data_dir
    quire.close()
    damage_table(data_dir / DB_FILENAME)
    damaged = (data_dir / DB_FILENAME).read_bytes()
    done = quire_cli("--json", "doctor", data_dir=data_dir)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report == data_dir_checks(data_dir)  # the checks tests call in-process are what doctor prints
    assert report["problem"] == "damaged"
    assert report["integrity"] and report["integrity"] != ["ok"]
    assert "chunks" in report["damaged_tables"], report["integrity"][:5]
    assert any("quire restore" in w and str(tmp_path / "backups") in w for w in report["ways_back"])
    assert any(".recover" in w for w in report["ways_back"])
    assert (data_dir / DB_FILENAME).read_bytes() == damaged  # never modified
    text_out = quire_cli("doctor", data_dir=data_dir).stdout
    assert "damaged" in text_out and "way back" in text_out


def test_doctor_on_a_file_and_on_a_read_only_dir(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    done = quire_cli("--json", "doctor", data_dir=a_file)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["problem"] == "not_a_directory"
    assert "is a file, not a folder" in report["message"] and "Errno" not in report["message"]
    if os.geteuid() == 0:
        # root writes anywhere a mode allows; a directory of a kernel file system it cannot write still shows it
        locked = Path("/proc/sys")
        if os.access(locked, os.W_OK):
            pytest.skip("no read-only directory for root on this machine")
        report = data_dir_checks(locked)
        assert report["problem"] == "read_only" and "Errno" not in report["message"]
        listed = quire_cli("--json", "base", "list", data_dir=locked)
        assert json.loads(listed.stdout)["error"]["code"] == "read_only"
        return
    locked = tmp_path / "locked"
    open_quire(locked).close()
    os.chmod(locked, 0o500)
    try:
        report = data_dir_checks(locked)
        assert report["problem"] == "read_only" and "Errno" not in report["message"]
        listed = quire_cli("--json", "base", "list", data_dir=locked)
        assert json.loads(listed.stdout)["error"]["code"] == "read_only"
    finally:
        os.chmod(locked, 0o700)


def test_recorded_last_backup(quire: Quire, tmp_path: Path) -> None:
    result = backup_data_dir(quire, tmp_path / "b")
    with quire.db.read() as conn:
        value = conn.execute(text("SELECT value FROM settings WHERE key = 'backup.last_path'")).scalar_one()
    assert value == result.path


def test_any_command_on_a_file_says_so(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("x")
    done = quire_cli("--json", "base", "list", data_dir=a_file)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "not_a_directory" and "Errno" not in error["message"]


def _damage_a_leaf(db_path: Path, table: str) -> None:
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    page_size = conn.execute("PRAGMA page_size").fetchall()[0][0]
    leaves = [
        r[0]
        for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (table,)
        )
    ]
    conn.close()
    assert len(leaves) > 3
    with open(db_path, "r+b") as f:
        f.seek((leaves[len(leaves) // 2] - 1) * page_size)
        f.write(bytes((n * 37) % 251 for n in range(page_size)))


def test_salvage_copies_what_is_readable_and_parks_the_rest(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=60, chunks_per_file=6)
    before = base_content(quire, "kb")
    data_dir = quire.data_dir
    quire.close()
    _damage_a_leaf(data_dir / DB_FILENAME, "chunks")
    damaged = (data_dir / DB_FILENAME).read_bytes()
    assert data_dir_checks(data_dir)["problem"] == "damaged"
    new_dir = tmp_path / "salvaged"
    done = quire_cli("--json", "salvage", "--to", str(new_dir), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (data_dir / DB_FILENAME).read_bytes() == damaged  # the damaged file is only read
    assert report["tables"]["chunks"]["unreadable_spans"] >= 1
    assert data_dir_checks(new_dir)["ok"] is True
    again = open_quire(new_dir)
    try:
        after = base_content(again, "kb")
        assert [i[2] for i in after["items"]] == [i[2] for i in before["items"]]  # every item survived
        kept = set(after["chunks"])
        assert kept < set(before["chunks"])
        assert len(before["chunks"]) - len(kept) <= 10  # one leaf page's rows, not more
        assert after["fts_rows"] == len(kept)  # keyword rows re-derived for what survived
        parked = [i for i in after["items"] if i[5] == "failed"]
        assert len(parked) == report["items_parked"] >= 1
        lost_from = {c[0] for c in set(before["chunks"]) - kept}
        assert {(i[3], i[2]) for i in parked} == lost_from  # exactly the items that lost chunks
        hits = search_keyword(again)
        assert hits
    finally:
        again.close()
    assert report["blob_files"] == 60


def search_keyword(quire: Quire) -> list[object]:
    from knowledge.search import search

    return list(search(quire, "kb", "protein", mode="keyword"))


def test_backup_keep_and_automatic_schedule(quire: Quire, tmp_path: Path) -> None:
    from knowledge.portable.backup import AutoBackup, run_auto_backup_if_due, set_auto_backup

    synthetic_base(quire, "kb", files=2, chunks_per_file=2)
    root = tmp_path / "backups"
    for _ in range(3):
        done = quire_cli("--json", "backup", str(root), "--keep", "2", data_dir=quire.data_dir)
        assert done.returncode == 0, done.stderr
    assert len(list(root.glob("quire-backup-*"))) == 2
    assert json.loads(done.stdout)["removed"]  # the third run removed the oldest
    (root / "quire-backup-not-ours").mkdir()  # folders it did not make are never removed

    assert run_auto_backup_if_due(quire) is None  # off by default
    auto = tmp_path / "auto"
    on = quire_cli(
        "--json", "backup", str(auto), "--auto", "--every-hours", "24", "--keep", "2", data_dir=quire.data_dir
    )
    assert json.loads(on.stdout)["auto"]["keep"] == 2
    first = run_auto_backup_if_due(quire, now=1_000_000.0)
    assert first is not None and Path(first.path).is_dir()
    assert run_auto_backup_if_due(quire, now=1_000_000.0 + 3600) is None  # not due for 24 h
    assert run_auto_backup_if_due(quire, now=1_000_000.0 + 25 * 3600) is not None
    assert run_auto_backup_if_due(quire, now=1_000_000.0 + 50 * 3600) is not None
    assert len(list(auto.glob("quire-backup-*"))) == 2
    set_auto_backup(quire, None)
    assert run_auto_backup_if_due(quire, now=1_000_000.0 + 99 * 3600) is None
    assert (root / "quire-backup-not-ours").is_dir()
    with pytest.raises(Exception, match="inside the data directory"):
        set_auto_backup(quire, AutoBackup(str(quire.data_dir / "b"), 1, 1))
