"""Issue 45 item 1: huey's messages were pickles, so whoever could write the queue ran code in every worker.
Now nothing is unpickled: a pickle written straight into the SQLite ``task`` table ahead of real wake-ups is
dropped by a real ``quire worker --until-idle`` (one warning each, the payload not echoed), its marker file
never appears, and the queued real jobs complete. The Redis list is covered in
``tests/engines/test_redis_queue_messages.py``."""

from __future__ import annotations

import json
from pathlib import Path

import apsw

from knowledge.store.database import DB_FILENAME
from tests.conftest import quire_cli
from tests.support.files import write_tree
from tests.support.pickles import shell_pickle, touching_pickle

DROPPED = "not a Quire wake-up"


def ok(data_dir: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = quire_cli("--json", *args, data_dir=data_dir, timeout=300)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def push_raw(db_path: Path, *messages: bytes) -> None:
    """Rows an attacker with the file (or a restored one) could add: taken before Quire's own wake-ups."""
    conn = apsw.Connection(str(db_path))
    try:
        conn.set_busy_timeout(10_000)
        for data in messages:
            conn.execute("INSERT INTO task (queue, data, priority) VALUES ('quire', ?, 9)", (data,))
    finally:
        conn.close()


def queue_rows(db_path: Path) -> list[bytes]:
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [bytes(r[0]) for r in conn.execute("SELECT data FROM task")]
    finally:
        conn.close()


def test_a_pickle_in_the_task_table_never_runs_in_a_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = write_tree(tmp_path / "notes", {"heron.md": "Herons wade in shallow water.", "owl.md": "Owls hunt."})
    touched, shelled = tmp_path / "touched-by-pickle", tmp_path / "shell-ran"
    ok(data, "base", "create", "kb", "--precision", "fp32")
    ok(data, "add", "kb", str(folder))
    assert queue_rows(data / DB_FILENAME), "the add queued no wake-up to sit behind the crafted messages"
    crafted = [touching_pickle(touched), shell_pickle(shelled), b"garbage", b'{"job": -1}']
    push_raw(data / DB_FILENAME, *crafted)

    worker = quire_cli("--json", "worker", "--until-idle", "--threads", "1", data_dir=data, timeout=300)

    assert worker.returncode == 0, worker.stderr[-3000:]
    assert not touched.exists() and not shelled.exists()
    assert worker.stderr.count(DROPPED) == len(crafted), worker.stderr[-3000:]
    assert str(touched) not in worker.stderr and "garbage" not in worker.stderr
    assert not set(crafted) & set(queue_rows(data / DB_FILENAME))  # dropped, not left for the next worker
    items = ok(data, "items", "kb")["items"]
    assert {i["name"]: i["status"] for i in items if i["name"].endswith(".md")} == {
        "heron.md": "completed",
        "owl.md": "completed",
    }
