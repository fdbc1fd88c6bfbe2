"""Keyword and hybrid search through ``quire search --queries-file`` on a large synthetic base, two source trees
in turn (A B A B ...): written to measure what scoring the keyword index's candidates exactly (FTS5's ``bm25()``
from the snapshot's rows, ``knowledge/search/keyword_bm25.py``) costs against the index's own BM25.

    python -m tests.benchmarks.keyword_rescoring_ab --before /path/to/older/tree \\
        --data-dir /tmp/quire-bench/full/data-synth-300000 --queries queries.million.jsonl --rounds 2

Each process is fresh (``bench_million.run_queries``: warm-up queries dropped, p50/p95/p99 of the rest, the first
query, peak RSS); the 1-minute load average is recorded with each. Results: ``results/keyword-rescoring.json``.
Not part of run_all: it answers one question, asked when the keyword path changes.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tests.benchmarks.bench_million import run_queries
from tests.benchmarks.common import REPO, log

RESULTS = REPO / "tests" / "benchmarks" / "results" / "keyword-rescoring.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.keyword_rescoring_ab")
    parser.add_argument("--before", type=Path, required=True, help="the older source tree (a git worktree)")
    parser.add_argument("--data-dir", type=Path, required=True, help="a data directory with a base named synth")
    parser.add_argument("--queries", type=Path, required=True, help="queries as quire search --queries-file lines")
    parser.add_argument("--modes", default="keyword,hybrid")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    codes = {"head": REPO, "before": args.before.resolve()}
    rounds = []
    for mode in args.modes.split(","):
        for n in range(args.rounds):
            for name in ("head", "before") if n % 2 == 0 else ("before", "head"):
                result = run_queries(codes[name], args.data_dir, args.queries, mode)
                result.update(code=name, mode=mode, round=n, load_1m=round(os.getloadavg()[0], 2))
                log(json.dumps(result))
                rounds.append(result)
    RESULTS.write_text(json.dumps({"benchmark": "keyword-rescoring", "rounds": rounds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
