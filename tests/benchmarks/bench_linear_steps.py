"""Every step before the encoder is linear in a file's size: parse and chunk (with each chunk's place) timed on
the shapes that once stalled a run — PostScript-like short lines, a log, prose, Markdown, one endless line —
at 1, 2, 4 and 8 MiB. Reported: seconds per MiB at each size and the log-log slope of time against size
(1.0 is linear, 2.0 quadratic). Target: every slope at most 1.25.

The encoder's own cost is linear by construction (a fixed cost per passage, sliced: knowledge/ingest/slices.py)
and is measured in bench_ingest; it is left out here so the slope says what the code around it does.

Run: ``.venv/bin/python -m tests.benchmarks.bench_linear_steps [--quick]``
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable

from knowledge.ingest.embedding import default_model_spec
from knowledge.ingest.material import chunk_document
from knowledge.library.bases import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from knowledge.sources import parse_bytes
from tests.benchmarks.common import Result, log, run_benchmark, target

MIB = 1024 * 1024
WORDS = ["the", "of", "protein", "cell", "gene", "river", "stone", "lantern", "copper", "meadow", "falcon", "harbor"]


class _Chunking:
    chunk_size = DEFAULT_CHUNK_SIZE
    chunk_overlap = DEFAULT_CHUNK_OVERLAP


def _postscript(rng: random.Random, size: int) -> bytes:
    lines = []
    total = 0
    while total < size:
        line = f"{rng.randint(0, 999)} {rng.randint(0, 999)} moveto ({rng.choice(WORDS)}) show"
        lines.append(line)
        total += len(line) + 1
    return ("%!PS-Adobe-3.0\n" + "\n".join(lines)).encode()


def _log(rng: random.Random, size: int) -> bytes:
    lines, total, n = [], 0, 0
    while total < size:
        line = f"2026-12-07 12:{n % 60:02}:{n % 60:02} INFO worker[{n % 7}] {' '.join(rng.choices(WORDS, k=9))}"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines).encode()


def _prose(rng: random.Random, size: int) -> bytes:
    paras, total = [], 0
    while total < size:
        para = " ".join(rng.choices(WORDS, k=120)) + "."
        paras.append(para)
        total += len(para) + 2
    return "\n\n".join(paras).encode()


def _markdown(rng: random.Random, size: int) -> bytes:
    parts, total, n = [], 0, 0
    while total < size:
        bullet, body = " ".join(rng.choices(WORDS, k=12)), " ".join(rng.choices(WORDS, k=60))
        part = f"## Section {n}\n\n- {bullet} `code_{n}`\n\n{body}\n"
        parts.append(part)
        total += len(part)
        n += 1
    return "\n".join(parts).encode()


def _one_line(rng: random.Random, size: int) -> bytes:
    out, total = [], 0
    while total < size:
        word = rng.choice(WORDS)
        out.append(word)
        total += len(word) + 1
    return " ".join(out).encode()


SHAPES: dict[str, tuple[str, Callable[[random.Random, int], bytes]]] = {
    "postscript-like lines (.txt)": ("manual.txt", _postscript),
    "log": ("run.log", _log),
    "prose": ("essay.txt", _prose),
    "markdown": ("notes.md", _markdown),
    "one line": ("dump.txt", _one_line),
}


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(seconds) against log(bytes)."""
    xs = [math.log(size) for size, _s in points]
    ys = [math.log(max(seconds, 1e-6)) for _size, seconds in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _run(result: Result, sizes: list[int]) -> None:
    model_path = default_model_spec().tokenizer_path
    base = _Chunking()
    found: dict[str, dict[str, object]] = {}
    for shape, (name, make) in SHAPES.items():
        points: list[tuple[int, float]] = []
        rows: dict[str, object] = {}
        for size in sizes:
            data = make(random.Random(size), size)
            t0 = time.perf_counter()
            doc = parse_bytes(data, name=name, max_bytes=64 * MIB)
            t1 = time.perf_counter()
            chunks = chunk_document(base, doc, model_path)  # type: ignore[arg-type]
            t2 = time.perf_counter()
            points.append((len(data), t2 - t0))
            rows[f"{size / MIB:g} MiB"] = {
                "parse_s": round(t1 - t0, 3),
                "chunk_s": round(t2 - t1, 3),
                "chunks": len(chunks),
                "s_per_mib": round((t2 - t0) / (len(data) / MIB), 3),
            }
        slope = _slope(points)
        found[shape] = {"sizes": rows, "slope": round(slope, 3)}
        log(f"{shape}: slope {slope:.2f}; " + ", ".join(f"{k} {v['s_per_mib']} s/MiB" for k, v in rows.items()))  # type: ignore[index]
        result.targets.append(target(f"parse + chunk time against size, log-log slope: {shape}", slope, at_most=1.25))
    result.data.update(results=found, sizes_mib=[s / MIB for s in sizes])


def run(quick: bool = False) -> Result:
    sizes = [MIB // 2, MIB, 2 * MIB] if quick else [MIB, 2 * MIB, 4 * MIB, 8 * MIB]
    return run_benchmark("linear_steps", quick, lambda result: _run(result, sizes))


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
    sys.exit(0)
