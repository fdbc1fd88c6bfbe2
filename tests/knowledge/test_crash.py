"""Real `quire worker` processes killed with SIGKILL mid-index and mid-delete, then restarted: the jobs
converge, and the search material agrees with the rows — every search result a live chunk, every live chunk
findable by its vector and by keyword (tests/support/store_checks.py). The mid-index and mid-delete tests run
on both engines (a data directory, and a team store whose workers are the same `quire` processes reaching it
through QUIRE_STORE); on SQLite the derived files are checked too — the vector file and the keyword index,
brought up to the rows after every material commit, rebuilt when they do not match. Two of the kills land
while the worker is writing the keyword index (its lock held), right after the vector file's append; on a
team store the delete's kill lands while the worker holds the store's write lock.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.library import blobs
from knowledge.lifecycle import INTERRUPTED, operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc, quire_cli, wait_until
from tests.knowledge.helpers import drain, make_base, material_counts
from tests.support.engine_fixtures import ENGINES, engine_quire, on_team_store
from tests.support.files import write_tree
from tests.support.store_checks import assert_consistent_after_restart, store_write_locked

# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)

WORDS = [
    "protein",
    "cell",
    "membrane",
    "enzyme",
    "gene",
    "receptor",
    "signal",
    "pathway",
    "kinase",
    "mutation",
    "tumor",
    "immune",
    "response",
    "antibody",
    "virus",
    "bacteria",
    "neuron",
    "synapse",
    "cortex",
    "memory",
    "learning",
    "climate",
    "ocean",
    "carbon",
    "river",
    "glacier",
    "market",
    "price",
    "demand",
    "supply",
    "credit",
    "bank",
    "policy",
    "law",
    "court",
    "contract",
    "theory",
    "model",
    "proof",
    "lemma",
    "graph",
]


def prose(rng: random.Random, words: int) -> str:
    sentences = []
    while words > 0:
        n = min(words, rng.randint(8, 16))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
        words -= n
    return " ".join(sentences)


def start_worker(data_dir: Path) -> subprocess.Popen[str]:
    return python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker")


def status_counts(quire: Quire) -> dict[str, int]:
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT status, count(*) FROM items GROUP BY status")).all()
    return {r[0]: r[1] for r in rows}


def failure_reasons(quire: Quire) -> dict[str, int]:
    """How many items failed for each stored reason (what an assertion on the counts shows when it fails)."""
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT error_code, error_message, count(*) FROM items WHERE status = 'failed' GROUP BY 1, 2")
        ).all()
    return {f"{r[0]}: {r[1]}": r[2] for r in rows}


def writing_keywords(data_dir: Path, base_id: int) -> bool:
    """Whether a process holds the base's keyword index lock exclusively: it is writing the index."""
    try:
        fd = os.open(data_dir / "keywords" / f"base-{base_id}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the shared lock if it was taken


def writing_material(quire: Quire, base_id: int) -> bool:
    """Whether the worker is in the middle of writing search material: on SQLite it holds the base's keyword
    index lock, on a team store the store's write lock."""
    return store_write_locked(quire) if on_team_store(quire) else writing_keywords(quire.data_dir, base_id)


def kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_sigkill_mid_index_documents_retries_the_batch_and_converges(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    rng = random.Random(7)
    base = make_base(quire)
    write_tree(tmp_path / "docs", {f"doc{n:02}.txt": prose(rng, 500) for n in range(40)})
    operations.add_items(quire, "kb", [PathInput(tmp_path / "docs")])

    worker = start_worker(data_dir)
    try:
        wait_until(lambda: status_counts(quire).get("embedding", 0) > 0, timeout=120, interval=0.005)
    finally:
        kill(worker)

    restart = quire_cli("worker", "--until-idle", "--json", data_dir=data_dir, timeout=900)
    assert restart.returncode == 0, restart.stderr

    counts = status_counts(quire)
    assert not {"idle", "preparing", "processing", "reading", "embedding"} & set(counts)
    # the interrupted batch went back to the queue at once (issue 10) instead of being parked
    assert not [i for i in operations.list_items(quire, "kb", flat=True) if i.error_code == INTERRUPTED]
    leaves = [i for i in operations.list_items(quire, "kb", flat=True) if i.type == "file"]
    assert len(leaves) == 40 and {i.status for i in leaves} == {"completed"}
    assert operations.get_item(quire, "kb", leaves[0].root_id or 0).status == "completed"
    m = material_counts(quire, base.id)
    assert m["chunks"] == m["vectors"] == m["keywords"] == m["chunk_count_sum"] > 40
    with quire.db.read() as conn:
        dupes = conn.execute(
            text("SELECT count(*) FROM (SELECT item_id, ordinal FROM chunks GROUP BY 1, 2 HAVING count(*) > 1)")
        ).scalar_one()
    assert dupes == 0
    assert_consistent_after_restart(quire, "kb")


def test_sigkill_while_the_keyword_index_is_written_mid_ingest_converges(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    """Short notes in several batches: the worker is killed while it syncs a batch's keywords (the vector
    file appended just before), with the next batch being encoded."""
    rng = random.Random(5)
    base = make_base(quire)
    write_tree(tmp_path / "notes", {f"n{n:03}.txt": f"marker{n} {prose(rng, 30)}" for n in range(200)})
    operations.add_items(quire, "kb", [PathInput(tmp_path / "notes")])
    worker = start_worker(data_dir)
    try:
        wait_until(lambda: writing_keywords(data_dir, base.id), timeout=300, interval=0.001)
    finally:
        kill(worker)
    restart = quire_cli("worker", "--until-idle", "--json", data_dir=data_dir, timeout=900)
    assert restart.returncode == 0, restart.stderr
    assert status_counts(quire) == {"completed": 201}
    found = search(quire, "kb", "marker17 marker145", mode="keyword", limit=10)
    assert {h.item_name for h in found} == {"n017.txt", "n145.txt"}
    assert_consistent_after_restart(quire, "kb")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_sigkill_mid_delete_subtree_finishes_after_restart_and_never_shows_the_subtree(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    rng = random.Random(11)
    base = make_base(quire)
    files = {f"d{n // 400}/note{n:04}.txt": f"zebrafish{n} {prose(rng, 10)}" for n in range(2000)}
    write_tree(tmp_path / "big", files)
    write_tree(tmp_path / "keep", {"kept.txt": "zebrafish kept outside the deleted folder"})
    added = operations.add_items(quire, "kb", [PathInput(tmp_path / "big"), PathInput(tmp_path / "keep")])
    drain(quire, timeout=600)
    big_root = added.created[0]
    assert status_counts(quire) == {"completed": 2000 + 5 + 1 + 2}, failure_reasons(quire)
    with quire.db.read() as conn:
        shas = blobs.shas_of_items(
            conn, [i.id for i in operations.list_items(quire, "kb", flat=True) if i.root_id == big_root]
        )

    def visible_hits() -> set[str]:
        found: set[str] = set()
        for mode in ("keyword", "vector", "hybrid"):
            found |= {h.item_name for h in search(quire, "kb", "zebrafish", mode=mode, limit=50)}
        return found

    # By keyword, "zebrafish" only ever matches kept.txt (the notes hold "zebrafish17", one token), so
    # visible_hits() alone cannot see a deleted note through the keyword index: ask for the notes' tokens.
    def deleted_by_keyword() -> set[str]:
        return {h.item_name for h in search(quire, "kb", "zebrafish17 zebrafish1234", mode="keyword", limit=50)}

    assert deleted_by_keyword() == {"note0017.txt", "note1234.txt"}  # findable before the delete
    assert visible_hits() - {"kept.txt"}  # and by vector, before the delete

    operations.delete_items(quire, "kb", [big_root])
    assert visible_hits() == {"kept.txt"}
    assert deleted_by_keyword() == set()

    worker = start_worker(data_dir)
    try:  # mid-job, while the worker deletes the cleared chunks from the keyword index
        wait_until(
            lambda: 0 < sum(status_counts(quire).values()) <= 2000 - 400 and writing_material(quire, base.id),
            timeout=120,
            interval=0.001,
        )
        os.kill(worker.pid, signal.SIGSTOP)  # freeze it mid-job, then check, then kill
        mid = status_counts(quire)
    finally:
        kill(worker)
    assert set(mid) == {"deleting", "completed"} and mid["completed"] == 2
    assert visible_hits() == {"kept.txt"}
    assert deleted_by_keyword() == set()

    restart = quire_cli("worker", "--until-idle", "--json", data_dir=data_dir, timeout=900)
    assert restart.returncode == 0, restart.stderr
    assert status_counts(quire) == {"completed": 2}
    assert visible_hits() == {"kept.txt"}
    assert deleted_by_keyword() == set()
    m = material_counts(quire, base.id)
    assert m["chunks"] == m["vectors"] == m["keywords"] == 1
    assert not any(blobs.blob_path(quire.blobs_dir, s).exists() for s in shas)
    with quire.db.read() as conn:  # nor their rows (on a team store the bytes too)
        for table in ("blobs", "blob_contents"):
            left = conn.execute(text(f"SELECT sha256 FROM {table}")).scalars().all()
            assert not set(left) & set(shas), table
    jobs = [j for j in quire.queue.list() if j.type == operations.DELETE_SUBTREE]
    assert [j.status for j in jobs] == ["completed"] and jobs[0].attempt == 2
    assert_consistent_after_restart(quire, "kb")
