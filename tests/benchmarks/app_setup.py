"""States the app benchmark needs, each built in its own process. Prints one JSON line.

``python -m tests.benchmarks.app_setup tree DATA_DIR BASE N`` — a base with one folder item holding N
completed file items (2 chunks each: short synthetic texts, random unit vectors, written through
``knowledge.library.index.write_item_material``): a subtree to delete. SYNTHETIC: nothing was parsed or embedded.

``python -m tests.benchmarks.app_setup interrupted DATA_DIR FOLDER`` — the state a crash leaves: this
process registers as a worker-hosting session, adds FOLDER, runs its ``prepare-root`` job (which
creates every child and schedules their ``index-documents`` jobs, enqueued by this worker-hosting
session), claims one of those jobs, and then dies (``os._exit``) with everything active.

``python -m tests.benchmarks.app_setup recover DATA_DIR`` — what the next start does: open the data
directory and time ``Quire.recover()``; reports how many items it parked.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def tree(data_dir: Path, base_name: str, count: int) -> dict[str, object]:
    from knowledge.compose import open_quire
    from knowledge.library import bases, index
    from knowledge.library.index import ChunkRow
    from knowledge.library.tree import NewItem, create_item

    rng = np.random.default_rng(5000)
    quire = open_quire(data_dir)
    try:
        base = bases.create_base(quire.db, base_name, model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32")
        with quire.db.write() as conn:
            root = create_item(
                conn, NewItem(base.id, "directory", "to-delete", "completed", source_path="/synthetic/to-delete")
            )
        for start in range(0, count, 500):
            with quire.db.write() as conn:
                for n in range(start, min(count, start + 500)):
                    name = f"file-{n:05d}.txt"
                    item = create_item(
                        conn,
                        NewItem(
                            base.id,
                            "file",
                            name,
                            "completed",
                            parent_id=root,
                            root_id=root,
                            relative_path=name,
                            source_path=f"/synthetic/to-delete/{name}",
                        ),
                    )
                    texts = [f"synthetic chunk {n} one", f"synthetic chunk {n} two"]
                    rows = [ChunkRow(i, t, 0, len(t), None, 1, 1, 4, f"{n}-{i}") for i, t in enumerate(texts)]
                    vectors = rng.normal(size=(2, 384)).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                    index.write_item_material(conn, base.id, item, rows, vectors)
    finally:
        quire.close()
    return {"base": base_name, "root_id": root, "items": count + 1}


def interrupted(data_dir: Path, folder: Path) -> None:
    from knowledge.compose import open_quire
    from knowledge.library import bases
    from knowledge.lifecycle import operations
    from knowledge.lifecycle.operations import INDEX_DOCUMENTS, PREPARE_ROOT

    quire = open_quire(data_dir, hosts_worker=True)
    bases.create_base(quire.db, "interrupted", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32")
    changes = operations.add_items(quire, "interrupted", [operations.PathInput(folder)])
    worker = quire.make_worker()
    worker.register()
    record = worker._claim(changes.job_ids[0])
    assert record is not None and record.type == PREPARE_ROOT
    worker._execute(record)
    jobs = quire.queue.list(status="pending", limit=100_000)
    index_jobs = [j for j in jobs if j.type == INDEX_DOCUMENTS]
    running = worker._claim(index_jobs[0].id)  # one job left running under this (soon dead) session
    with quire.db.read() as conn:
        active = conn.exec_driver_sql(
            "SELECT count(*) FROM items WHERE type = 'file' AND status IN ('processing', 'reading', 'embedding')"
        ).scalar()
    print(
        json.dumps(
            {
                "active_items": active,
                "pending_index_jobs": len(index_jobs) - 1,
                "running_jobs": int(running is not None),
            }
        ),
        flush=True,
    )
    os._exit(0)  # a crash: no session end, no cleanup


def recover(data_dir: Path) -> dict[str, object]:
    from knowledge.compose import open_quire

    t0 = time.perf_counter()
    quire = open_quire(data_dir, hosts_worker=True)
    t1 = time.perf_counter()
    report = quire.recover()
    t2 = time.perf_counter()
    with quire.db.read() as conn:
        parked = conn.exec_driver_sql(
            "SELECT count(*) FROM items WHERE status = 'failed' AND error_code = 'indexing_interrupted'"
        ).scalar()
        active = conn.exec_driver_sql(
            "SELECT count(*) FROM items WHERE status IN ('processing', 'reading', 'embedding', 'preparing')"
        ).scalar()
    quire.close()
    return {
        "open_seconds": round(t1 - t0, 3),
        "recover_seconds": round(t2 - t1, 3),
        "report": report.as_dict(),
        "parked_items": parked,
        "still_active_items": active,
    }


def main(argv: list[str]) -> int:
    action, data_dir = argv[0], Path(argv[1])
    if action == "tree":
        print(json.dumps(tree(data_dir, argv[2], int(argv[3]))))
    elif action == "interrupted":
        interrupted(data_dir, Path(argv[2]))
    elif action == "recover":
        print(json.dumps(recover(data_dir)))
    else:
        raise SystemExit(f"unknown action {action!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
