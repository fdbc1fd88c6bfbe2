"""Ingest of SciFact through the real path, against the model's own fp32 encode limit on the same chunks.

Everything runs in real processes, exactly as a user would run it:

1. **bf16 base** (the default precision on a CPU with AMX/AVX-512 BF16): ``quire base create``,
   ``quire add BASE DOCS`` (the root folder), ``quire worker --until-idle``. Wall time from the ``add``
   to the worker's exit, process start-ups and model load included; the worker's RSS sampled (psutil).
2. **raw fp32 encode**, right after, on the very chunk texts the ingest wrote (read back from the DB):
   plain ``SentenceTransformer.encode(batch_size=32)`` as every peer does it (``raw_encode.py``).
   The headline is ingest chunks/s ÷ raw fp32 chunks/s, both measured in this run.
3. **fp32 base** through the same path (its nDCG is compared with the bf16 base's in ``bench_quality``).
4. **folder runs**: a third data directory, one run per sub-folder (≤ 200 files each), all started by one
   ``quire run start BASE PART…`` (as ``quire add`` is one process), then the worker.
5. **re-ingest, unchanged**: ``quire reindex BASE ROOT`` + worker (re-expansion keeps unchanged files
   without reading them); and the folder runs again (``run preview`` finds everything covered, ``run
   start`` + worker settle every source ``already_covered``).
6. **5 % changed**: one sentence appended to 5 % of the files, ``quire reindex`` of the root + worker;
   then the originals are put back and reindexed again (so later benchmarks search the original corpus).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from knowledge.ingest.embedding import cpu_lists_bf16
from tests.benchmarks import corpus
from tests.benchmarks.common import (
    REPO,
    Result,
    child_env,
    db_rows,
    log,
    python_module,
    quire,
    quire_argv,
    quire_json,
    run_benchmark,
    run_sampled,
    target,
    work_dir,
)

BASE = "scifact"
CHANGED_SHARE = 0.05


def area(quick: bool) -> Path:
    path = work_dir() / ("quick" if quick else "full")
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path(quick: bool) -> Path:
    return area(quick) / "state.json"


def load_state(quick: bool) -> dict[str, Any] | None:
    path = state_path(quick)
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    for key in ("bf16", "fp32"):
        entry = state.get(key)
        if entry is None or not Path(entry["data_dir"], "quire.sqlite3").exists():
            return None
    return state


def base_stats(data_dir: Path, base: str = BASE) -> dict[str, Any]:
    """Completed documents, their chunks and content tokens, and the job window (first start → last end)."""
    (base_id,) = db_rows(data_dir, "SELECT id FROM bases WHERE name = ?", (base,))[0]
    docs, failed = db_rows(
        data_dir,
        "SELECT sum(status = 'completed'), sum(status = 'failed') FROM items WHERE base_id = ? AND type = 'file'",
        (base_id,),
    )[0]
    chunks, tokens = db_rows(
        data_dir,
        "SELECT count(*), coalesce(sum(c.token_count), 0) FROM chunks c JOIN items i ON i.id = c.item_id "
        "WHERE c.base_id = ? AND i.status = 'completed'",
        (base_id,),
    )[0]
    return {
        "base_id": base_id,
        "documents": int(docs or 0),
        "failed": int(failed or 0),
        "chunks": int(chunks),
        "content_tokens": int(tokens),
    }


def job_summary(data_dir: Path, after_id: int) -> dict[str, Any]:
    """What the jobs with id > after_id did: counts by type, the job window, summed result counters."""
    rows = db_rows(
        data_dir,
        "SELECT type, status, started_at, finished_at, result FROM jobs WHERE id > ? ORDER BY id",
        (after_id,),
    )
    by_type: dict[str, int] = {}
    totals: dict[str, float] = {}
    seconds_by_type: dict[str, float] = {}
    starts, ends = [], []
    for jtype, status, started, finished, result in rows:
        by_type[f"{jtype}:{status}"] = by_type.get(f"{jtype}:{status}", 0) + 1
        if started:
            starts.append(started)
        if finished:
            ends.append(finished)
        if started and finished:
            seconds_by_type[jtype] = seconds_by_type.get(jtype, 0.0) + finished - started
        for key, value in (json.loads(result) if result else {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    window = round(max(ends) - min(starts), 3) if starts and ends else None
    return {
        "jobs": by_type,
        "job_window_seconds": window,
        "job_seconds_by_type": {k: round(v, 3) for k, v in seconds_by_type.items()},
        "totals": {k: round(v, 3) if isinstance(v, float) else v for k, v in totals.items()},
    }


def breakdown(ingest: dict[str, Any]) -> dict[str, float]:
    """Where an ingest's wall time went: start-up (processes, recovery; outside every job), the walk (the
    folder's prepare jobs), and the index jobs' own stages (read, parse, chunk, encode — the first one
    waits for the model if it is still loading —, write). An index job encodes on the encoder's thread
    while its own thread writes and prepares the batches around it, so ``encode`` overlaps the others;
    ``encode_exposed`` is the part of it the job's thread waited for (what nothing overlapped). ``other``
    is the rest of the job time (claims, status writes, progress)."""
    totals, by_type = ingest["totals"], ingest["job_seconds_by_type"]
    window = ingest["job_window_seconds"] or 0.0
    stages = {name: float(totals.get(f"seconds_{name}", 0.0)) for name in ("read", "parse", "chunk", "encode", "write")}
    exposed = float(totals.get("seconds_wait_encode", stages["encode"]))
    walk = sum(v for k, v in by_type.items() if k != "knowledge.index-documents")
    index = float(by_type.get("knowledge.index-documents", 0.0))
    on_job_thread = exposed + sum(v for k, v in stages.items() if k != "encode")
    parts = {
        "start_up": ingest["wall_seconds"] - window,
        "walk": walk,
        **stages,
        "encode_exposed": exposed,
        "other": index - on_job_thread,
    }
    return {k: round(v, 2) for k, v in parts.items()}


def last_job_id(data_dir: Path) -> int:
    return int(db_rows(data_dir, "SELECT coalesce(max(id), 0) FROM jobs")[0][0])


def run_worker(data_dir: Path) -> tuple[float, float, dict[str, Any]]:
    """``quire worker --until-idle`` to its end: (seconds, peak RSS MB, its JSON output)."""
    measured = run_sampled(quire_argv(data_dir, "worker", "--until-idle", "--json"))
    return measured.seconds, measured.peak_rss_mb, json.loads(measured.stdout.strip().splitlines()[-1])


def create_base(data_dir: Path, precision: str, backend: str = "auto") -> dict[str, Any]:
    args = ("--precision", precision, "--backend", backend)
    created: dict[str, Any] = quire_json(data_dir, "base", "create", BASE, *args)
    return created


def convert_model() -> dict[str, Any]:
    """The OpenVINO backend's one-time conversion of the packaged model (per machine, model and OpenVINO
    version), timed from an empty cache in its own process; every ingest after it reads the cached IR."""
    import shutil

    cache = Path(child_env()["QUIRE_CACHE_DIR"]) / "openvino"
    shutil.rmtree(cache, ignore_errors=True)
    code = (
        "import time; t = time.perf_counter(); from knowledge.ingest.embedding import default_model_spec; "
        "from knowledge.ingest.openvino_backend import model_ir; model_ir(default_model_spec()); "
        "print(round(time.perf_counter() - t, 2))"
    )
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the OpenVINO conversion failed: {done.stderr[-2000:]}")
    return {
        "process_seconds": round(time.perf_counter() - t0, 2),
        "convert_seconds": float(done.stdout.strip().splitlines()[-1]),
        "ir_mb": round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6, 1),
    }


def ingest_add(
    data_dir: Path, docs: Path, precision: str, backend: str = "auto", create_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """base create, then add + worker timed as one: what a user waits for. ``create_args`` replace the
    precision and backend given to ``base create`` (e.g. ``("--multilingual",)``)."""
    if create_args:
        base: dict[str, Any] = quire_json(data_dir, "base", "create", BASE, *create_args)
    else:
        base = create_base(data_dir, precision, backend)
    t0 = time.perf_counter()
    added = quire_json(data_dir, "add", BASE, str(docs))
    add_seconds = time.perf_counter() - t0
    worker_seconds, rss, output = run_worker(data_dir)
    wall = time.perf_counter() - t0
    stats = base_stats(data_dir)
    return {
        "data_dir": str(data_dir),
        "precision": base["precision"],
        "backend": base["backend"],
        "root_id": added["created"][0],
        "wall_seconds": round(wall, 2),
        "add_seconds": round(add_seconds, 2),
        "worker_seconds": round(worker_seconds, 2),
        "worker_peak_rss_mb": rss,
        "worker_output": output,
        **stats,
        **rates(stats, wall),
        **job_summary(data_dir, 0),
    }


def rates(stats: dict[str, Any], seconds: float) -> dict[str, float]:
    return {
        "docs_per_s": round(stats["documents"] / seconds, 2),
        "chunks_per_s": round(stats["chunks"] / seconds, 2),
        "tokens_per_s": round(stats["content_tokens"] / seconds, 1),
    }


def reindex_root(data_dir: Path, root_id: int) -> dict[str, Any]:
    before = last_job_id(data_dir)
    t0 = time.perf_counter()
    quire(data_dir, "reindex", BASE, str(root_id))
    worker_seconds, rss, _output = run_worker(data_dir)
    wall = time.perf_counter() - t0
    return {
        "wall_seconds": round(wall, 3),
        "worker_seconds": round(worker_seconds, 3),
        "worker_peak_rss_mb": rss,
        **job_summary(data_dir, before),
    }


def folder_runs_ingest(data_dir: Path, parts: list[Path]) -> dict[str, Any]:
    create_base(data_dir, "auto")
    t0 = time.perf_counter()
    quire(data_dir, "run", "start", BASE, *map(str, parts))  # one run per sub-folder, from one process
    start_seconds = time.perf_counter() - t0
    worker_seconds, rss, _output = run_worker(data_dir)
    wall = time.perf_counter() - t0
    stats = base_stats(data_dir)
    return {
        "data_dir": str(data_dir),
        "runs": len(parts),
        "wall_seconds": round(wall, 2),
        "run_start_seconds": round(start_seconds, 2),
        "worker_seconds": round(worker_seconds, 2),
        "worker_peak_rss_mb": rss,
        **stats,
        **rates(stats, wall),
        **job_summary(data_dir, 0),
    }


def folder_runs_again(data_dir: Path, parts: list[Path]) -> dict[str, Any]:
    before = last_job_id(data_dir)
    t0 = time.perf_counter()
    eligible = covered = 0
    for part in parts:
        preview = quire_json(data_dir, "run", "preview", BASE, str(part))
        eligible += len(preview["eligible"])
        covered += sum(1 for e in preview["ineligible"] if "already in the knowledge base" in (e.get("reason") or ""))
    preview_seconds = time.perf_counter() - t0
    quire(data_dir, "run", "start", BASE, *map(str, parts))
    worker_seconds, _rss, _output = run_worker(data_dir)
    wall = time.perf_counter() - t0
    return {
        "wall_seconds": round(wall, 2),
        "preview_seconds": round(preview_seconds, 2),
        "worker_seconds": round(worker_seconds, 2),
        "preview_eligible": eligible,
        "preview_already_covered": covered,
        **job_summary(data_dir, before),
    }


def change_files(files: list[Path], share: float, seed: int = 6) -> dict[Path, str]:
    """Append a sentence to ``share`` of the files; return their original texts."""
    chosen = random.Random(seed).sample(files, max(1, round(len(files) * share)))
    originals: dict[Path, str] = {}
    for path in chosen:
        originals[path] = path.read_text(encoding="utf-8")
        path.write_text(originals[path] + " This abstract was revised after review.", encoding="utf-8")
    return originals


def chunks_of(data_dir: Path, names: list[str]) -> int:
    total = 0
    for start in range(0, len(names), 500):
        part = names[start : start + 500]
        marks = ",".join("?" * len(part))
        total += int(
            db_rows(data_dir, f"SELECT coalesce(sum(chunk_count), 0) FROM items WHERE name IN ({marks})", part)[0][0]
        )
    return total


def raw_encode(data_dir: Path, precision: str) -> dict[str, Any]:
    from app.cli.commands_core import WORKER_NICENESS

    result: dict[str, Any] = python_module(
        "tests.benchmarks.raw_encode", str(data_dir), BASE, "--precision", precision, "--nice", str(WORKER_NICENESS)
    )
    return result


def setup_bases(quick: bool, docs: Path | None = None) -> dict[str, Any]:
    """The bf16 and fp32 SciFact bases the quality and latency benchmarks search (ingested if missing)."""
    state = load_state(quick)
    if state is not None:
        return state
    data = corpus.load(quick)
    root = area(quick)
    docs = docs or root / "docs"
    corpus.write_tree(data, docs)
    state = {"docs_dir": str(docs), "documents": len(data.docs)}
    for key, precision in (("bf16", "auto"), ("fp32", "fp32")):
        data_dir = fresh(root / f"data-{key}")
        log(f"ingesting SciFact ({len(data.docs)} docs) into a {precision} base")
        state[key] = ingest_add(data_dir, docs, precision)
    state_path(quick).write_text(json.dumps(state, indent=2))
    return state


SMALL_DOCS_PER_FILE = 50  # 30 files, ~2,500 chunks


def small_folder(root: Path, data: corpus.SciFact) -> dict[str, Any]:
    """The folders people add most often: ~2,500 chunks, where start-up and model load weigh most."""
    folder = root / "small-folder"
    corpus.write_small_folder(data, folder, min(SMALL_DOCS_PER_FILE, len(data.docs) // corpus.SMALL_FOLDER_FILES))
    ingest = ingest_add(fresh(root / "data-small"), folder, "auto")
    raw = raw_encode(Path(ingest["data_dir"]), "fp32")
    # The same folder on torch bf16 (the default before OpenVINO), for the before/after in one run.
    on_torch = ingest_add(fresh(root / "data-small-torch"), folder, "auto", "torch")
    return {
        "ingest": ingest,
        "raw_fp32": raw,
        "ratio": round(ingest["chunks_per_s"] / raw["chunks_per_s"], 3),
        "breakdown": breakdown(ingest),
        "torch": on_torch,
        "torch_ratio": round(on_torch["chunks_per_s"] / raw["chunks_per_s"], 3),
        "torch_breakdown": breakdown(on_torch),
    }


def fresh(path: Path) -> Path:
    import shutil

    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def run(quick: bool) -> Result:
    root = area(quick)
    data = corpus.load(quick)
    state_path(quick).unlink(missing_ok=True)
    return run_benchmark("ingest", quick, lambda result: _run(result, root, data, root / "docs", quick))


def _run(result: Result, root: Path, data: corpus.SciFact, docs: Path, quick: bool) -> None:
    r = result.data
    parts = corpus.write_tree(data, docs)
    files = corpus.doc_files(docs)
    r["corpus"] = {"documents": len(files), "sub_folders": len(parts), "per_folder": corpus.PER_FOLDER}

    log("0. the OpenVINO backend's one-time conversion of the model (empty cache)")
    r["openvino_conversion"] = convert_model()
    log(f"   {r['openvino_conversion']}")

    log(f"1. bf16 ingest of {len(files)} documents (add + worker)")
    bf16 = ingest_add(fresh(root / "data-bf16"), docs, "auto")
    r["bf16"] = bf16
    log(
        f"   {bf16['chunks']} chunks in {bf16['wall_seconds']} s: {bf16['chunks_per_s']} chunks/s ({bf16['precision']})"
    )

    log("2. raw SentenceTransformer.encode fp32 (batch 32) on the same chunks")
    raw32 = raw_encode(Path(bf16["data_dir"]), "fp32")
    r["raw_fp32"] = raw32
    log(f"   {raw32['chunks_per_s']} chunks/s")
    ratio = bf16["chunks_per_s"] / raw32["chunks_per_s"]
    r["headline_ratio"] = round(ratio, 3)

    log("3. fp32 ingest (same path)")
    fp32 = ingest_add(fresh(root / "data-fp32"), docs, "fp32")
    r["fp32"] = fp32
    r["fp32_pipeline_over_raw_fp32"] = round(fp32["chunks_per_s"] / raw32["chunks_per_s"], 3)
    log(f"   {fp32['chunks_per_s']} chunks/s")
    # Without a bf16 unit torch emulates bf16, several times slower than fp32: a reference that says nothing and
    # took over half an hour on such a CPU.
    if not quick and cpu_lists_bf16():
        log("   raw SentenceTransformer.encode bf16 (batch 32), for reference")
        r["raw_bf16"] = raw_encode(Path(bf16["data_dir"]), "bf16")
    state = {"docs_dir": str(docs), "documents": len(files), "bf16": bf16, "fp32": fp32}
    state_path(quick).write_text(json.dumps(state, indent=2))

    log("4. folder runs, one per sub-folder")
    runs = folder_runs_ingest(fresh(root / "data-runs"), parts)
    r["folder_runs"] = runs
    log(f"   {runs['chunks_per_s']} chunks/s over {len(parts)} runs")

    r["folder_runs_over_add"] = round(runs["chunks_per_s"] / bf16["chunks_per_s"], 3)

    log(f"4b. a small folder ({corpus.SMALL_FOLDER_FILES} Markdown files), add + worker, against raw fp32")
    small = small_folder(root, data)
    r["small_folder"] = small
    log(f"   {small['ingest']['chunks']} chunks: {small['ratio']}x raw fp32; {small['breakdown']}")

    log("5. re-ingest of the unchanged folder (reindex of the root)")
    bf16_dir = Path(bf16["data_dir"])
    same = reindex_root(bf16_dir, bf16["root_id"])
    same["speedup_vs_first_ingest"] = round(bf16["wall_seconds"] / same["wall_seconds"], 1)
    r["reingest_unchanged"] = same
    log(f"   {same['wall_seconds']} s ({same['speedup_vs_first_ingest']}x faster)")
    log("   folder runs again (previews find everything covered)")
    again = folder_runs_again(Path(runs["data_dir"]), parts)
    again["speedup_vs_first_ingest"] = round(runs["wall_seconds"] / again["wall_seconds"], 1)
    r["folder_runs_again"] = again

    log("6. 5 % of the files changed, reindex of the root")
    originals = change_files(files, CHANGED_SHARE)
    names = [p.name for p in originals]
    changed_chunks_before = chunks_of(bf16_dir, names)
    changed = reindex_root(bf16_dir, bf16["root_id"])
    changed["files_changed"] = len(originals)
    changed["chunks_of_changed_files_before"] = changed_chunks_before
    changed["chunks_of_changed_files_after"] = chunks_of(bf16_dir, names)
    changed["share_of_first_ingest_time"] = round(changed["wall_seconds"] / bf16["wall_seconds"], 4)
    r["reingest_5pct_changed"] = changed
    log(
        f"   {changed['wall_seconds']} s = {changed['share_of_first_ingest_time']:.1%} of the first ingest; "
        f"embedded {changed['totals'].get('embedded')} chunks"
    )
    for path, text in originals.items():
        path.write_text(text, encoding="utf-8")
    r["restore_originals"] = reindex_root(bf16_dir, bf16["root_id"])
    r["bf16_after_restore"] = base_stats(bf16_dir)

    r["bf16_breakdown"] = breakdown(bf16)
    result.targets += [
        target(
            "worker peak RSS (worker + parse process) during the bf16 SciFact ingest",
            bf16["worker_peak_rss_mb"],
            at_most=1000,
            unit="MB",
        ),
        target("ingest chunks/s ÷ raw fp32 encode chunks/s (same chunks, same run)", ratio, at_least=2.4, unit="x"),
        target(
            f"small folder ({small['ingest']['chunks']:,} chunks): ingest ÷ raw fp32 encode, end to end",
            small["ratio"],
            at_least=2.0,
            unit="x",
        ),
        target(
            "folder runs chunks/s ÷ `quire add` chunks/s (same corpus, same run)",
            r["folder_runs_over_add"],
            at_least=0.95,
            unit="x",
            note="as fast as a plain add, within 5 % noise",
        ),
        target(
            "re-ingest of the unchanged folder: speed-up over the first ingest",
            same["speedup_vs_first_ingest"],
            at_least=50,
            unit="x",
        ),
        target(
            "after 5 % changed: share of the first ingest's wall time",
            changed["share_of_first_ingest_time"],
            at_most=2 * CHANGED_SHARE,
            unit="",
            note="proportional to the change: at most twice the changed share",
        ),
        target(
            "after 5 % changed: chunks embedded ≤ chunks of the changed files",
            changed["totals"].get("embedded", 0) / max(1, changed["chunks_of_changed_files_after"]),
            at_most=1.0,
            unit="ratio",
        ),
    ]
