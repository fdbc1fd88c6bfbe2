"""Each base's keyword index (``knowledge.library.keyword_file``, ranked by ``knowledge.search.keyword_index``):
it holds exactly the live chunks after adds, deletes and reindexing; it ranks as FTS5 does, with FTS5's
analyzer; a stale, foreign, other-history or linked index is detected and rebuilt; a commit whose sync never
ran is caught up by the next search; a deleted chunk is never returned; a writer SIGKILLed mid-write leaves
a state search answers correctly; ``doctor`` checks and rebuilds it; a deleted base takes it along.

No model is needed: material is written directly through ``knowledge.library.index``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from app.cli.commands_doctor import data_dir_checks
from knowledge.library import index, keyword_check, keyword_file, keyword_schema
from knowledge.library.bases import Base, get_base
from knowledge.library.index import ChunkRow
from knowledge.library.keyword_file import KeywordFiles
from knowledge.library.keyword_schema import Stamp
from knowledge.library.tree import NewItem, create_item
from knowledge.library.vector_format import BaseKey
from knowledge.runtime import Quire
from knowledge.search import keyword_index
from knowledge.search.keyword import keyword_candidates
from knowledge.search.keyword_index import KeywordIndex
from knowledge.search.keyword_query import keyword_query
from knowledge.search.scope import build_scope
from knowledge.search.syntax import parse
from knowledge.store.database import open_raw_connection
from tests.conftest import python_proc, wait_until
from tests.knowledge.helpers import make_base
from tests.knowledge.test_crash import prose

TEXTS = [
    "Proteins fold into structures; misfolded proteins aggregate in neurons.",
    "The protein kinase phosphorylates its substrate in the membrane.",
    "Müllabfuhr in Zürich: die Straßenreinigung kommt dienstags.",
    "Ticket ABC-1234 tracks the silt survey of the harbour dredging project.",
    "The function parse_query splits the search input; see report_v2.pdf.",
    "Harbour sediment transport and the dredging silt budget model.",
    "Running runners ran; the runner runs daily along the river.",
    "Cells divide; cellular division of the cell requires energy.",
]
QUERIES = [
    "protein folding in neurons",
    "mullabfuhr zurich",
    "ABC-1234",
    '"silt budget" harbour',
    "parse_query report_v2.pdf",
    "run runner",
    "cell division energy -kinase",
    "harbour dredging",
]


def key_of(base: Base) -> BaseKey:
    return BaseKey(base.id, base.created_at, base.dimension)


def write(quire: Quire, base_id: int, texts: list[str], name: str = "n") -> list[int]:
    """One note item per text, one chunk each (random vectors: keyword search never reads them)."""
    rng = np.random.default_rng(len(texts))
    items = []
    with quire.db.write() as conn:
        for n, body in enumerate(texts):
            item = create_item(conn, NewItem(base_id, "note", f"{name}{n}", "completed", note_text=body))
            vector = rng.normal(size=(1, 384)).astype(np.float32)
            row = ChunkRow(0, body, 0, len(body), None, 1, 1, 9, f"{name}{n}")
            index.write_item_material(conn, base_id, item, [row], vector)
            items.append(item)
    return items


def live_chunks(quire: Quire, base_id: int) -> dict[int, tuple[int, str]]:
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT id, item_id, text FROM chunks WHERE base_id = :b"), {"b": base_id}).all()
    return {int(r[0]): (int(r[1]), str(r[2])) for r in rows}


def held(quire: Quire, base: Base) -> set[int]:
    files = KeywordFiles(quire.db)
    opened = files.peek(key_of(base))
    assert opened is not None
    return files.held_ids(opened)


def ranked(quire: Quire, base: Base, query: str, *, with_index: bool, usable: bool = True) -> list[tuple[int, float]]:
    """Keyword search's candidates ranked by the base's index (``usable``: it must be) or by FTS5."""
    base = get_base(quire.db, base.name)
    parsed = parse(query)
    with quire.db.read() as conn:
        if with_index:
            assert (quire.keywords.opened(conn, base) is not None) == usable
        scope = build_scope(conn, base, parsed, None)
        found = keyword_candidates(conn, base, parsed, 20, scope, index=quire.keywords if with_index else None)
    return [(c.id, s) for c, s in found]


def assert_keywords_consistent_after_restart(quire: Quire, base_name: str) -> None:
    """After a crash and restart: search can use the base's keyword index; every live chunk is in it and
    found by keyword through it (its own words, within its document); no keyword hit is a deleted chunk."""
    base = get_base(quire.db, base_name)
    rows = live_chunks(quire, base.id)
    assert rows, "no live chunks to look for"
    with quire.db.read() as conn:
        opened = quire.keywords.opened(conn, base)
        assert opened is not None, "search could not use the keyword index"
        assert set(rows) <= KeywordFiles(quire.db).held_ids(opened)
        for cid, (item_id, body) in rows.items():
            words = keyword_query(" ".join(body.split()[:40]))
            assert words is not None
            found = [c for c, _s in KeywordIndex.top(opened, words, 1000, {item_id})]
            assert cid in found, f"live chunk {cid} is not found by keyword"
        for body in {b for _i, b in list(rows.values())[:20]}:
            hits = keyword_candidates(conn, base, " ".join(body.split()[:40]), 50, None, index=quire.keywords)
            assert {c.id for c, _s in hits} <= set(rows)


def test_the_writer_keeps_the_index_in_step_with_adds_deletes_and_reindex(quire: Quire) -> None:
    base = make_base(quire)
    items = write(quire, base.id, TEXTS * 5)
    path = KeywordFiles(quire.db).path(base.id)
    assert path.is_dir() and not path.is_symlink() and path.parent.parent == quire.data_dir
    opened = KeywordFiles(quire.db).peek(key_of(base))
    with quire.db.read() as conn:
        version = index.vectors_version(conn, base.id)
    assert opened is not None and opened.version == version  # synced after the commit, before any search
    assert held(quire, base) == set(live_chunks(quire, base.id))

    with quire.db.write() as conn:  # a reindex: the item's chunk replaced by a new one (a new id)
        index.write_item_material(conn, base.id, items[0], [ChunkRow(0, "zebrafish", 0, 9, None, 1, 1, 1, "z")],
                                  np.ones((1, 384), dtype=np.float32))  # fmt: skip
    with quire.db.write() as conn:  # deletes: applied to the index, not only hidden by the join
        index.clear_items_material(conn, base.id, items[1:4])
    assert held(quire, base) == set(live_chunks(quire, base.id))
    assert [live_chunks(quire, base.id)[c][1] for c, _s in ranked(quire, base, "zebrafish", with_index=True)] == [
        "zebrafish"
    ]


def test_it_ranks_as_fts5_ranks_with_fts5s_analyzer(quire: Quire) -> None:
    """The same chunks in the same order with the same scores (identical texts tie, broken by chunk id):
    stemming (proteins/protein, ran/run), folded accents (Müllabfuhr = mullabfuhr), identifiers as phrases,
    required phrases and exclusions mean what they mean to FTS5, and the index's candidates are scored as
    FTS5's bm25() scores them."""
    base = make_base(quire)
    write(quire, base.id, TEXTS * 3)
    rows = live_chunks(quire, base.id)
    for query in QUERIES:
        by_index = ranked(quire, base, query, with_index=True)
        assert by_index and by_index == ranked(quire, base, query, with_index=False), query
    assert {rows[c][1] for c, _s in ranked(quire, base, "mullabfuhr", with_index=True)} == {TEXTS[2]}


def test_the_same_rows_rank_the_same_whatever_the_indexs_history(quire: Quire) -> None:
    """tantivy counts deleted and replaced documents in its BM25 statistics until a merge rewrites their
    segment, so an index with a past (commits, reindexes, deletes) and one rebuilt from the same rows score
    differently by themselves (checked below); search scores the index's candidates as FTS5 scores them, from
    the snapshot's rows: the same hits and scores as FTS5's own ranking, before and after a rebuild."""
    rng = random.Random(3)
    base = make_base(quire)
    for round_ in range(6):
        items = write(quire, base.id, [prose(rng, 40) for _ in range(12)], name=f"r{round_}-")
        with quire.db.write() as conn:  # a reindex (a new chunk for the item) and two deletes
            body = prose(rng, 40)
            index.write_item_material(conn, base.id, items[0], [ChunkRow(0, body, 0, 9, None, 1, 1, 9, f"x{round_}")],
                                      np.ones((1, 384), dtype=np.float32))  # fmt: skip
            index.clear_items_material(conn, base.id, items[1:3])
    queries = ["protein receptor signal", "ocean carbon glacier", "court contract law", '"neuron memory" learning']
    with quire.db.read() as conn:
        opened = quire.keywords.opened(conn, base)
    assert opened is not None
    own_before = {q: KeywordIndex.top(opened, keyword_query(parse(q)), 20) for q in queries}  # type: ignore[arg-type]
    with_past = {q: ranked(quire, base, q, with_index=True) for q in queries}
    assert all(with_past.values())
    assert with_past == {q: ranked(quire, base, q, with_index=False) for q in queries}

    shutil.rmtree(KeywordFiles(quire.db).path(base.id))  # rebuilt from the same rows by the next search
    quire.keywords.forget(base.id)
    assert {q: ranked(quire, base, q, with_index=True) for q in queries} == with_past
    with quire.db.read() as conn:
        rebuilt = quire.keywords.opened(conn, base)
    assert rebuilt is not None and rebuilt.documents() == opened.documents()  # the same live documents
    own_after = {q: KeywordIndex.top(rebuilt, keyword_query(parse(q)), 20) for q in queries}  # type: ignore[arg-type]
    assert own_after != own_before  # the index's own BM25 did depend on its past


def test_a_narrow_filter_is_intersected_inside_the_index(quire: Quire) -> None:
    base = make_base(quire)
    items = write(quire, base.id, TEXTS * 4)
    with quire.db.read() as conn:
        opened = quire.keywords.opened(conn, base)
    assert opened is not None
    query = keyword_query("harbour dredging silt")
    assert query is not None
    wanted = {items[3], items[13]}
    found = KeywordIndex.top(opened, query, 10, wanted)
    rows = live_chunks(quire, base.id)
    assert found and {rows[c][0] for c, _s in found} <= wanted
    unfiltered = dict(KeywordIndex.top(opened, query, 100))
    assert all(s == pytest.approx(unfiltered[c]) for c, s in found)  # the filter adds nothing to the score


def test_a_commit_whose_sync_never_ran_is_caught_up_and_its_deletes_stay_hidden(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the database commit and the index sync: the next search catches the adds up itself;
    the deletes that sync carried stay in the index until a rebuild, and the join never returns them."""
    base = make_base(quire)
    items = write(quire, base.id, TEXTS)
    monkeypatch.setattr(keyword_file.SyncAfterCommit, "__call__", lambda self, db: None)
    write(quire, base.id, ["zebrafish in the harbour"], name="late")
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, [items[3], items[5]])  # the two harbour chunks
    monkeypatch.undo()
    hits = ranked(quire, base, "harbour", with_index=True)
    rows = live_chunks(quire, base.id)
    assert [rows[c][1] for c, _s in hits] == ["zebrafish in the harbour"]
    assert held(quire, base) > set(rows)  # the lost deletes are still held...
    assert {c for c, _s in hits} <= set(rows)  # ...and never shown


def test_a_rolled_back_clear_keeps_its_chunks_findable(quire: Quire) -> None:
    base = make_base(quire)
    items = write(quire, base.id, TEXTS)
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, [items[0]])
        with pytest.raises(RuntimeError), quire.db.write() as inner:  # a savepoint
            index.clear_items_material(inner, base.id, [items[6]])
            raise RuntimeError("rolled back")
    rows = live_chunks(quire, base.id)
    assert held(quire, base) == set(rows)
    assert {rows[c][1] for c, _s in ranked(quire, base, "runner", with_index=True)} == {TEXTS[6]}


def _damage(quire: Quire, base: Base, damage: str, other: Base, tmp_path: Path) -> None:
    files = KeywordFiles(quire.db)
    path = files.path(base.id)
    if damage == "missing":
        shutil.rmtree(path)
    elif damage == "meta":
        (path / "meta.json").write_text("{not json")
    elif damage == "foreign":  # another base's index under this base's name
        shutil.rmtree(path)
        files.path(other.id).rename(path)
    elif damage == "ahead":  # an index from a later history (a restored database's older copy)
        opened = files.peek(key_of(base))
        assert opened is not None
        writer = opened.index.writer(keyword_file.WRITER_HEAP, 1)
        keyword_schema.write_stamp(writer, Stamp(key_of(base), opened.version + 5, opened.stamp.last_id))
        writer.commit()
        writer.wait_merging_threads()
    elif damage == "link":  # a link where the index belongs: removed, never followed
        shutil.rmtree(path)
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "keep.txt").write_text("not ours")
        os.symlink(tmp_path / "elsewhere", path)


@pytest.mark.parametrize("damage", ["missing", "meta", "foreign", "ahead", "link"])
def test_a_damaged_index_is_detected_and_rebuilt_from_rows(quire: Quire, damage: str, tmp_path: Path) -> None:
    base = make_base(quire)
    other = make_base(quire, "other")
    write(quire, base.id, TEXTS)
    write(quire, other.id, ["harbour harbour harbour"])
    _damage(quire, base, damage, other, tmp_path)
    fresh = Quire.open(quire.data_dir)  # a process that never held the index
    try:
        hits = ranked(fresh, base, "harbour dredging", with_index=True)
        rows = live_chunks(fresh, base.id)
        assert {rows[c][1] for c, _s in hits} == {TEXTS[3], TEXTS[5]}
        assert held(fresh, base) == set(rows)
        assert not KeywordFiles(fresh.db).path(base.id).is_symlink()
        assert (tmp_path / "elsewhere" / "keep.txt").exists() or damage != "link"
    finally:
        fresh.close()


def test_a_search_ranks_with_fts5_rather_than_build_a_large_index(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    write(quire, base.id, TEXTS)
    shutil.rmtree(KeywordFiles(quire.db).path(base.id))
    monkeypatch.setattr(keyword_index, "SEARCH_BUILD_MAX", len(TEXTS) - 1)
    fresh = Quire.open(quire.data_dir)
    try:
        by_fts5 = ranked(fresh, base, "harbour", with_index=False)
        assert by_fts5 and ranked(fresh, base, "harbour", with_index=True, usable=False) == by_fts5
        assert not KeywordFiles(fresh.db).path(base.id).exists()  # left to the writer, an import or doctor
    finally:
        fresh.close()


def test_a_deleted_base_takes_its_index_with_it(quire: Quire) -> None:
    from knowledge.library import bases

    base = make_base(quire)
    write(quire, base.id, TEXTS)
    path = KeywordFiles(quire.db).path(base.id)
    assert path.is_dir()
    bases.delete_base(quire.db, quire.queue, base.name, quire.blobs_dir)
    assert not path.exists()


@pytest.mark.parametrize("round_", range(2))
def test_a_writer_killed_mid_write_leaves_a_state_search_answers_correctly(data_dir: Path, round_: int) -> None:
    """The writer of tests/support/vector_writer.py (three items added, the oldest cleared, per
    transaction) killed at different points: both derived indexes were being written."""
    quire = Quire.open(data_dir)
    make_base(quire)
    quire.close()
    proc = python_proc("-m", "tests.support.vector_writer", str(data_dir))

    def chunks() -> int:
        conn = open_raw_connection(data_dir / "quire.sqlite3")
        try:
            return int(conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0])
        finally:
            conn.close()

    try:
        wait_until(lambda: chunks() >= 250 + 173 * round_ or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    fresh = Quire.open(data_dir)
    try:
        assert_keywords_consistent_after_restart(fresh, "kb")
    finally:
        fresh.close()


def test_doctor_checks_each_index_and_rebuilds_one_that_does_not_match(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    other = make_base(quire, "other")
    items = write(quire, base.id, TEXTS)
    write(quire, other.id, TEXTS[:3])
    monkeypatch.setattr(keyword_file.SyncAfterCommit, "__call__", lambda self, db: None)
    with quire.db.write() as conn:  # a delete whose sync was lost: the index holds a dead chunk
        index.clear_items_material(conn, base.id, [items[0]])
    monkeypatch.undo()
    files = KeywordFiles(quire.db)
    orphan = files.path(99)  # a deleted base's index, left by a crash before its removal
    orphan.mkdir()
    (files.path(other.id) / "meta.json").write_text("[]")
    quire.close()
    report = data_dir_checks(quire.data_dir)
    states = {e["base_id"]: e for e in report["keyword_indexes"]}
    with quire.db.read() as conn:
        versions = {b: index.vectors_version(conn, b) for b in (base.id, other.id)}
    assert states[base.id]["state"] == "behind its rows" and states[base.id]["synced_to_version"] == versions[base.id]
    assert states[other.id]["state"] == "missing or invalid"
    assert states[other.id]["synced_to_version"] == versions[other.id]
    assert not orphan.exists()
    fresh = Quire.open(quire.data_dir)
    try:
        assert {e["state"] for e in keyword_check.check_files(fresh.db)} == {"current"}  # doctor's check, again
        assert held(fresh, other) == set(live_chunks(fresh, other.id))
        assert held(fresh, base) == set(live_chunks(fresh, base.id))  # the dead chunk gone: rebuilt
    finally:
        fresh.close()


def test_an_import_builds_the_keyword_index_and_a_salvaged_copy_rebuilds_it(quire: Quire, tmp_path: Path) -> None:
    """An import builds the base's index after its last commit (not its first search); a salvaged data
    directory has none until its first keyword search builds it from the salvaged rows."""
    from knowledge.compose import open_quire
    from knowledge.portable import export_base, import_base, salvage
    from tests.portable.helpers import synthetic_base

    synthetic_base(quire, "kb", files=6, chunks_per_file=4)
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    target = open_quire(tmp_path / "elsewhere")
    try:
        imported = import_base(target, file)
        base = get_base(target.db, "kb")
        opened = KeywordFiles(target.db).peek(key_of(base))
        with target.db.read() as conn:
            assert opened is not None and opened.version == index.vectors_version(conn, base.id)
        assert held(target, base) == set(live_chunks(target, base.id)) and imported.chunks == 24
    finally:
        target.close()
    salvage.salvage(quire.data_dir, tmp_path / "salvaged")
    saved = open_quire(tmp_path / "salvaged")
    try:
        base = get_base(saved.db, "kb")
        assert not KeywordFiles(saved.db).path(base.id).exists()
        assert_keywords_consistent_after_restart(saved, "kb")  # the first search built it from the rows
    finally:
        saved.close()


def test_the_windows_worker_builds_a_missing_index_at_start(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    """A base too large for a search to build its index on the spot (one indexed before there were keyword
    indexes) gets it from the warm-up of the window's worker (the encoders are not what this is about)."""
    base = make_base(quire)
    write(quire, base.id, TEXTS)
    shutil.rmtree(KeywordFiles(quire.db).path(base.id))
    monkeypatch.setattr(keyword_index, "SEARCH_BUILD_MAX", 0)
    assert ranked(quire, base, "harbour", with_index=True, usable=False)  # FTS5 ranks meanwhile
    monkeypatch.setattr(Quire, "document_encoder", lambda self, base: _Silent())
    quire.warm_up()
    assert held(quire, base) == set(live_chunks(quire, base.id))
    assert ranked(quire, base, "harbour", with_index=True)


class _Silent:
    def encode_documents(self, texts: list[str]) -> None:
        return None


def test_a_search_does_not_wait_for_another_process_rebuilding_the_index(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process holds the index's lock (a rebuild takes minutes on a large base), a search that
    needs the index ranks with FTS5 after ``LOCK_WAIT`` instead of waiting; a stopped sync commits nothing."""
    import fcntl

    base = make_base(quire)
    write(quire, base.id, TEXTS)
    write(quire, base.id, ["harbour pilots"], name="late")  # the index is current; a fresh process re-opens it
    monkeypatch.setattr(keyword_index, "LOCK_WAIT", 0.2)
    lock = os.open(KeywordFiles(quire.db).path(base.id).with_name(f"base-{base.id}.lock"), os.O_RDWR)
    fresh = Quire.open(quire.data_dir)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a rebuilding writer would
        by_fts5 = ranked(fresh, base, "harbour", with_index=False)
        assert ranked(fresh, base, "harbour", with_index=True, usable=False) == by_fts5
    finally:
        os.close(lock)
    try:
        shutil.rmtree(KeywordFiles(fresh.db).path(base.id))
        with pytest.raises(keyword_file.Stopped):
            KeywordFiles(fresh.db).sync(base.id, stop=lambda: True)
        assert not KeywordFiles(fresh.db).path(base.id).exists()
        assert not KeywordFiles(fresh.db).path(base.id).with_name(f"base-{base.id}.new").exists()
        assert ranked(fresh, base, "harbour", with_index=True)  # the lock is free: built and used
    finally:
        fresh.close()
