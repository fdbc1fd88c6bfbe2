"""Portable bases: export and import time of the SciFact base against its first ingest time.

    python -m tests.benchmarks.run_all --only portable [--quick]

Uses the fp32 and bf16 SciFact bases of the ingest benchmark (ingesting them first if missing, which
records their ingest wall time: ``add`` + ``worker --until-idle``). Each export and import is a real
``quire`` process, timed and RSS-sampled end to end (process start included). Goal (issue 16): both under
5 % of the ingest time. The import never loads the model, so its time does not depend on the precision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest
from tests.benchmarks.common import Result, log, quire_argv, run_benchmark, run_sampled, target

GOAL_SHARE = 0.05


def run(quick: bool) -> Result:
    return run_benchmark("portable", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    state = bench_ingest.setup_bases(quick)
    root = bench_ingest.area(quick) / "portable"
    bench_ingest.fresh(root)
    for key in ("fp32", "bf16"):
        entry = state[key]
        measured = _round_trip(Path(entry["data_dir"]), root, key)
        ingest = float(entry["wall_seconds"])
        measured["ingest_seconds"] = ingest
        measured["export_share_of_ingest"] = round(measured["export_seconds"] / ingest, 4)
        measured["import_share_of_ingest"] = round(measured["import_seconds"] / ingest, 4)
        result.data[key] = measured
        log(
            f"   {key}: ingest {ingest} s, export {measured['export_seconds']} s "
            f"({measured['export_share_of_ingest']:.1%}), import {measured['import_seconds']} s "
            f"({measured['import_share_of_ingest']:.1%}), file {measured['file_mb']} MB"
        )
        for step in ("export", "import"):
            result.targets.append(
                target(
                    f"{step} time / first ingest time ({key}, {entry['chunks']} chunks)",
                    measured[f"{step}_share_of_ingest"],
                    at_most=GOAL_SHARE,
                )
            )


def _round_trip(data_dir: Path, root: Path, key: str) -> dict[str, Any]:
    file = root / f"scifact-{key}.quirebase"
    log(f"export of the {key} base")
    exported = run_sampled(quire_argv(data_dir, "--json", "base", "export", bench_ingest.BASE, str(file)))
    out = json.loads(exported.stdout.strip().splitlines()[-1])
    target_dir = bench_ingest.fresh(root / f"imported-{key}")
    log(f"import of the {key} base into a fresh data directory")
    imported = run_sampled(quire_argv(target_dir, "--json", "base", "import", str(file)))
    back = json.loads(imported.stdout.strip().splitlines()[-1])
    return {
        "chunks": out["chunks"],
        "items": out["items"],
        "file_mb": round(file.stat().st_size / 1e6, 2),
        "export_seconds": round(exported.seconds, 3),
        "export_inner_seconds": out["seconds"],
        "export_peak_rss_mb": exported.peak_rss_mb,
        "import_seconds": round(imported.seconds, 3),
        "import_inner_seconds": back["seconds"],
        "import_peak_rss_mb": imported.peak_rss_mb,
        "imported_chunks": back["chunks"],
    }
