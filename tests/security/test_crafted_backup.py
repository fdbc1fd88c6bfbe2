"""Crafted backups and tampered stores: a real backup (or data directory) edited as an attacker would must
never make restore, salvage, delete, an agent's read or doctor reach outside the data directory.

Each test puts a sentinel folder beside the data directory (``tests/support/outside.py``) and checks that
nothing in it was created, changed or deleted, and that none of its bytes were copied in.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import apsw
import pytest

from app.cli.commands_doctor import data_dir_checks
from knowledge.agents.reads import read_item_text
from knowledge.compose import open_quire
from knowledge.library import blobs
from knowledge.runtime import Quire
from knowledge.store.database import DB_FILENAME
from tests.conftest import quire_cli
from tests.portable.helpers import synthetic_base
from tests.support.outside import SECRET, Outside, files_holding

EXIT_REFUSED = 5
TRAVERSAL = "ab/../../../outside/sentinel.txt"  # from <data dir>/blobs: the sentinel beside the data directory


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    return Outside(tmp_path / "outside")


def made_backup(quire: Quire, tmp_path: Path) -> Path:
    synthetic_base(quire, "kb", files=4, chunks_per_file=2)
    done = quire_cli("--json", "backup", str(tmp_path / "backups"), data_dir=quire.data_dir)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["path"])


def listed_shas(db_path: Path) -> list[str]:
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [str(r[0]) for r in conn.execute("SELECT sha256 FROM blobs ORDER BY sha256")]
    finally:
        conn.close()


def rename_blob_rows(db_path: Path, old: str, new: str, *, items: bool = True) -> None:
    """Point a blob row (and, with ``items``, the items using it) at ``new`` (the database the attacker hands
    over)."""
    conn = apsw.Connection(str(db_path))
    try:
        if items:
            conn.execute("UPDATE items SET blob_sha256 = ? WHERE blob_sha256 = ?", (new, old))
            conn.execute("UPDATE items SET text_sha256 = ? WHERE text_sha256 = ?", (new, old))
        conn.execute("UPDATE blobs SET sha256 = ? WHERE sha256 = ?", (new, old))
    finally:
        conn.close()


def test_restore_never_writes_through_a_crafted_name(quire: Quire, tmp_path: Path, outside: Outside) -> None:
    """The O_TRUNC attack: a blob row named like a path would have overwritten the sentinel. Items naming such
    a copy refuse the whole backup, as they refuse an import; a stray blob row alone is skipped and named."""
    backup = made_backup(quire, tmp_path)
    first = listed_shas(backup / DB_FILENAME)[0]
    pristine = tmp_path / "pristine.db"
    shutil.copyfile(backup / DB_FILENAME, pristine)
    rename_blob_rows(backup / DB_FILENAME, first, TRAVERSAL)
    refused = quire_cli("--json", "restore", str(backup), data_dir=tmp_path / "refused")
    assert refused.returncode == EXIT_REFUSED, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "invalid_blob_name"
    assert not (tmp_path / "refused" / DB_FILENAME).exists()
    shutil.copyfile(pristine, backup / DB_FILENAME)
    rename_blob_rows(backup / DB_FILENAME, first, TRAVERSAL, items=False)
    # the bytes such a name reads from the backup (backups/outside/sentinel.txt), ready to be written over ours
    (backup / "blobs" / "ab").mkdir(exist_ok=True)
    (backup.parent / "outside").mkdir()
    (backup.parent / "outside" / "sentinel.txt").write_bytes(b"attacker bytes")
    target = tmp_path / "restored"
    done = quire_cli("--json", "restore", str(backup), data_dir=target)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["blobs_invalid"] == [repr(TRAVERSAL)]
    assert report["blobs"] == 3
    outside.assert_untouched()
    assert files_holding(target, b"attacker bytes") == [] and files_holding(target, SECRET) == []
    checked = quire_cli("--json", "restore", str(backup), "--check-only", data_dir=tmp_path / "unused")
    assert repr(TRAVERSAL) in json.loads(checked.stdout)["blobs_invalid"]


def test_links_inside_a_backup_are_never_followed(quire: Quire, tmp_path: Path, outside: Outside) -> None:
    backup = made_backup(quire, tmp_path)
    shas = listed_shas(backup / DB_FILENAME)
    linked_file, linked_dir = shas[0], next(s for s in shas[1:] if s[:2] != shas[0][:2])
    # a blob file replaced by a link to the sentinel
    path = blobs.blob_path(backup / "blobs", linked_file)
    path.unlink()
    path.symlink_to(outside.secret)
    # a whole prefix folder replaced by a link to an outside folder holding a file of the right name
    prefix = backup / "blobs" / linked_dir[:2]
    shutil.rmtree(prefix)
    (outside.root / "folder" / linked_dir[2:]).write_bytes(SECRET)
    prefix.symlink_to(outside.root / "folder", target_is_directory=True)
    outside.before = outside.snapshot()
    target = tmp_path / "restored"
    done = quire_cli("--json", "restore", str(backup), data_dir=target)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["blobs_refused"]) == 2 and report["blobs"] == len(shas) - 2
    assert all("link" in reason for reason in report["blobs_refused"])
    assert files_holding(target, SECRET) == []
    outside.assert_untouched()
    plain = quire_cli("restore", str(backup), data_dir=tmp_path / "plain")  # what a person reads says it too
    assert plain.returncode == 0, plain.stderr
    assert "2 owned file(s) refused, not copied:" in plain.stdout
    for sha in (linked_file, linked_dir):
        assert f"the owned copy {sha[:12]}… " in plain.stdout and "link" in plain.stdout
    assert str(outside.root) not in plain.stdout


@pytest.mark.parametrize(
    ("kind", "code"),
    [("link to /dev/zero", "not_a_backup"), ("fifo", "not_a_backup"), ("huge", "damaged"), ("link out", "damaged")],
)
def test_a_manifest_that_is_not_a_small_file_is_refused(
    quire: Quire, tmp_path: Path, outside: Outside, kind: str, code: str
) -> None:
    backup = made_backup(quire, tmp_path)
    manifest = backup / "manifest.json"
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "huge":
        manifest.write_bytes(b" " * (1024 * 1024))
    elif kind == "link out":
        manifest.symlink_to(outside.secret)
    else:
        manifest.symlink_to("/dev/zero")
    target = tmp_path / "restored"
    done = quire_cli("--json", "restore", str(backup), data_dir=target, timeout=60)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == code and "manifest" in error["message"]
    assert not target.exists() or not any(target.iterdir())
    outside.assert_untouched()


def test_a_backup_database_that_is_a_link_is_refused(quire: Quire, tmp_path: Path, outside: Outside) -> None:
    backup = made_backup(quire, tmp_path)
    (backup / DB_FILENAME).unlink()
    (backup / DB_FILENAME).symlink_to(quire.db.path)  # someone else's database, through a link
    target = tmp_path / "restored"
    done = quire_cli("--json", "restore", str(backup), data_dir=target)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert "cannot be used" in json.loads(done.stdout)["error"]["message"]
    assert not target.exists() or not any(target.iterdir())
    outside.assert_untouched()


def test_salvage_skips_crafted_names_and_links(quire: Quire, tmp_path: Path, outside: Outside) -> None:
    synthetic_base(quire, "kb", files=4, chunks_per_file=2)
    damaged = quire.data_dir
    quire.close()
    shas = listed_shas(damaged / DB_FILENAME)
    rename_blob_rows(damaged / DB_FILENAME, shas[0], TRAVERSAL)
    linked = blobs.blob_path(damaged / "blobs", shas[1])
    linked.unlink()
    linked.symlink_to(outside.secret)
    new_dir = tmp_path / "salvaged"
    done = quire_cli("--json", "salvage", "--to", str(new_dir), data_dir=damaged)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["blob_names_invalid"], report["blob_files_refused"], report["blob_files"]) == (1, 1, 2)
    assert files_holding(new_dir, SECRET) == []
    outside.assert_untouched()


def test_a_tampered_store_is_reported_and_never_reaches_outside(quire: Quire, tmp_path: Path, outside: Outside) -> None:
    """A damaged or tampered data directory: doctor names the bad names and changes nothing; an agent's read
    and the base's delete never touch the file such a name points at."""
    synthetic_base(quire, "kb", files=3, chunks_per_file=2)
    data_dir = quire.data_dir
    quire.close()
    shas = listed_shas(data_dir / DB_FILENAME)
    rename_blob_rows(data_dir / DB_FILENAME, shas[0], TRAVERSAL)
    conn = apsw.Connection(str(data_dir / DB_FILENAME))
    conn.execute("UPDATE items SET text_sha256 = ? WHERE blob_sha256 = ?", (TRAVERSAL, TRAVERSAL))
    conn.close()
    (data_dir / "blobs" / "zz-not-ours").mkdir()

    report = data_dir_checks(data_dir)
    assert report["ok"] is False, report
    found = report["invalid_blob_names"]
    assert {f["where"] for f in found} >= {"blobs table", "blobs folder"}
    assert any(f["name"] == repr(TRAVERSAL) for f in found)
    assert listed_shas(data_dir / DB_FILENAME).count(TRAVERSAL) == 1  # doctor changed nothing
    assert (data_dir / "blobs" / "zz-not-ours").is_dir()

    again = open_quire(data_dir)
    try:
        with again.db.read() as c:
            item_id = int(c.exec_driver_sql("SELECT id FROM items WHERE text_sha256 = ?", (TRAVERSAL,)).scalar_one())
        with pytest.raises(blobs.InvalidBlobName, match="not a valid owned-copy name"):
            read_item_text(again, "kb", item_id)
    finally:
        again.close()
    deleted = quire_cli("--json", "base", "delete", "kb", data_dir=data_dir)
    assert deleted.returncode == 0, deleted.stderr
    worker = quire_cli("worker", "--until-idle", data_dir=data_dir)  # after-commit unlinks, repair sweeps
    assert worker.returncode == 0, worker.stderr
    outside.assert_untouched()
