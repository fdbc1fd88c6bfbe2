"""The folder-run panel while a big run executes: the main thread's lateness.

3,000 small text files in 30 folders (``bench_app.tiny_files``) are previewed and started from the real
window's Folder runs tab (``run_panel_probe.py``, offscreen, with the window's own worker process), and the
tab stays open on the run — its sources table paged and updated in place, scrolled to its end every two
seconds — until the run is terminal. A 10 ms heartbeat on the main thread records how late it ever ran
(and the CPU the thread spent between two ticks). Run on purpose:
``python -m tests.benchmarks.run_all --only run_panel``.
"""

from __future__ import annotations

from typing import Any

from tests.benchmarks import bench_ingest
from tests.benchmarks.bench_app import tiny_files
from tests.benchmarks.common import Result, log, python_module, quire, run_benchmark, target

SOURCES = 3000


def run(quick: bool) -> Result:
    return run_benchmark("run_panel", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    root = bench_ingest.area(quick) / "run_panel"
    root.mkdir(exist_ok=True)
    data_dir = bench_ingest.fresh(root / "data")
    quire(data_dir, "base", "create", "inbox")
    folder = tiny_files(root / "folder", SOURCES)
    log(f"heartbeat while the window's worker executes a {SOURCES:,}-source folder run, its panel open")
    probe: dict[str, Any] = python_module(
        "tests.benchmarks.run_panel_probe",
        str(data_dir),
        "inbox",
        str(folder),
        timeout=3600,
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    log(f"   {probe}")
    result.data["sources"] = SOURCES
    result.data["heartbeat_run_panel"] = probe
    result.targets += [
        target(
            f"main-thread max lateness, Folder runs tab open on a {SOURCES:,}-source run executing",
            probe["heartbeat"]["max_ms"],
            at_most=50,
            unit="ms",
        ),
    ]
