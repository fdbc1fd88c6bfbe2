"""The watcher in a real `quire worker` process, the quiet period, and the fall back to polling."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import sync
from knowledge.runtime import Quire
from tests.conftest import python_proc, wait_until
from tests.support.files import write_tree
from tests.sync.helpers import keyword_hits, live_paths, reconcile_now, synced_folder

FILES = {"keep.txt": "A file that stays, about ibexine.", "docs/inner.txt": "Inner file about gerenukite."}


def _root_state(quire: Quire, root_id: int) -> tuple[str, str | None]:
    with quire.db.read() as conn:
        row = conn.execute(
            text("SELECT watcher_state, watcher_reason FROM sync_roots WHERE id = :r"), {"r": root_id}
        ).one()
    return row[0], row[1]


def _chunk_ids(quire: Quire, rel: str) -> list[int]:
    with quire.db.read() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id"
                    " WHERE i.relative_path = :p AND i.status != 'deleting' ORDER BY c.id"
                ),
                {"p": rel},
            ).scalars()
        )


def _sha_of_item(quire: Quire, rel: str) -> str | None:
    with quire.db.read() as conn:
        return conn.execute(
            text("SELECT content_sha256 FROM items WHERE relative_path = :p AND status = 'completed'"), {"p": rel}
        ).scalar()


def test_worker_process_watcher_keeps_a_folder_in_sync(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    worker = python_proc("-m", "app.cli", "--data-dir", str(quire.data_dir), "worker", "--nice", "0")
    try:
        wait_until(lambda: _root_state(quire, root.id)[0] == "watching", timeout=120)
        # add
        (folder / "added.txt").write_text("A new file about okapibird.")
        wait_until(lambda: keyword_hits(quire, "okapibird") == ["added.txt"], timeout=120)
        # edit in place
        with open(folder / "keep.txt", "r+") as fh:
            fh.seek(0)
            fh.write("A file edited in place, about markhorite now.")
            fh.truncate()
        wait_until(lambda: keyword_hits(quire, "markhorite") == ["keep.txt"], timeout=120)
        assert keyword_hits(quire, "ibexine") == []
        # append while being written: half-written states may be seen and re-read, the end state wins
        done = threading.Event()

        def writer() -> None:
            with open(folder / "growing.txt", "a") as fh:
                for n in range(15):
                    fh.write(f"line {n} of a growing file about saigaform.\n")
                    fh.flush()
                    time.sleep(0.1)  # the writer's own pace (it is the thing under test), not a synchronisation
                fh.write("the last line names chirulite.\n")
            done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        thread.join()
        final_sha = hashlib.sha256((folder / "growing.txt").read_bytes()).hexdigest()
        wait_until(lambda: _sha_of_item(quire, "growing.txt") == final_sha, timeout=120)
        assert keyword_hits(quire, "chirulite") == ["growing.txt"]
        # move (with a folder rename): the row moves and keeps its chunks
        before = _chunk_ids(quire, "docs/inner.txt")
        (folder / "docs").rename(folder / "papers")
        wait_until(lambda: "papers/inner.txt" in live_paths(quire), timeout=120)
        assert _chunk_ids(quire, "papers/inner.txt") == before
        wait_until(lambda: "docs" not in live_paths(quire), timeout=120)
        # delete
        (folder / "added.txt").unlink()
        wait_until(lambda: keyword_hits(quire, "okapibird") == [], timeout=120)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)


def test_a_file_still_changing_is_unstable_then_read_after_the_quiet_period(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    from importlib import import_module

    scan = import_module("knowledge.sync.scan")
    real_sleep = time.sleep
    growing = folder / "growing.txt"
    growing.write_text("first half about serowish")

    def sleep_while_the_writer_appends(seconds: float) -> None:
        real_sleep(seconds)
        with open(growing, "a") as fh:  # the writer is not done: the size moves within the quiet period
            fh.write(" and the second half")

    monkeypatch.setattr(scan.time, "sleep", sleep_while_the_writer_appends)
    out = reconcile_now(quire, root.id)
    assert [c["kind"] for c in out.changes] == ["unstable"]
    assert "growing.txt" not in live_paths(quire)  # never applied half-written
    with quire.db.read() as conn:
        revisit = conn.execute(
            text("SELECT available_at FROM jobs WHERE idempotency_key = :k AND status = 'pending'"),
            {"k": f"sync:{root.id}:revisit"},
        ).scalar()
    assert revisit is not None and revisit > time.time() - 1  # revisited after the quiet period
    monkeypatch.setattr(scan.time, "sleep", real_sleep)
    wait_until(lambda: time.time() - os.stat(growing).st_mtime > 0.5)
    again = reconcile_now(quire, root.id)
    assert [c["kind"] for c in again.changes] == ["added"]


def test_polling_when_the_watcher_cannot_start_and_on_network_mounts(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mountinfo = (
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 0:40 / /mnt/share rw,relatime - nfs4 server:/export rw\n"
        "41 22 0:41 / /mnt/fuse rw - fuse.sshfs host: rw\n"
    )
    assert sync.polling_reason(Path("/home/x"), mountinfo) is None
    assert "nfs4" in (sync.polling_reason(Path("/mnt/share/docs"), mountinfo) or "")
    assert "fuse.sshfs" in (sync.polling_reason(Path("/mnt/fuse/a"), mountinfo) or "")

    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    import watchfiles

    def watch_limit(*_a: object, **_k: object) -> object:
        raise OSError("OS file watch limit reached")

    monkeypatch.setattr(watchfiles, "watch", watch_limit)
    sync.set_setting(quire.db, sync.POLL_SECONDS, 0.3)
    watcher = sync.SyncWatcher(quire)
    worker = quire.make_worker(poll_interval=0.05)
    worker.start()
    watcher.start()
    try:
        wait_until(lambda: _root_state(quire, root.id)[0] == "polling", timeout=60)
        assert "watch limit" in (_root_state(quire, root.id)[1] or "")
        (folder / "polled.txt").write_text("Found by polling: a file about takinish.")
        wait_until(lambda: keyword_hits(quire, "takinish") == ["polled.txt"], timeout=120)
        # every 0.3 s poll may start a reconcile, so the root is "reconciling" at moments; it rests in polling
        status = wait_until(lambda: _resting(sync.list_roots(quire.db)[0]), timeout=60)
        assert isinstance(status, sync.SyncRoot) and "polling" in sync.describe(status)
    finally:
        watcher.stop()
        worker.stop()


def _resting(status: sync.SyncRoot) -> sync.SyncRoot | None:
    return status if status.state == "polling" else None


def _dirty(quire: Quire, root_id: int) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text("SELECT dirty_seq FROM sync_roots WHERE id = :r"), {"r": root_id}).scalar_one())


def test_reading_files_never_triggers_a_reconcile(quire: Quire, tmp_path: Path) -> None:
    """Reads under root A, then a write under root B, in one watch: the watcher's events come in order, so
    once B's write was seen, any event the reads made would have been seen too — A must not have moved."""
    from knowledge.lifecycle import PathInput, add_items

    folder_a = write_tree(tmp_path / "a", FILES)
    _item, root_a = synced_folder(quire, folder_a)
    folder_b = write_tree(tmp_path / "b", {"x.txt": "bee"})
    item_b = add_items(quire, "kb", [PathInput(folder_b)]).created[0]
    root_b = sync.enable_sync(quire, "kb", item_b)
    watcher = sync.SyncWatcher(quire)
    watcher.start()
    try:
        # the watch is up when both roots had their catch-up reconcile requested
        wait_until(lambda: _dirty(quire, root_a.id) >= 1 and _dirty(quire, root_b.id) >= 1, timeout=60)
        base_a, base_b = _dirty(quire, root_a.id), _dirty(quire, root_b.id)
        for _ in range(20):
            for path in folder_a.rglob("*.txt"):
                path.read_bytes()
            os.listdir(folder_a)
        (folder_b / "y.txt").write_text("a real change")
        wait_until(lambda: _dirty(quire, root_b.id) > base_b, timeout=60)
        assert _dirty(quire, root_a.id) == base_a
    finally:
        watcher.stop()
