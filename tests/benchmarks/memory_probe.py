"""Where the ingest worker's memory goes: RSS by stage and peak RSS while encoding SciFact chunks.

``python -m tests.benchmarks.memory_probe [--chunks N] [--out FILE]`` runs every variant below in a fresh
process of its own (environment settings such as ``MALLOC_ARENA_MAX`` must be in place before torch
loads), one after the other, and writes one JSON document (default
``tests/benchmarks/results/memory.json``). Each variant process reports its RSS (``/proc/self/status``
VmRSS) after the SciFact chunks are made, after ``import torch``, after ``import sentence_transformers``
and after the model is loaded, then its peak RSS (VmHWM) while encoding the chunks with the real
:class:`knowledge.ingest.embedding.Encoder` (bf16), its chunks/s and its RSS after ``malloc_trim(0)``.
Throughput on a shared machine drifts with load: compare variants of one run (the load average is
recorded beside each), never across runs.

``python -m tests.benchmarks.memory_probe one VARIANT --chunks N`` runs one variant in this process and
prints its JSON line; ``parse-child`` measures the parse process alone (RSS after it parsed SciFact
documents, and what a process that imports what it imports weighs).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "tests" / "benchmarks" / "results"

# name -> (encoder options, extra environment). "before" is the encoder as it was: ST's own encode,
# each batch padded to its longest text only.
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "before": ({"via_st": True, "pad_multiple": 1}, {}),
    "before+primitive-cache-0": ({"via_st": True, "pad_multiple": 1}, {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}),
    "before+arena-2": ({"via_st": True, "pad_multiple": 1}, {"MALLOC_ARENA_MAX": "2"}),
    "direct-pad1": ({"pad_multiple": 1}, {}),
    "direct-pad16": ({"pad_multiple": 16}, {}),
    "direct-pad32": ({"pad_multiple": 32}, {}),
    "direct-pad32+arena-2": ({"pad_multiple": 32}, {"MALLOC_ARENA_MAX": "2"}),
    "direct-pad32+tokens-4096": ({"pad_multiple": 32, "batch_tokens": 4096}, {}),
    "direct-pad32+trim": ({"pad_multiple": 32, "trim_memory": True}, {}),
    "direct-pad32+trim+arena-2": ({"pad_multiple": 32, "trim_memory": True}, {"MALLOC_ARENA_MAX": "2"}),
    "before+trim": ({"via_st": True, "pad_multiple": 1, "trim_memory": True}, {}),
}


def rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def scifact_chunks(limit: int) -> list[str]:
    """The first ``limit`` chunks of SciFact documents in corpus order, chunked as a default base does."""
    from knowledge.ingest.chunking import chunk_text, load_tokenizer
    from knowledge.library.bases import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
    from tests.benchmarks.common import scifact_dir

    tokenizer = load_tokenizer()
    texts: list[str] = []
    with (scifact_dir() / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            body = f"{doc.get('title', '')}\n\n{doc.get('text', '')}"
            chunks = chunk_text(body, tokenizer, max_tokens=DEFAULT_CHUNK_SIZE, overlap=DEFAULT_CHUNK_OVERLAP)
            texts.extend(c.text for c in chunks)
            if len(texts) >= limit:
                break
    return texts[:limit]


def run_one(name: str, chunks: int, precision: str) -> dict[str, Any]:
    options, _env = VARIANTS[name]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    stages: dict[str, float] = {"start": rss_mb()}
    texts = scifact_chunks(chunks)
    stages["chunks_made"] = rss_mb()
    import torch

    stages["import_torch"] = rss_mb()
    import sentence_transformers  # noqa: F401  (what the model load imports: measured on its own)

    stages["import_sentence_transformers"] = rss_mb()
    from knowledge.ingest import embedding

    if options.get("via_st"):
        embedding._mean_pooled_transformer = lambda model: None  # type: ignore[assignment]
    encoder = embedding.Encoder(
        embedding.default_model_spec(),
        precision=precision,
        batch_tokens=options.get("batch_tokens", embedding.DEFAULT_BATCH_TOKENS),
        pad_multiple=options["pad_multiple"],
        trim_memory=options.get("trim_memory", False),
    )
    trims: list[float] = []
    release = embedding.release_free_memory

    def timed_release() -> None:
        t = time.perf_counter()
        release()
        trims.append(time.perf_counter() - t)

    embedding.release_free_memory = timed_release  # type: ignore[assignment]
    encoder.encode_documents(["warm up"])
    stages["model_loaded"] = rss_mb()
    stages["peak_before_encode"] = rss_mb("VmHWM")
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    vectors = encoder.encode_documents(texts)
    seconds = time.perf_counter() - t0
    stages["after_encode"] = rss_mb()
    stages["peak_encode"] = rss_mb("VmHWM")
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    stages["after_malloc_trim"] = rss_mb()
    return {
        "variant": name,
        "options": options,
        "env": VARIANTS[name][1],
        "precision": encoder.precision,
        "torch_threads": torch.get_num_threads(),
        "chunks": len(texts),
        "batches": encoder.calls,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(len(texts) / seconds, 2),
        "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "rss_mb": stages,
        "malloc_trim_ms": {"calls": len(trims), "total": round(sum(trims) * 1000, 1)},
        "vector_checksum": round(float(vectors.sum()), 3),
    }


_CHILD_IMPORTS = (
    "import jobs.sanitize, knowledge.sources, knowledge.ingest.parse_worker; "
    "from knowledge.sources import parse_bytes; parse_bytes(b'hello world', name='a.txt', max_bytes=100); "
    "import json, sys; "
    "print(json.dumps({'modules': len(sys.modules), 'heavy': sorted({m.split('.')[0] for m in sys.modules} "
    "& {'torch', 'sentence_transformers', 'transformers', 'numpy', 'sqlalchemy', 'pypdfium2', 'tesserocr', "
    "'PIL', 'apsw', 'huey'})}))"
)


def parse_child(docs: int) -> dict[str, Any]:
    """RSS of a real parse process after parsing SciFact documents, and what its imports pull in."""
    import psutil

    from knowledge.ingest.parse_worker import ParseLimits, ParseWorker
    from tests.benchmarks.common import scifact_dir

    requests = []
    with (scifact_dir() / "corpus.jsonl").open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= docs:
                break
            doc = json.loads(line)
            body = f"{doc.get('title', '')}\n\n{doc.get('text', '')}".encode()
            requests.append((f"{doc['_id']}.txt", body, 10_000_000, "eng"))
    worker = ParseWorker(ParseLimits())
    try:
        worker.parse_many(requests)
        assert worker.pid is not None
        child_rss = round(psutil.Process(worker.pid).memory_info().rss / 2**20, 1)
    finally:
        worker.close()
    imports = subprocess.run(
        [sys.executable, "-c", _CHILD_IMPORTS], cwd=REPO, capture_output=True, text=True, check=True
    )
    return {"documents": docs, "child_rss_mb": child_rss, **json.loads(imports.stdout.strip().splitlines()[-1])}


class _AnsweredElsewhere:
    """Stands in for a query encoder running in another process: answers a fixed unit vector, loads
    nothing. Only for measuring what the window would weigh without torch (``--encoder-elsewhere``)."""

    def __init__(self, dimension: int) -> None:
        import numpy as np

        self.vector = np.full(dimension, dimension**-0.5, dtype=np.float32)

    def encode_query(self, _text: str) -> Any:
        return self.vector


def window(data_dir: Path, base_name: str, query: str, preload: bool, elsewhere: bool) -> dict[str, Any]:
    """RSS of the window's own process (offscreen, no worker) by stage, around one search from its panel;
    the first search's time (asked from the panel to its hits shown) and the main thread's lateness (a 10 ms
    heartbeat, ``app_probe.WorkBeat``) from the window's start to those hits, with the main thread's own
    CPU time between ticks (on a machine busier than its cores, lateness includes waiting for a core).

    With ``preload`` torch and sentence-transformers are imported as stages of their own before the
    search, so the breakdown can tell the libraries, the model and the vector index apart. With
    ``elsewhere`` the query encoder is a stand-in that loads nothing (what the window would weigh if
    queries were encoded in another process); its hits are not meaningful.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    stages: dict[str, float] = {"start": rss_mb()}
    from PySide6.QtWidgets import QApplication  # noqa: F401, TID251  (drives the real window)

    stages["import_qt"] = rss_mb()
    from app.main import make_application
    from app.prompts import YesPrompter
    from app.window import MainWindow

    stages["import_app"] = rss_mb()
    app = make_application()
    if elsewhere:
        from knowledge.runtime import Quire

        Quire.query_encoder = lambda self, model_id, precision, embedder=None: _AnsweredElsewhere(384)  # type: ignore[method-assign,assignment]
    from tests.benchmarks.app_probe import WorkBeat

    win = MainWindow(data_dir, prompter=YesPrompter(), start_worker=False, poll_ms=500)
    win.show()
    beat = WorkBeat()  # the main thread's lateness (and own CPU time) from the window's start to the hits
    beat.start()
    state: dict[str, Any] = {"hits": None}

    def begin(_result: object) -> None:
        print("window started", file=sys.stderr)
        stages["window_started"] = rss_mb()
        base = next(b for b in win.ctx.bases if b.name == base_name)
        win.ctx.select_base(base)
        if preload:
            import torch  # noqa: F401

            stages["import_torch"] = rss_mb()
            import sentence_transformers  # noqa: F401

            stages["import_sentence_transformers"] = rss_mb()
        panel = win.search_panel
        panel.searched.connect(lambda hits: done(hits, base))
        panel.query.setText(query)
        state["searched_at"] = time.perf_counter()
        panel.run_search()

    def done(hits: list[Any], base: Any) -> None:
        state["first_search_ms"] = round((time.perf_counter() - state["searched_at"]) * 1000, 1)
        beat.stop()
        held = win.ctx.quire.vectors._held.get(base.id) if win.ctx.quire is not None else None
        segments = held.segments if held is not None else ()
        state["hits"], state["chunks_held"] = hits, sum(len(s.ids) for s in segments)
        state["index_mb"] = sum(s.ids.nbytes + s.bits.nbytes + s.vectors.nbytes for s in segments) / 2**20
        if held is not None and held.exact is not None:
            state["index_mb"] += sum(a.nbytes for a in held.exact) / 2**20
        app.quit()

    def failed(kind: str, message: str) -> None:
        if kind == "error":
            state["error"] = message
            app.quit()

    win.ctx.message.connect(failed)
    win.started.connect(begin)
    win.start()
    app.exec()
    if "error" in state:
        raise RuntimeError(state["error"])
    stages["after_search"] = rss_mb()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    stages["after_malloc_trim"] = rss_mb()
    heavy = {"torch", "sentence_transformers", "transformers", "sqlalchemy", "PySide6", "sklearn", "scipy"}
    return {
        "data_dir": str(data_dir),
        "chunks_held": state.get("chunks_held", 0),
        "vector_index_mb": round(state.get("index_mb", 0.0), 1),
        "hits": len(state["hits"] or []),
        "first_search_ms": state.get("first_search_ms"),
        "main_thread_lateness": beat.summary(),
        "main_thread_work_ms": _work_summary(beat.work),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "rss_mb": stages,
        "peak_rss_mb": rss_mb("VmHWM"),
        "imported": sorted({m.split(".")[0] for m in sys.modules} & heavy),
    }


def _work_summary(work: list[float]) -> dict[str, float]:
    """The main thread's own CPU time between two ticks: what it did, apart from waiting for a core or the GIL."""
    values = sorted(work) or [0.0]
    return {
        "max": round(values[-1] * 1000, 2),
        "p99": round(values[min(len(values) - 1, int(0.99 * (len(values) - 1) + 0.5))] * 1000, 2),
    }


def worker_ingest(code_dir: Path, docs: Path, data_dir: Path, precision: str) -> dict[str, Any]:
    """A real ingest: ``quire base create``, ``quire add``, ``quire worker --until-idle --threads 1``, run
    from ``code_dir`` (a checkout: the one before a change, or this one), sampling every 0.2 s the
    worker's RSS and its children's (the parse process) apart, as ``common.run_sampled`` sums them."""
    import shutil

    import psutil

    if data_dir.exists():
        shutil.rmtree(data_dir)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    cli = [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir)]
    for args in (["base", "create", "bench", "--precision", precision], ["add", "bench", str(docs)]):
        subprocess.run(cli + args, cwd=code_dir, env=env, check=True, capture_output=True)
    peaks = {"worker": 0, "children": 0, "sum": 0}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cli, "worker", "--until-idle", "--threads", "1"], cwd=code_dir, env=env, stdout=subprocess.DEVNULL
    )
    ps = psutil.Process(proc.pid)
    loads = []
    while proc.poll() is None:
        try:
            own = ps.memory_info().rss
            kids = sum(c.memory_info().rss for c in ps.children(recursive=True))
        except psutil.Error:
            continue
        peaks = {
            "worker": max(peaks["worker"], own),
            "children": max(peaks["children"], kids),
            "sum": max(peaks["sum"], own + kids),
        }
        loads.append(os.getloadavg()[0])
        time.sleep(0.2)
    seconds = time.perf_counter() - t0
    chunks = subprocess.run(
        [*cli, "--json", "base", "show", "bench"], cwd=code_dir, env=env, capture_output=True, text=True
    )
    return {
        "code_dir": str(code_dir),
        "precision": precision,
        "worker_seconds": round(seconds, 2),
        "peak_rss_mb": {k: round(v / 2**20, 1) for k, v in peaks.items()},
        "loadavg_1m": {"mean": round(sum(loads) / max(1, len(loads)), 2), "max": round(max(loads, default=0), 2)},
        "base": json.loads(chunks.stdout) if chunks.returncode == 0 else chunks.stderr[-500:],
    }


def query_latency(precision: str, rounds: int) -> dict[str, Any]:
    """p50/p95 ms of ``encode_query`` on SciFact training queries: in this process vs in a child process,
    interleaved query by query so both see the same load."""
    from knowledge.ingest.embedding import QueryEncoder, default_model_spec
    from knowledge.ingest.query_process import QueryEncoderProcess
    from tests.benchmarks import corpus
    from tests.benchmarks.common import percentile

    queries = [text for _qid, text in corpus.load().queries][:rounds]
    spec = default_model_spec()
    local, child = QueryEncoder(spec, precision=precision), QueryEncoderProcess(spec, precision=precision)
    local.encode_query("warm up"), child.encode_query("warm up")
    times: dict[str, list[float]] = {"in_process": [], "child_process": []}
    try:
        for text in queries:
            for name, encoder in (("in_process", local), ("child_process", child)):
                t0 = time.perf_counter()
                encoder.encode_query(text)
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        child.close()
    return {
        "precision": precision,
        "queries": len(queries),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        **{n: {"p50_ms": round(percentile(v, 50), 2), "p95_ms": round(percentile(v, 95), 2)} for n, v in times.items()},
    }


def run_all(names: list[str], chunks: int, precision: str, out: Path) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for name in names:
        env = {**os.environ, **VARIANTS[name][1], "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
        argv = [sys.executable, "-m", "tests.benchmarks.memory_probe", "one", name, "--chunks", str(chunks)]
        argv += ["--precision", precision]
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed: {done.stderr[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr)
    report = {
        "benchmark": "memory",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(),
        "variants": results,
        "parse_child": parse_child(200),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "mode",
        nargs="?",
        default="all",
        choices=("all", "one", "parse-child", "window", "worker", "query-latency"),
    )
    parser.add_argument("variant", nargs="*", help="variants to run (default: all of them)")
    parser.add_argument("--chunks", type=int, default=3000)
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--out", type=Path, default=RESULTS / "memory.json")
    parser.add_argument("--query", default="ALDH1 expression is associated with poorer prognosis for breast cancer")
    parser.add_argument("--preload", action="store_true", help="window: import torch and ST as stages first")
    parser.add_argument("--encoder-elsewhere", action="store_true", help="window: a stand-in query encoder")
    args = parser.parse_args()
    if args.mode == "one":
        print(json.dumps(run_one(args.variant[0], args.chunks, args.precision)))
    elif args.mode == "window":  # window DATA_DIR BASE
        print(
            json.dumps(window(Path(args.variant[0]), args.variant[1], args.query, args.preload, args.encoder_elsewhere))
        )
    elif args.mode == "worker":  # worker CODE_DIR DOCS DATA_DIR
        code_dir, docs, data_dir = (Path(v) for v in args.variant)
        print(json.dumps(worker_ingest(code_dir, docs, data_dir, args.precision)))
    elif args.mode == "query-latency":
        print(json.dumps(query_latency(args.precision, 200)))
    elif args.mode == "parse-child":
        print(json.dumps(parse_child(200)))
    else:
        report = run_all(args.variant or list(VARIANTS), args.chunks, args.precision, args.out)
        print(json.dumps({"variants": len(report["variants"]), "out": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
