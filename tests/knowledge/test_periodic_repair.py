"""A running worker heals what a crashed process stranded, without a restart (issue 10, item 6).

A real process creates active rows — leaves whose index jobs it holds ``running`` (as a worker that
claimed them) and leaves it committed but never scheduled — and SIGKILLs itself. A worker that was
already running before the crash parks every one of them (more than one page and more than the old
1,000-row cap), however young they are, through its periodic repair pass.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import insert, text

from knowledge.lifecycle import INTERRUPTED
from knowledge.lifecycle.recovery import ORPHAN_GRACE_SETTING
from knowledge.runtime import REPAIR_INTERVAL_SETTING, Quire
from knowledge.store.schema import settings
from tests.conftest import REPO, wait_until
from tests.knowledge.helpers import make_base

CRASHING_PROCESS = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from sqlalchemy import update
    from jobs.schema import jobs
    from knowledge.compose import open_quire
    from knowledge.library.tree import NewItem, create_item
    from knowledge.lifecycle.operations import INDEX_DOCUMENTS
    from knowledge.store.schema import items

    quire = open_quire(Path(sys.argv[1]), hosts_worker=True)
    base_id = int(sys.argv[2])
    with quire.db.write() as conn:
        root = create_item(conn, NewItem(base_id, "directory", "root", "processing", source_path="/r"))
        def leaf(n):
            return create_item(conn, NewItem(base_id, "file", f"f{n}.txt", "processing", parent_id=root,
                                             root_id=root, relative_path=f"f{n}.txt", source_path=f"/r/f{n}.txt"))
        for j in range(3):  # three index jobs of 400 leaves, claimed by this process
            ids = [leaf(j * 400 + k) for k in range(400)]
            job = quire.queue.enqueue(conn, INDEX_DOCUMENTS, {"base_id": base_id, "item_ids": ids}, base_id=base_id)
            conn.execute(update(items).where(items.c.id.in_(ids)).values(job_id=job.job_id))
            conn.execute(update(jobs).where(jobs.c.id == job.job_id).values(
                status="running", attempt=1, lease_owner=quire.queue.session.id, lease_expires_at=9e18))
        for k in range(300):  # committed, never scheduled: the crash came first
            leaf(1200 + k)
    print("stranded", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _active_leaves(quire: Quire) -> int:
    with quire.db.read() as conn:
        return int(
            conn.execute(text("SELECT count(*) FROM items WHERE type = 'file' AND status = 'processing'")).scalar_one()
        )


def _live_jobs(quire: Quire) -> int:
    """Jobs not yet ended: a re-enqueued job's items turn terminal just before the job itself is closed."""
    with quire.db.read() as conn:
        return int(
            conn.execute(text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")).scalar_one()
        )


def _parked(quire: Quire) -> int:
    with quire.db.read() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM items WHERE status = 'failed' AND error_code = :c"), {"c": INTERRUPTED}
            ).scalar_one()
        )


def test_a_running_worker_parks_rows_a_crashed_process_stranded(quire: Quire, data_dir: Path) -> None:
    base = make_base(quire)
    with quire.db.write() as conn:
        conn.execute(insert(settings).values(key=REPAIR_INTERVAL_SETTING, value="0.3"))
        conn.execute(insert(settings).values(key=ORPHAN_GRACE_SETTING, value="1"))
    worker = quire.make_worker(poll_interval=0.05)
    assert worker.repair_interval == 0.3
    worker.start()
    try:
        crashed = subprocess.run(
            [sys.executable, "-c", CRASHING_PROCESS, str(data_dir), str(base.id)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert crashed.returncode == -9 and "stranded" in crashed.stdout, crashed.stderr
        repairs_before = worker.repairs
        # the 300 rows that never got a job are parked; the 1,200 of the three interrupted index jobs go
        # back to the queue (poison isolation re-enqueues an interrupted batch) and end terminal there
        wait_until(lambda: _parked(quire) == 300 and _active_leaves(quire) == 0 and not _live_jobs(quire), timeout=120)
        assert worker.repairs > repairs_before  # healed by the running worker's periodic pass
        with quire.db.read() as conn:
            statuses = dict(conn.execute(text("SELECT status, count(*) FROM jobs GROUP BY status")).all())
            root = conn.execute(text("SELECT status FROM items WHERE name = 'root'")).scalar_one()
            requeued = conn.execute(
                text("SELECT count(*) FROM items WHERE type = 'file' AND status = 'failed' AND error_code = :c"),
                {"c": "unreadable"},
            ).scalar_one()
        assert statuses["cancelled"] == 3 and not {"pending", "running"} & set(statuses)
        assert requeued == 1200  # read again, and their files do not exist
        assert root == "failed"
        assert all(t.is_alive() for t in worker._threads)
    finally:
        worker.stop()


def test_the_repair_interval_setting_is_honoured_and_a_bad_value_falls_back(quire: Quire) -> None:
    """The documented default (20 s) when unset; the setting when valid; the default — never a worker that
    cannot start — when the stored value is not a positive number of seconds."""
    from jobs.runtime import DEFAULT_REPAIR_INTERVAL

    assert DEFAULT_REPAIR_INTERVAL == 20.0
    assert quire.make_worker().repair_interval == DEFAULT_REPAIR_INTERVAL
    for stored, expected in (("7.5", 7.5), ("soon", DEFAULT_REPAIR_INTERVAL), ("0", DEFAULT_REPAIR_INTERVAL)):
        with quire.db.write() as conn:
            conn.execute(settings.delete().where(settings.c.key == REPAIR_INTERVAL_SETTING))
            conn.execute(insert(settings).values(key=REPAIR_INTERVAL_SETTING, value=stored))
        assert quire.make_worker().repair_interval == expected, stored
