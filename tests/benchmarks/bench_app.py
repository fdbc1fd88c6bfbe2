"""The desktop app: launch to window shown, main-thread heartbeat under load, startup recovery time.

* **Launch → window shown**: ``quire gui`` (and ``python -m app.main``, the ``quire-gui`` launcher) in a
  subprocess under ``QT_QPA_PLATFORM=offscreen`` with ``QUIRE_REPORT_SHOWN=FILE``: the app writes the
  wall-clock time into FILE once its window is shown and the event loop runs (``app/main.py``). From
  just before the process is started to that time; 5 launches each, median and max.
* **Heartbeat** (``app_probe.py``): a 10 ms ``QTimer`` on the window's main thread; max and p99
  lateness while the window's own worker process ingests 1,000 SciFact files dropped on it, and while it
  deletes a 5,000-item subtree (synthetic rows, see ``app_setup.py tree``) selected in the tree.
* **Recovery**: 10,000 files left active by a worker-hosting process that died mid-way (its
  ``index-documents`` jobs pending, one running; ``app_setup.py interrupted``), then the time of
  ``Quire.recover()`` in a fresh process (``app_setup.py recover``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest, corpus
from tests.benchmarks.common import (
    REPO,
    Result,
    child_env,
    log,
    python_module,
    quire,
    run_benchmark,
    target,
)

LAUNCHES = 5
INGEST_FILES = 1000
DELETE_ITEMS = 5000
RECOVERY_ITEMS = 10_000


def launch_to_shown(data_dir: Path, argv: list[str]) -> float:
    marker = data_dir.parent / "shown.txt"
    marker.unlink(missing_ok=True)
    env = child_env({"QT_QPA_PLATFORM": "offscreen", "QUIRE_REPORT_SHOWN": str(marker)})
    started = time.time()
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not report its window ({argv[-3:]})")
            time.sleep(0.005)
        return float(marker.read_text().split()[0]) - started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def launches(data_dir: Path) -> dict[str, Any]:
    commands = {
        "quire gui": [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "gui"],
        "quire-gui (app.main)": [sys.executable, "-m", "app.main", "--data-dir", str(data_dir)],
    }
    out: dict[str, Any] = {}
    for name, argv in commands.items():
        times = [launch_to_shown(data_dir, argv) for _ in range(LAUNCHES)]
        out[name] = {
            "runs_s": [round(t, 3) for t in times],
            "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3),
        }
        log(f"launch → shown, {name}: {out[name]}")
    return out


def probe(*args: str) -> dict[str, Any]:
    result: dict[str, Any] = python_module(
        "tests.benchmarks.app_probe", *args, timeout=3600, env={"QT_QPA_PLATFORM": "offscreen"}
    )
    return result


def write_files(folder: Path, count: int, data: corpus.SciFact) -> Path:
    bench_ingest.fresh(folder)
    for n, doc_id in enumerate(list(data.docs)[:count]):
        sub = folder / f"part-{n // 200:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"{doc_id}.txt").write_text(data.body(doc_id), encoding="utf-8")
    return folder


def tiny_files(folder: Path, count: int) -> Path:
    bench_ingest.fresh(folder)
    for n in range(count):
        sub = folder / f"part-{n // 200:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"note-{n:05d}.txt").write_text(f"note {n}: a short file", encoding="utf-8")
    return folder


def run(quick: bool) -> Result:
    return run_benchmark("app", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    root = bench_ingest.area(quick) / "app"
    root.mkdir(exist_ok=True)
    r = result.data
    data = corpus.load(quick)

    data_dir = bench_ingest.fresh(root / "data")
    quire(data_dir, "base", "create", "inbox")
    folder = write_files(root / "drop", INGEST_FILES, data)
    log(f"heartbeat while the window's worker ingests {INGEST_FILES} files")
    r["heartbeat_ingest"] = probe("ingest", str(data_dir), "inbox", str(folder))
    log(f"   {r['heartbeat_ingest']}")

    r["launch_to_shown"] = launches(data_dir)

    tree = python_module("tests.benchmarks.app_setup", "tree", str(data_dir), "bulk", str(DELETE_ITEMS))
    log(f"heartbeat while the window's worker deletes a {DELETE_ITEMS}-item subtree")
    r["heartbeat_delete"] = probe("delete", str(data_dir), "bulk", str(tree["root_id"]))
    log(f"   {r['heartbeat_delete']}")

    rec_dir = bench_ingest.fresh(root / "data-recovery")
    files = tiny_files(root / "recovery-files", RECOVERY_ITEMS)
    setup = python_module("tests.benchmarks.app_setup", "interrupted", str(rec_dir), str(files), timeout=3600)
    r["recovery_state"] = setup
    r["recovery"] = python_module("tests.benchmarks.app_setup", "recover", str(rec_dir))
    log(f"recovery of {setup}: {r['recovery']}")

    cli = r["launch_to_shown"]["quire gui"]
    result.targets += [
        target("launch → window shown (quire gui, median of 5)", cli["median_s"], at_most=1.0, unit="s"),
        target(
            "launch → window shown (quire-gui, median of 5)",
            r["launch_to_shown"]["quire-gui (app.main)"]["median_s"],
            at_most=1.0,
            unit="s",
        ),
        target(
            "main-thread max lateness during a 1,000-file ingest",
            r["heartbeat_ingest"]["heartbeat"]["max_ms"],
            at_most=50,
            unit="ms",
        ),
        target(
            "main-thread max lateness during delete of a 5,000-item subtree",
            r["heartbeat_delete"]["heartbeat"]["max_ms"],
            at_most=50,
            unit="ms",
        ),
        target(
            f"startup recovery of {RECOVERY_ITEMS:,} interrupted items",
            r["recovery"]["recover_seconds"],
            at_most=2.0,
            unit="s",
        ),
    ]
    _ = json  # results are plain dicts
