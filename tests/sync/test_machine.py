"""A synced root carries its machine, and says it is watched only while a worker runs there."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from jobs.sessions import this_host
from knowledge import sync
from knowledge.runtime import Quire
from knowledge.store import migrations as mig
from knowledge.store.database import Database
from knowledge.sync.roots import set_watcher_state
from knowledge.sync.watcher import SyncWatcher
from tests.support.engine_fixtures import second_session
from tests.support.files import write_tree
from tests.support.migrations import migrate_before
from tests.sync.helpers import synced_folder

FILES = {"a.txt": "About otters."}


def _state(quire: Quire) -> tuple[str, str]:
    (status,) = sync.root_statuses(quire.db)
    return status.as_dict()["state"], status.line()


def test_a_root_records_the_machine_that_turned_it_on(quire: Quire, tmp_path: Path) -> None:
    _item, root = synced_folder(quire, write_tree(tmp_path / "f", FILES))
    assert root.host == this_host()
    (status,) = sync.root_statuses(quire.db)
    assert status.as_dict()["machine"] == this_host()
    assert f"machine {this_host()}" in status.line()


def test_a_root_says_watching_only_while_a_worker_runs(quire: Quire, tmp_path: Path) -> None:
    _item, root = synced_folder(quire, write_tree(tmp_path / "f", FILES))
    set_watcher_state(quire.db, [root.id], "watching", None)  # what the last worker recorded
    assert _state(quire)[0] == "off"  # … and that worker has stopped: nobody watches the folder
    other = second_session(quire)  # another process of this machine…
    try:
        worker = other.make_worker()
        worker.register()  # … runs a worker now
        state, line = _state(quire)
        assert state == "watching" and "watcher watching" in line
        worker.end_session()
        assert _state(quire)[0] == "off"
    finally:
        other.close()


def test_the_watcher_of_a_data_directory_keeps_its_roots_whatever_the_machine_is_called(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _item, root = synced_folder(quire, write_tree(tmp_path / "f", FILES))
    monkeypatch.setenv("QUIRE_HOST", "renamed-laptop")  # the same disk, a new name: still this machine's folder
    assert [r.id for r in SyncWatcher(quire)._roots()] == [root.id]
    (tmp_path / "f" / "b.txt").write_text("About herons.")
    out = sync.reconcile(quire, root.id, quire.db.write)  # type: ignore[arg-type]
    assert not out.stood_down and [c["kind"] for c in out.changes] == ["added"]


def test_roots_made_before_carry_no_machine_and_stay_local(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    migrate_before(db, "0029_sync_root_host")
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'm', 3, 'fp32', 256, 32, 0, 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO items (id, base_id, type, name, status, source_path, created_at, updated_at)"
            " VALUES (1, 1, 'directory', 'f', 'completed', '/f', 0, 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO sync_roots (item_id, base_id, mode, created_at, updated_at) VALUES (1, 1, 'auto', 0, 0)"
        )
    assert "0029_sync_root_host" in mig.migrate(db)
    with db.read() as conn:
        assert conn.execute(text("SELECT host FROM sync_roots")).scalar_one() is None
    (root,) = sync.list_roots(db)
    assert root.host is None and sync.kept_here(db, root)


def test_the_watcher_waits_out_a_lost_store_logging_it_once(
    quire: Quire, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from sqlalchemy import exc as sa_exc

    watcher = SyncWatcher(quire)
    calls: list[int] = []

    def plan_while_the_store_is_away() -> dict[int, Path]:
        calls.append(1)
        if len(calls) <= 4:  # what a restarting PostgreSQL looks like to the driver
            closed = Exception("server closed the connection")
            raise sa_exc.OperationalError("SELECT 1", {}, closed, connection_invalidated=True)
        watcher._stop.set()
        return {}

    monkeypatch.setattr(watcher, "_plan", plan_while_the_store_is_away)
    monkeypatch.setattr("knowledge.sync.watcher.REFRESH_SECONDS", 0.0)
    with caplog.at_level("WARNING"):
        watcher._run()
    assert len(calls) == 5
    lost = [r for r in caplog.records if "lost the store" in r.getMessage()]
    assert len(lost) == 1 and not [r for r in caplog.records if "sync watcher loop failed" in r.getMessage()]
