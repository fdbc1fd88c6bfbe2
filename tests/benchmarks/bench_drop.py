"""Drop to searchable: with the window open and its worker idle, how long until a dropped one-page note is
found by search (``drop_probe.py`` drives the real window; 30 drops after 2 warm-up ones)."""

from __future__ import annotations

from typing import Any

from tests.benchmarks import bench_ingest
from tests.benchmarks.common import Result, log, python_module, quire, run_benchmark, target

DROPS = 30


def run(quick: bool) -> Result:
    return run_benchmark("drop", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    root = bench_ingest.area(quick) / "drop"
    root.mkdir(exist_ok=True)
    data_dir = bench_ingest.fresh(root / "data")
    quire(data_dir, "base", "create", "inbox")
    folder = bench_ingest.fresh(root / "notes")
    drops = 10 if quick else DROPS
    log(f"dropping {drops} one-page notes on the open window, one at a time")
    probe: dict[str, Any] = python_module(
        "tests.benchmarks.drop_probe",
        str(data_dir),
        "inbox",
        str(folder),
        str(drops),
        timeout=3600,
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    log(f"   {probe}")
    result.data["drop"] = probe
    if probe["error"]:
        raise RuntimeError(probe["error"])
    result.targets.append(
        target(
            "drop → searchable, one-page note, window open and worker idle (p95)",
            probe["p95_s"],
            at_most=1.0,
            unit="s",
            note=f"{probe['drops']} drops; found by hybrid search {probe['hybrid_found']}/{probe['drops']}",
        )
    )
