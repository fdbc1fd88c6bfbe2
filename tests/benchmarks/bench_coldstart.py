"""Cold start to the first answer: from launching the app on an existing 100,000-chunk base to its first
hybrid result on screen.

``python -m tests.benchmarks.bench_coldstart [--quick] [--before SRC_TREE]`` (in ``make bench``). The base is
``bench_latency``'s synthetic one (``synth_base.py``: SciFact's chunks replicated with perturbed vectors;
25,000 chunks with ``--quick``), built once and kept in ``QUIRE_BENCH_DIR``. Each launch starts ``quire gui``
on this tree — and, in turn, the packaged ``dist/Quire/Quire`` when one was built (its build time is
recorded: it holds the code of the commit it was built from) — offscreen, with ``QUIRE_FIRST_SEARCH=QUERY``: the app
searches QUERY from its panel the moment its data directory is open (a person who typed while the window
appeared; ``app/main.py``) and writes when its window was shown, when it asked and when the hits were shown
(``QUIRE_REPORT_SHOWN`` / ``QUIRE_REPORT_SEARCHED``). Times run from just before the process is spawned;
median and max over ``LAUNCHES`` launches, after one untimed launch (so every timed one finds the base's
files in the OS page cache, as on a desktop that used them lately; the cache is never dropped on a shared
machine). Each launch ends with SIGTERM, which closes the window and its worker as Ctrl-C would, and the
next one starts only when every process of the last one has exited (launched back to back, the next app
started beside the last one's shutdown and took seconds longer).

``--before SRC_TREE`` launches an earlier source tree the same way (``git archive <commit> | tar -x -C DIR``),
interleaved launch by launch with this one so the machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest, bench_latency
from tests.benchmarks.common import REPO, Result, child_env, log, run_benchmark, target

LAUNCHES = 5
QUERY = "ALDH1 expression is associated with poorer prognosis for breast cancer"
TIMEOUT_S = 180
PACKAGED = REPO / "dist" / "Quire" / "Quire"


def synthetic_base(quick: bool) -> tuple[Path, dict[str, Any]]:
    """``bench_latency``'s synthetic base (100k chunks; 25k quick), from the SciFact ingest (run if missing)."""
    source = bench_ingest.area(quick) / "data-bf16"
    if not (source / "quire.sqlite3").exists():
        source = Path(bench_ingest.setup_bases(quick)["bf16"]["data_dir"])
    return bench_latency.ensure_synth(quick, source)


def apps(before: Path | None) -> dict[str, tuple[Path, str]]:
    """What is launched, by label: (source tree, app) — ``quire gui`` on this tree, on ``before``'s, and the
    packaged app when one was built (whatever commit it was built from: its build time is recorded)."""
    found = {"after": (REPO, "quire gui")}
    if before is not None:
        found = {"before": (before, "quire gui"), **found}
    if PACKAGED.exists():
        found["packaged"] = (REPO, "dist/Quire/Quire")
    return found


def launch(code: Path, data_dir: Path, app: str = "quire gui") -> dict[str, Any]:
    """One launch: seconds from spawning the app to its window shown, to the search asked, to its hits shown."""
    shown, searched = data_dir.parent / "coldstart-shown.txt", data_dir.parent / "coldstart-searched.txt"
    for marker in (shown, searched):
        marker.unlink(missing_ok=True)
    argv = [str(PACKAGED)] if app != "quire gui" else [sys.executable, "-m", "app.cli"]
    argv += ["--data-dir", str(data_dir)] + (["gui"] if app == "quire gui" else [])
    env = child_env(
        {
            "PYTHONPATH": str(code),
            "QT_QPA_PLATFORM": "offscreen",
            "QUIRE_REPORT_SHOWN": str(shown),
            "QUIRE_REPORT_SEARCHED": str(searched),
            "QUIRE_FIRST_SEARCH": QUERY,
        }
    )
    errors = data_dir.parent / "coldstart-stderr.txt"  # a file, not a pipe: an unread pipe that fills blocks the app
    load = round(os.getloadavg()[0], 2)
    with errors.open("w") as stderr:
        started = time.time()
        proc = subprocess.Popen(argv, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not (searched.exists() and searched.read_text().count("\n") >= 2):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the app showed no first answer: {errors.read_text()[-2000:]}")
                time.sleep(0.005)
        finally:
            _end_with_children(proc)
    times = dict(line.split(" ", 1) for line in searched.read_text().splitlines())
    answered, hits = times["shown"].split()
    return {
        "window_shown_s": round(float(shown.read_text().split()[0]) - started, 3),
        "search_asked_s": round(float(times["asked"]) - started, 3),
        "first_answer_s": round(float(answered) - started, 3),
        "hits": int(hits),
        "load_1m": load,
    }


def _end_with_children(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the app (it closes as on Ctrl-C), then wait for it and for every process it started (its
    worker, its query process): a launch must not run beside the previous one's shutdown."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _gone, alive = psutil.wait_procs(children, timeout=60)
    for child in alive:
        child.kill()
    psutil.wait_procs(alive, timeout=10)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": runs}
    for key in ("window_shown_s", "search_asked_s", "first_answer_s"):
        values = [r[key] for r in runs]
        out[key] = {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}
    return out


def run(quick: bool) -> Result:
    return run_benchmark("coldstart", quick, lambda result: _run(result, quick, None))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="25,000 chunks")
    parser.add_argument("--before", type=Path, help="source tree of the earlier code, launched in turn with this")
    args = parser.parse_args(argv)
    run_benchmark("coldstart", args.quick, lambda result: _run(result, args.quick, args.before))
    return 0


def _run(result: Result, quick: bool, before: Path | None) -> None:
    data_dir, synth = synthetic_base(quick)
    result.data["synthetic_base"] = synth
    launched = apps(before)
    result.data["app"] = {label: app for label, (_code, app) in launched.items()}
    result.data["query"] = QUERY
    if "packaged" in launched:
        result.data["packaged_built_at"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(PACKAGED.stat().st_mtime))
    for code, app in launched.values():
        launch(code, data_dir, app)  # untimed: the base's files into the page cache, the model converted once
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in launched}
    for n in range(LAUNCHES):
        for label, (code, app) in launched.items():
            runs[label].append(launch(code, data_dir, app))
            log(f"launch {n + 1} {label}: {runs[label][-1]}")
    for label in launched:
        result.data[label] = summary(runs[label])
    size = f"{synth['chunks']:,} chunks"
    result.targets.append(
        target(
            f"launch to the first hybrid answer, {size} (median of {LAUNCHES})",
            result.data["after"]["first_answer_s"]["median"],
            at_most=2.0,
            unit="s",
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
