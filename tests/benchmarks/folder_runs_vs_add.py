"""Folder runs against ``quire add`` on the same SciFact documents, the two in turn (A B A B …).

    python -m tests.benchmarks.folder_runs_vs_add --docs 1000 --rounds 2

Each round ingests the same tree twice, each time into a fresh data directory: ``quire add`` of the root +
``quire worker --until-idle`` (bench_ingest's step 1), then one run per sub-folder, started by one ``quire run
start`` + the worker (its step 4). Which one goes first alternates by round, so a drift of the shared
machine's load hits both. Prints one JSON line: per round the two chunks/s and their ratio, the CPU seconds
each side's processes used (add ÷ runs: above 1 means the runs did the same work with less CPU), the 1-minute
load average around each ingest, and the median ratio (folder runs ÷ add). A reduced form of the ingest
benchmark's "folder runs ÷ add" target, for before/after comparisons of the folder-run path; not part of
run_all.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from typing import Any

from tests.benchmarks import corpus
from tests.benchmarks.bench_ingest import breakdown, folder_runs_ingest, fresh, ingest_add
from tests.benchmarks.common import REPO, child_env, loadavg, log, work_dir


def warm_model_cache() -> None:
    """Convert the model once (if it is not cached yet), so neither side pays for it."""
    code = (
        "from knowledge.ingest.embedding import default_model_spec; "
        "from knowledge.ingest.openvino_backend import model_ir; model_ir(default_model_spec())"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(), check=True, capture_output=True)


def children_cpu_seconds() -> float:
    """User + system CPU of every finished child process (the CLI runs and the worker with its parse child)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def folder_runs_stages(runs: dict[str, Any]) -> dict[str, float]:
    totals = runs["totals"]
    return {k.removeprefix("seconds_"): round(float(v), 2) for k, v in totals.items() if k.startswith("seconds_")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.folder_runs_vs_add")
    parser.add_argument("--docs", type=int, default=1000, help="the first N SciFact documents (default 1000)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    data = corpus.load(quick=False)
    data = corpus.SciFact({d: data.docs[d] for d in list(data.docs)[: args.docs]}, [], {})
    root = work_dir() / "folder-runs-vs-add"
    parts = corpus.write_tree(data, root / "docs")
    warm_model_cache()
    rounds = []
    for n in range(args.rounds):
        order = ("add", "runs") if n % 2 == 0 else ("runs", "add")
        measured: dict[str, Any] = {}
        for side in order:
            before = loadavg()[0]
            cpu_before = children_cpu_seconds()
            log(f"round {n + 1}: {side}")
            if side == "add":
                result = ingest_add(fresh(root / "data-add"), root / "docs", "auto")
                stages = breakdown(result)
            else:
                result = folder_runs_ingest(fresh(root / "data-runs"), parts)
                stages = folder_runs_stages(result)
            measured[side] = {
                "wall_seconds": result["wall_seconds"],
                "documents": result["documents"],
                "chunks": result["chunks"],
                "chunks_per_s": result["chunks_per_s"],
                "cpu_seconds": round(children_cpu_seconds() - cpu_before, 2),
                "load_1m": [before, loadavg()[0]],
                "stages": stages,
            }
            log(f"   {result['chunks']} chunks in {result['wall_seconds']} s: {result['chunks_per_s']} chunks/s")
        ratio = measured["runs"]["chunks_per_s"] / measured["add"]["chunks_per_s"]
        cpu = measured["add"]["cpu_seconds"] / measured["runs"]["cpu_seconds"]
        rounds.append(
            {"order": list(order), **measured, "runs_over_add": round(ratio, 3), "cpu_add_over_runs": round(cpu, 3)}
        )
        log(f"   folder runs / add = {ratio:.3f}")
    ratios = [r["runs_over_add"] for r in rounds]
    cpus = [r["cpu_add_over_runs"] for r in rounds]
    medians = {"median_runs_over_add": statistics.median(ratios), "median_cpu_add_over_runs": statistics.median(cpus)}
    print(json.dumps({"documents": len(data.docs), "rounds": rounds, **medians}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
