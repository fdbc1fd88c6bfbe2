"""Folder sync benchmarks (issue 11): ``python -m tests.benchmarks.run_all --only sync [--quick]``.

* edit-to-searchable latency: one file edited in a synced folder with the worker idle (a real
  ``quire worker`` with its watcher, warmed up by one edit first: its first index job loads the model),
  until keyword search finds the new word; p50/p95 over trials
  (goal: p95 under 2 s, including the quiet period, ``sync.quiet_seconds`` = 0.5 s);
* the reconcile of an unchanged tree of 10,000 files (2,000 with ``--quick``): seconds, and files opened
  for their content (goal: under 3 s, none opened);
* the cost of a 1 % change (edit) in that tree — reconcile + indexing, to idle — against its first ingest;
* the watcher's own memory on that tree and on one of 100,000 files (``watcher_memory``, a fresh process each).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.common import (
    Result,
    child_env,
    log,
    percentile,
    python_module,
    quire,
    quire_argv,
    run_benchmark,
    target,
    work_dir,
)


def run(quick: bool) -> Result:
    return run_benchmark("sync", quick, lambda result: _run(result, quick))


def _tree(folder: Path, files: int) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    per_dir = 100
    for n in range(files):
        d = folder / f"d{n // per_dir:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{n:05d}.txt").write_text(f"Note {n}: a short file with the token word{n}x in it.\n")


def _age(path: Path) -> None:
    import os

    st = os.stat(path)
    os.utime(path, (st.st_atime - 10, st.st_mtime - 10))


def _run(result: Result, quick: bool) -> None:
    from knowledge import sync
    from knowledge.compose import open_quire
    from knowledge.search import search

    files = 2_000 if quick else 10_000
    area = work_dir() / ("sync-quick" if quick else "sync")
    if area.exists():
        shutil.rmtree(area)
    folder, data_dir = area / "tree", area / "data"
    _tree(folder, files)
    quire(data_dir, "base", "create", "kb")
    t0 = time.perf_counter()
    added = quire(data_dir, "--json", "add", "kb", str(folder))
    quire(data_dir, "worker", "--until-idle", "--nice", "0", timeout=7200)
    first_ingest = time.perf_counter() - t0
    log(f"first ingest of {files} files: {first_ingest:.1f} s ({added.returncode})")

    q = open_quire(data_dir)
    try:
        item_id = _folder_item(q)
        root = sync.enable_sync(q, "kb", item_id)
        quire(data_dir, "worker", "--until-idle", "--nice", "0")
        unchanged: list[float] = []
        opened: list[int] = []
        for _ in range(3):
            t = time.perf_counter()
            out = sync.reconcile(q, root.id, q.db.write)
            unchanged.append(time.perf_counter() - t)
            opened.append(out.hashed)
            assert not any(out.counts.values()), out.counts
        log(f"unchanged reconcile: {unchanged} s, files opened {opened}")

        changed = files // 100
        for n in range(0, files, 100):
            p = folder / f"d{n // 100:03d}" / f"f{n:05d}.txt"
            p.write_text(f"Note {n}: edited, now with the token edited{n}y in it.\n")
            _age(p)
        t = time.perf_counter()
        out = sync.reconcile(q, root.id, q.db.write)
        quire(data_dir, "worker", "--until-idle", "--nice", "0")
        one_percent = time.perf_counter() - t
        log(f"1 % change ({changed} files): {one_percent:.1f} s, counts {out.counts}")

        latencies = _edit_latencies(q, data_dir, folder, 6 if quick else 20, search)
        log(f"edit-to-searchable: {latencies}")
    finally:
        q.close()
    watcher = [watcher_memory(folder)]
    if not quick:
        big = area / "tree-100k"
        _tree(big, WATCHED_LARGE)
        watcher.append(watcher_memory(big))
        shutil.rmtree(big)
    log(f"watcher memory: {watcher}")
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    result.data = {
        "watcher_memory": watcher,
        "files": files,
        "first_ingest_seconds": round(first_ingest, 2),
        "unchanged_reconcile_seconds": [round(x, 3) for x in unchanged],
        "unchanged_reconcile_files_opened": opened,
        "one_percent_change": {"files": changed, "seconds_to_idle": round(one_percent, 2)},
        "one_percent_vs_first_ingest": round(one_percent / first_ingest, 4),
        "edit_to_searchable_seconds": [round(x, 3) for x in latencies],
        "quiet_seconds": 0.5,
    }
    result.targets = [
        target("edit-to-searchable p95", p95, at_most=2.0, unit="s", note=f"p50 {p50:.2f} s, worker idle"),
        target(f"unchanged reconcile of {files} files", min(unchanged), at_most=3.0, unit="s"),
        target("files opened by the unchanged reconcile", max(opened), at_most=0, unit="files"),
    ]


WATCHED_LARGE = 100_000


def watcher_memory(folder: Path) -> dict[str, Any]:
    """The watcher's own memory on ``folder``, in a fresh process (``watcher_memory``)."""
    info: dict[str, Any] = python_module("tests.benchmarks.watcher_memory", str(folder), timeout=600)
    return info


def _folder_item(q: Any) -> int:
    from knowledge.lifecycle import list_items

    return next(i.id for i in list_items(q, "kb") if i.type == "directory")


def _edit_latencies(q: Any, data_dir: Path, folder: Path, trials: int, search: Any) -> list[float]:
    worker = subprocess.Popen(
        quire_argv(data_dir, "worker", "--nice", "0"),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out: list[float] = []
    try:
        from knowledge import sync

        deadline = time.time() + 120
        while sync.list_roots(q.db)[0].watcher_state != "watching" and time.time() < deadline:
            time.sleep(0.05)
        for n in range(-1, trials):  # trial -1 warms the worker up (its first index job loads the model)
            word = f"latency{n + 1}q" if n >= 0 else "warmupq"
            path = folder / "d000" / f"edit{n}.txt" if n % 2 else folder / "d001" / "f00100.txt"
            t = time.perf_counter()
            path.write_text(f"An edit carrying {word}.\n")
            while not search(q, "kb", word, mode="keyword", limit=1):
                if time.perf_counter() - t > 60:
                    raise RuntimeError(f"{word} never became searchable")
                time.sleep(0.01)
            if n >= 0:
                out.append(time.perf_counter() - t)
            else:
                log(f"warm-up edit (model load in the worker): {time.perf_counter() - t:.1f} s")
            while _busy(q):  # the next trial starts with the worker idle
                time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)
    return out


def _busy(q: Any) -> bool:
    from sqlalchemy import text

    with q.db.read() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")).scalar_one())
