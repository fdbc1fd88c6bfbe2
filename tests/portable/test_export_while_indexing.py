"""Export while a real worker process indexes into the base; import elsewhere; search and chunks agree.

The worker is a real ``quire worker`` process with the real model. One export is taken while it runs
freely (the file must be internally consistent: every completed item has all its chunks and vectors);
then the worker is paused with SIGSTOP — possibly inside a transaction, which a WAL read snapshot
ignores — so that the source holds still while reference searches run on it, and a second export is
taken. That export is imported into a fresh data directory by a separate process whose encoder factory
raises, and which reports that no model library was even imported.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import apsw
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.lifecycle import operations
from knowledge.portable.export import export_base
from knowledge.portable.import_check import EXPORTED_WHILE_ACTIVE, validate_export
from knowledge.runtime import Quire
from knowledge.search import MODES, search
from tests.conftest import python_proc, quire_cli, wait_until
from tests.knowledge.helpers import make_base
from tests.knowledge.test_crash import prose, start_worker
from tests.portable.helpers import hits_without_ids
from tests.support.files import write_tree

QUERIES = ["protein receptor signal", "ocean carbon glacier", "court contract law", "neuron memory learning"]

IMPORT_DRIVER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from knowledge.portable.import_ import import_base
    from knowledge.compose import open_quire

    def no_encoder(*args):
        raise AssertionError("an encoder was built during the import")

    quire = open_quire(Path(sys.argv[1]))
    quire.encoder_factory = no_encoder
    result = import_base(quire, Path(sys.argv[2]))
    heavy = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
    print(json.dumps({"result": result.as_dict(), "heavy_modules": heavy}))
    """
)


def _completed_under(quire: Quire, folder: Path) -> int:
    with quire.db.read() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM items WHERE type = 'file' AND status = 'completed' AND source_path LIKE :p"),
                {"p": f"{folder}/%"},
            ).scalar_one()
        )


def _chunk_views(quire: Quire) -> dict[str, list[dict[str, Any]]]:
    """What the chunk viewer shows for every completed file, keyed by source path, ids left out."""
    views = {}
    for item in operations.list_items(quire, "kb", status="completed", flat=True):
        if item.type == "file":
            rows = operations.list_item_chunks(quire, "kb", item.id)
            views[str(item.source_path)] = [{k: v for k, v in r.items() if "id" not in k} for r in rows]
    return views


def _searches(quire: Quire) -> dict[str, list[dict[str, Any]]]:
    return {
        f"{mode}:{q}": hits_without_ids(search(quire, "kb", q, mode=mode, limit=10)) for mode in MODES for q in QUERIES
    }


def _assert_consistent(file: Path) -> None:
    """Every completed item in the file has exactly its chunks, each with a full float32 vector."""
    validate_export(file)
    conn = apsw.Connection(str(file), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        for item_id, chunk_count in conn.execute(
            "SELECT id, chunk_count FROM items WHERE status = 'completed' AND type = 'file'"
        ).fetchall():
            found = conn.execute(
                "SELECT count(*), min(length(embedding)), max(length(embedding)) FROM chunks WHERE item_id = ?",
                (item_id,),
            ).fetchall()[0]
            assert found[0] == chunk_count > 0
            assert found[1] == found[2] == 384 * 4
    finally:
        conn.close()


def test_export_while_indexing_then_import_searches_the_same(tmp_path: Path) -> None:
    rng = random.Random(16)
    early = write_tree(tmp_path / "early", {f"e{n:02d}.txt": prose(rng, 400) for n in range(6)})
    late = write_tree(tmp_path / "late", {f"l{n:02d}.txt": prose(rng, 700) for n in range(40)})
    source_dir = tmp_path / "source"
    quire = open_quire(source_dir)
    worker: subprocess.Popen[str] | None = None
    try:
        make_base(quire, "kb")
        operations.add_items(quire, "kb", [operations.PathInput(early)])
        first = quire_cli("worker", "--until-idle", "--nice", "0", data_dir=source_dir)
        assert first.returncode == 0, first.stderr
        # one add per five files: several index jobs, whose items complete job by job
        names = sorted(late.iterdir())
        for start in range(0, len(names), 5):
            operations.add_items(quire, "kb", [operations.PathInput(p) for p in names[start : start + 5]])
        worker = start_worker(source_dir)
        wait_until(lambda: _completed_under(quire, late) >= 5, timeout=300)

        free = export_base(quire, "kb", tmp_path / "free.quirebase")  # the worker keeps writing meanwhile
        assert free.active_items > 0, "the worker finished before the export; use more files"
        _assert_consistent(Path(free.path))

        worker.send_signal(signal.SIGSTOP)
        assert _completed_under(quire, late) < 40, "the worker finished before it was paused"
        exported = export_base(quire, "kb", tmp_path / "kb.quirebase")
        assert exported.active_items > 0
        _assert_consistent(Path(exported.path))
        expected_search = _searches(quire)
        expected_chunks = _chunk_views(quire)
        worker.send_signal(signal.SIGCONT)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGCONT)
            worker.terminate()
            worker.wait(timeout=120)
        quire.close()

    target_dir = tmp_path / "elsewhere"
    proc = python_proc("-c", IMPORT_DRIVER, str(target_dir), str(exported.path))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["heavy_modules"] == []  # no model library was imported, let alone run
    assert report["result"]["chunks"] == exported.chunks
    assert report["result"]["marked_for_reindex"] == exported.active_items

    imported = open_quire(target_dir)
    try:
        assert _searches(imported) == expected_search
        assert _chunk_views(imported) == expected_chunks
        assert len(expected_chunks) >= 11  # the early files and at least five late ones
        parked = operations.list_items(imported, "kb", status="failed", flat=True)
        assert {i.error_code for i in parked} == {EXPORTED_WHILE_ACTIVE}
    finally:
        imported.close()
