"""Run the benchmarks and write docs/BENCHMARKS.md: ``python -m tests.benchmarks.run_all``.

    python -m tests.benchmarks.run_all                    # everything (~45 min on an idle 2-core machine)
    python -m tests.benchmarks.run_all --only ingest,quality
    python -m tests.benchmarks.run_all --quick            # 1,000 documents, fewer queries: for development
    python -m tests.benchmarks.run_all --summary-only     # rewrite docs/BENCHMARKS.md from results/*.json

Results go to ``tests/benchmarks/results/<name>.json`` (``<name>-quick.json`` with ``--quick``);
scratch data (corpora, data directories) to ``QUIRE_BENCH_DIR`` (default ``/tmp/quire-bench``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

from tests.benchmarks.common import log

BENCHMARKS = (
    "ingest", "quality", "latency", "coldstart", "app", "drop", "viewer", "portable", "ocr", "sync",
)  # fmt: skip
# Run only when named in --only: bench_fusion refits the fusion (bench_quality cross-validates every variant
# in its own run); bench_encoders needs the optional extra "encoders" and ~40 min;
# bench_multilingual the extra "multilingual"; bench_million builds a 1,000,000-chunk synthetic base first
# (minutes; `python -m tests.benchmarks.bench_million --help`); bench_team_workers starts PostgreSQL and Redis on
# loopback and ingests 1,000 documents four times, then soaks three workers under SIGKILL (an hour or more here);
# bench_team_million moves bench_million's base into a loopback team store (half an hour at 1m) and searches it;
# bench_run_panel executes a 3,000-source folder run with the window's Folder runs tab open (minutes).
ON_PURPOSE = ("fusion", "encoders", "multilingual", "million", "team_workers", "team_million", "run_panel")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.run_all")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS + ON_PURPOSE)}")
    parser.add_argument("--quick", action="store_true", help="1,000 documents and fewer queries (development)")
    parser.add_argument("--summary-only", action="store_true", help="only rewrite docs/BENCHMARKS.md")
    parser.add_argument("--no-summary", action="store_true", help="do not rewrite docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    chosen = list(BENCHMARKS) if not args.only else [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BENCHMARKS + ON_PURPOSE]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS + ON_PURPOSE}")
    failed: list[str] = []
    if not args.summary_only:
        for name in chosen:
            t0 = time.perf_counter()
            log(f"== {name}{' (quick)' if args.quick else ''}")
            try:
                module = importlib.import_module(f"tests.benchmarks.bench_{name}")
                result = module.run(args.quick)
                for t in result.targets:
                    log(f"   {'MET ' if t['met'] else 'MISS'} {t['name']}: {t['measured']} (target {t['target']})")
            except Exception:
                traceback.print_exc()
                failed.append(name)
            log(f"== {name} took {time.perf_counter() - t0:.0f} s")
    if not args.no_summary:
        from tests.benchmarks import summarize

        path = summarize.write(quick=args.quick)
        log(f"wrote {path}")
    if failed:
        log(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
