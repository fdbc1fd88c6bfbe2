"""Each base's vector file (``knowledge.library.vector_file``): it matches the rows after adds, deletes and
reindexing; a stale, truncated, foreign or other-history file is detected and rebuilt; links are never
followed; a writer SIGKILLed mid-write leaves a state that search answers correctly.

No model is needed: vectors are written directly through ``knowledge.library.index``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.library import index, vector_file, vector_format
from knowledge.library.bases import Base, get_base
from knowledge.library.vector_file import VectorFiles
from knowledge.library.vector_format import BaseKey, Header, Mapped
from knowledge.runtime import Quire
from knowledge.search import query as search
from knowledge.store.database import open_raw_connection
from tests.conftest import python_proc, wait_until
from tests.knowledge.helpers import make_base
from tests.knowledge.test_vector_index import clustered, fill, near

DIM = 384


def key_of(base: Base) -> BaseKey:
    return BaseKey(base.id, base.created_at, base.dimension)


def live_rows(quire: Quire, base_id: int) -> dict[int, bytes]:
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT id, vector_f16 FROM chunks WHERE base_id = :b"), {"b": base_id}).all()
    return {int(r[0]): bytes(r[1]) for r in rows}


def assert_matches_rows(quire: Quire, base: Base, mapped: Mapped | None, *, exact: bool = False) -> None:
    """Every live chunk is in the file with its row's vector and sign bits (``exact``: and nothing else)."""
    assert mapped is not None
    held = {int(cid): n for n, cid in enumerate(mapped.ids)}
    rows = live_rows(quire, base.id)
    assert set(rows) <= set(held)
    if exact:
        assert set(held) == set(rows)
    for cid, blob in rows.items():
        assert np.array_equal(mapped.floats[held[cid]], np.frombuffer(blob, dtype=np.float16).astype(np.float32))
    assert np.array_equal(mapped.bits, vector_format.sign_bits(mapped.floats))
    every = np.arange(len(mapped.ids))  # the rows search rescores, read with pread: one run, and scattered
    assert np.array_equal(mapped.rows.read(every), mapped.floats)
    assert np.array_equal(mapped.rows.read(every[1::3]), mapped.floats[1::3])
    assert list(mapped.ids) == sorted(held)  # ascending ids: appends follow the rows' order


def searched_ids(quire: Quire, base: Base, queries: np.ndarray, depth: int = 10) -> list[list[int]]:
    base = get_base(quire.db, base.name)
    out = []
    with quire.db.read() as conn:
        for q in queries:
            out.append([c.id for c, _s in search.vector_candidates(conn, base, q, depth, None, index=quire.vectors)])
    return out


def brute_force(quire: Quire, base: Base, query: np.ndarray, depth: int = 10) -> list[int]:
    rows = live_rows(quire, base.id)
    ids = sorted(rows)
    halves = np.stack([np.frombuffer(rows[i], dtype=np.float16) for i in ids]).astype(np.float32)
    scores = halves @ query
    order = np.lexsort((np.asarray(ids), -scores))[:depth]
    return [ids[i] for i in order]


def assert_consistent_after_restart(quire: Quire, base_name: str) -> None:
    """After a crash and restart: the database is intact, every vector search result joins a live chunk,
    every live chunk is found by its own vector, and the base's file holds every live chunk's vector."""
    conn = open_raw_connection(quire.db.path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    base = get_base(quire.db, base_name)
    rows = live_rows(quire, base.id)
    assert rows, "no live chunks to look for"
    ids = sorted(rows)
    queries = np.stack([np.frombuffer(rows[cid], dtype=np.float16).astype(np.float32) for cid in ids])
    for cid, found in zip(ids, searched_ids(quire, base, queries), strict=True):
        assert set(found) <= set(rows)
        assert cid in found, f"live chunk {cid} is not found by its own vector"
    assert_matches_rows(quire, base, VectorFiles(quire.db).peek(key_of(base)))


def test_the_writer_keeps_the_file_in_step_with_adds_deletes_and_reindex(quire: Quire) -> None:
    base = make_base(quire)
    files = VectorFiles(quire.db)
    vectors = clustered(np.random.default_rng(1), 400)
    items = fill(quire, base.id, vectors)
    with quire.db.read() as conn:
        version = index.vectors_version(conn, base.id)
    mapped = files.peek(key_of(base))
    assert mapped is not None and mapped.version == version  # appended after the commit, before any search
    assert_matches_rows(quire, base, mapped, exact=True)
    path = files.path(base.id)
    assert path.is_file() and not path.is_symlink() and path.parent.parent == quire.data_dir

    with quire.db.write() as conn:  # a reindex: the item's chunks replaced by new ones (new ids)
        index.write_item_material(conn, base.id, items[0], [index.ChunkRow(0, "re", 0, 2, None, None, None, 1, "r")],
                                  vectors[:1])  # fmt: skip
    assert_matches_rows(quire, base, files.peek(key_of(base)))
    with quire.db.write() as conn:  # a few deletes: dead records stay (the join hides them)
        index.clear_items_material(conn, base.id, items[1:5])
    mapped = files.peek(key_of(base))
    assert mapped is not None and mapped.header.count > len(live_rows(quire, base.id))
    assert_matches_rows(quire, base, mapped)
    with quire.db.write() as conn:  # more than a quarter deleted: rebuilt to the live rows only
        index.clear_items_material(conn, base.id, items[5:40])
    assert_matches_rows(quire, base, files.peek(key_of(base)), exact=True)
    # a reader of the file renamed over keeps reading the old file's rows, as its mapping does
    assert np.array_equal(mapped.rows.read(np.arange(len(mapped.ids))), mapped.floats)

    queries = near(np.random.default_rng(2), vectors, 20)
    live = set(live_rows(quire, base.id))
    for q, found in zip(queries, searched_ids(quire, base, queries), strict=True):
        assert set(found) <= live
        assert found == brute_force(quire, base, q)


def test_a_commit_whose_append_never_ran_is_caught_up_by_search(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between the database commit and the file append: the next search syncs the file itself."""
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(3), 300)
    items = fill(quire, base.id, vectors[:200])
    before = VectorFiles(quire.db).peek(key_of(base))
    assert before is not None
    monkeypatch.setattr(vector_file.SyncAfterCommit, "__call__", lambda self, db: None)
    fill(quire, base.id, vectors[200:], start=200)
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, items[:3])
    stale = VectorFiles(quire.db).peek(key_of(base))
    assert stale is not None and stale.header.count == before.header.count  # behind the rows
    queries = near(np.random.default_rng(4), vectors[200:], 10)
    live = set(live_rows(quire, base.id))
    for q, found in zip(queries, searched_ids(quire, base, queries), strict=True):
        assert set(found) <= live and found == brute_force(quire, base, q)
    assert_matches_rows(quire, base, VectorFiles(quire.db).peek(key_of(base)))


SEARCH_DEADLINE = 300.0  # seconds: generous on a loaded machine; a search that waits on the lock never ends
HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@pytest.mark.parametrize("file_state", ["behind its rows", "missing"])
def test_a_search_answers_exactly_while_another_process_holds_the_files_lock(
    quire: Quire, monkeypatch: pytest.MonkeyPatch, file_state: str
) -> None:
    """Another process holds the file's lock and never lets go (stopped mid-append, say): a search waits a
    bounded time, then answers from the file as it is plus its snapshot's rows — exactly the rows' answer."""
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(5), 300)
    items = fill(quire, base.id, vectors[:200])
    files = VectorFiles(quire.db)
    monkeypatch.setattr(vector_file.SyncAfterCommit, "__call__", lambda self, db: None)  # the appends never run
    fill(quire, base.id, vectors[200:], start=200)
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, items[:3])
    if file_state == "missing":
        files.path(base.id).unlink()
    before = files.map_unlocked(key_of(base))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(files.path(base.id).with_name(f"base-{base.id}.lock"))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        queries = near(np.random.default_rng(6), vectors[150:], 10)
        pool = ThreadPoolExecutor(max_workers=1)  # a search waiting on the lock would never return: time out
        try:
            found = pool.submit(searched_ids, quire, base, queries).result(timeout=SEARCH_DEADLINE)
        finally:
            pool.shutdown(wait=False)  # a stuck search ends once the holder below lets go
        live = set(live_rows(quire, base.id))
        for q, ids in zip(queries, found, strict=True):
            assert set(ids) <= live and ids == brute_force(quire, base, q)
        unheld = live - (set() if before is None else {int(i) for i in before.ids})
        assert any(set(ids) & unheld for ids in found)  # chunks only the rows hold are found too
        after = files.map_unlocked(key_of(base))  # nothing was written while the lock was held
        assert (after is None) if before is None else (after is not None and after.header == before.header)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    monkeypatch.undo()
    quire.vectors.forget(base.id)
    assert [brute_force(quire, base, q) for q in queries] == searched_ids(quire, base, queries)
    assert_matches_rows(quire, base, files.peek(key_of(base)))  # the next search, unhindered, synced it


def _damage_and_search(quire: Quire, base: Base, damage: str, other: Base) -> None:
    files = VectorFiles(quire.db)
    path = files.path(base.id)
    if damage == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    elif damage == "garbage header":
        with open(path, "r+b") as f:
            f.write(b"\xff" * 64)
    elif damage == "foreign":  # another base's file under this base's name
        shutil.copyfile(files.path(other.id), path)
    elif damage == "other history":  # right header, but the last record is not its row's vector
        mapped = files.peek(key_of(base))
        assert mapped is not None
        _ids_at, _bits_at, floats_at = mapped.header.offsets()
        with open(path, "r+b") as f:
            f.seek(floats_at + (mapped.header.count - 1) * DIM * 4)
            f.write(np.ones(DIM, dtype=np.float32).tobytes())
    elif damage == "ahead of the database":
        mapped = files.peek(key_of(base))
        assert mapped is not None
        h = mapped.header
        with open(path, "r+b") as f:
            f.write(Header(h.key, h.capacity, h.count, h.last_id, h.version + 5).pack())
    elif damage == "missing":
        path.unlink()
    else:
        raise AssertionError(damage)


@pytest.mark.parametrize(
    "damage", ["truncated", "garbage header", "foreign", "other history", "ahead of the database", "missing"]
)
def test_a_damaged_file_is_detected_and_rebuilt_from_rows(quire: Quire, damage: str) -> None:
    base = make_base(quire)
    other = make_base(quire, "other")
    vectors = clustered(np.random.default_rng(5), 300)
    fill(quire, base.id, vectors)
    fill(quire, other.id, clustered(np.random.default_rng(6), 50))
    quire.close()
    _damage_and_search(quire, base, damage, other)
    fresh = Quire.open(quire.data_dir)  # a new process's view: nothing held yet
    try:
        if damage == "ahead of the database":  # a reader cannot tell it from an append after a later
            # commit (it uses it: the join hides what its snapshot lacks); the next sync, whose snapshot
            # is taken under the lock, can
            synced = VectorFiles(fresh.db).sync(base.id)
            with fresh.db.read() as conn:
                assert synced is not None and synced.version == index.vectors_version(conn, base.id)
        queries = near(np.random.default_rng(7), vectors, 10)
        for q, found in zip(queries, searched_ids(fresh, base, queries), strict=True):
            assert found == brute_force(fresh, base, q)
        assert_matches_rows(fresh, base, VectorFiles(fresh.db).peek(key_of(base)), exact=True)
    finally:
        fresh.close()


def test_links_are_never_followed(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(8), 60)
    fill(quire, base.id, vectors)
    files = VectorFiles(quire.db)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not yours")
    path = files.path(base.id)
    path.unlink()
    path.symlink_to(outside)
    mapped = files.sync(base.id)
    assert outside.read_bytes() == b"not yours"
    assert path.is_file() and not path.is_symlink()
    assert_matches_rows(quire, base, mapped, exact=True)

    # the directory itself replaced by a link to a directory elsewhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(path.parent)
    path.parent.symlink_to(elsewhere, target_is_directory=True)
    assert_matches_rows(quire, base, files.sync(base.id), exact=True)
    assert list(elsewhere.iterdir()) == []
    assert path.parent.is_dir() and not path.parent.is_symlink()


def test_a_deleted_base_takes_its_file_with_it(quire: Quire) -> None:
    from knowledge.library import bases

    base = make_base(quire)
    fill(quire, base.id, clustered(np.random.default_rng(9), 20))
    path = VectorFiles(quire.db).path(base.id)
    assert path.exists()
    bases.delete_base(quire.db, quire.queue, base.name, quire.blobs_dir)
    assert not path.exists()


@pytest.mark.parametrize("round_", range(3))
def test_a_writer_killed_mid_write_leaves_a_state_search_answers_correctly(data_dir: Path, round_: int) -> None:
    quire = Quire.open(data_dir)
    base = make_base(quire)
    quire.close()
    proc = python_proc("-m", "tests.support.vector_writer", str(data_dir))

    def chunks() -> int:
        conn = open_raw_connection(data_dir / "quire.sqlite3")
        try:
            return int(conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0])
        finally:
            conn.close()

    try:  # a different amount of work each round, so the kill lands at different points of the write path
        wait_until(lambda: chunks() >= 300 + 211 * round_ or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    conn = open_raw_connection(data_dir / "quire.sqlite3")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    fresh = Quire.open(data_dir)
    try:
        rows = live_rows(fresh, base.id)
        queries = np.stack([np.frombuffer(rows[cid], dtype=np.float16).astype(np.float32) for cid in sorted(rows)[-5:]])
        for q, found in zip(queries, searched_ids(fresh, base, queries), strict=True):
            assert set(found) <= set(rows)  # only live chunks
            assert found == brute_force(fresh, base, q)
        assert_matches_rows(fresh, base, VectorFiles(fresh.db).peek(key_of(base)))
    finally:
        fresh.close()


def test_doctor_reports_each_file_and_rebuilds_one_that_does_not_match(quire: Quire) -> None:
    from app.cli.commands_doctor import data_dir_checks

    base = make_base(quire)
    other = make_base(quire, "other")
    fill(quire, base.id, clustered(np.random.default_rng(10), 40))
    fill(quire, other.id, clustered(np.random.default_rng(11), 40))
    with quire.db.read() as conn:
        version = index.vectors_version(conn, other.id)
    quire.close()
    path = VectorFiles(quire.db).path(other.id)
    os.truncate(path, 100)
    orphan = path.parent / "base-99.vec"  # a deleted base's file, left by a crash before its removal
    shutil.copyfile(VectorFiles(quire.db).path(base.id), orphan)
    (path.parent / "notes.txt").write_text("not ours")
    report = data_dir_checks(quire.data_dir)
    states = {e["base_id"]: e for e in report["vector_files"]}
    assert states[base.id] == {"base_id": base.id, "state": "current"}
    assert states[other.id]["state"] == "missing or invalid" and states[other.id]["synced_to_version"] == version
    assert not orphan.exists() and (path.parent / "notes.txt").read_text() == "not ours"
    again = data_dir_checks(quire.data_dir)
    assert {e["state"] for e in again["vector_files"]} == {"current"}
    fresh = Quire.open(quire.data_dir)
    try:
        assert_matches_rows(fresh, other, VectorFiles(fresh.db).peek(key_of(other)), exact=True)
    finally:
        fresh.close()


def test_many_scattered_rows_are_read_by_the_reader_threads_in_order(tmp_path: Path) -> None:
    """Past ``PARALLEL_FROM`` runs the rows are read by the reader's threads, each its share of the runs,
    into one array in the asked order; a file shorter than the rows asked for is an error, not zeros."""
    from knowledge.library.vector_rows import PARALLEL_FROM, RowReader

    rows = np.random.default_rng(7).normal(size=(6 * PARALLEL_FROM, 8)).astype(np.float32)
    path = tmp_path / "rows.bin"
    path.write_bytes(b"\0" * 100 + rows.tobytes())
    reader = RowReader(os.open(path, os.O_RDONLY), 100, 8)
    scattered = np.arange(0, len(rows), 3)  # 2 x PARALLEL_FROM runs of one row
    both = np.sort(np.concatenate([scattered, scattered[:-1] + 1]))  # runs of two
    for positions in (scattered, both, np.arange(len(rows))):
        assert np.array_equal(reader.read(positions), rows[positions])
    with pytest.raises(OSError, match="ended"):
        reader.read(np.array([len(rows)]))
    reader.close()
