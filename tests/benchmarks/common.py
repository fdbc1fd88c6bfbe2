"""Shared pieces of the benchmarks: paths, the machine, load sampling, result files, real processes.

Every benchmark writes one JSON file under ``tests/benchmarks/results/``. Each file records the machine,
``os.getloadavg()`` before, during (sampled) and after the run, and a list of targets, each
``{"name", "target", "measured", "met"}``. Ratios are always measured within one run (both sides back
to back in the same benchmark), because the machines are shared and absolute times drift with load.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "tests" / "benchmarks" / "results"


def shared_dir() -> Path:
    """``shared/`` beside the repository (a clone next to it), else ``/work/shared``."""
    beside = REPO.parent / "shared"
    return beside if (beside / "data").is_dir() else Path("/work/shared")


def scifact_dir() -> Path:
    override = os.environ.get("QUIRE_SCIFACT_DIR")
    return Path(override) if override else shared_dir() / "data" / "scifact"


def work_dir() -> Path:
    """Scratch space for data directories and corpora (not the repository): ``QUIRE_BENCH_DIR`` or /tmp."""
    base = Path(os.environ.get("QUIRE_BENCH_DIR", "/tmp/quire-bench"))
    base.mkdir(parents=True, exist_ok=True)
    return base


# -- the machine -------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"})
    except OSError:
        pass
    return []


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


def machine() -> dict[str, Any]:
    import psutil

    return {
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpu_flags": _cpu_flags(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {
            name: _version(name)
            for name in (
                "torch",
                "sentence-transformers",
                "transformers",
                "apsw",
                "sqlite-vec",
                "SQLAlchemy",
                "huey",
                "PySide6-Essentials",
            )
        },
        "git_commit": _git_commit(),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class LoadSampler:
    """Samples ``os.getloadavg()`` every few seconds in a daemon thread (how busy the shared machine was)."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (seconds since start, 1-minute load)
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        while True:
            self.samples.append((round(time.monotonic() - self._t0, 1), round(os.getloadavg()[0], 2)))
            if self._stop.wait(self.interval):
                return

    def summary(self) -> dict[str, Any]:
        values = [v for _t, v in self.samples] or [os.getloadavg()[0]]
        return {
            "min_1m": min(values),
            "mean_1m": round(sum(values) / len(values), 2),
            "max_1m": max(values),
            "samples": len(values),
        }


# -- targets and results -----------------------------------------------------------------------


def target(
    name: str,
    measured: float | None,
    *,
    at_most: float | None = None,
    at_least: float | None = None,
    unit: str = "",
    note: str = "",
) -> dict[str, Any]:
    """One target with its measurement; ``met`` is False when nothing was measured."""
    if (at_most is None) == (at_least is None):
        raise ValueError("give exactly one of at_most / at_least")
    bound = at_most if at_most is not None else at_least
    text = f"<= {bound}" if at_most is not None else f">= {bound}"
    met = measured is not None and (measured <= at_most if at_most is not None else measured >= bound)  # type: ignore[operator]
    entry: dict[str, Any] = {
        "name": name,
        "target": f"{text} {unit}".strip(),
        "measured": None if measured is None else round(float(measured), 4),
        "unit": unit,
        "met": bool(met),
    }
    if note:
        entry["note"] = note
    return entry


@dataclass
class Result:
    """A benchmark's result file, written at the end (or with what it has when it fails)."""

    name: str
    quick: bool
    data: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    load_before: list[float] = field(default_factory=loadavg)

    def write(self, sampler: LoadSampler | None = None, error: str | None = None) -> Path:
        RESULTS.mkdir(parents=True, exist_ok=True)
        doc = {
            "benchmark": self.name,
            "quick": self.quick,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started)),
            "wall_seconds": round(time.time() - self.started, 1),
            "machine": machine(),
            "load": {
                "loadavg_before": self.load_before,
                "loadavg_after": loadavg(),
                "during": sampler.summary() if sampler else None,
            },
            "targets": self.targets,
            "results": self.data,
        }
        if error:
            doc["error"] = error
        suffix = "-quick" if self.quick else ""
        path = RESULTS / f"{self.name}{suffix}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def run_benchmark(name: str, quick: bool, body: Callable[[Result], None]) -> Result:
    """Run ``body`` while sampling the load; the result file is written even when the body fails."""
    result = Result(name, quick)
    with LoadSampler() as sampler:
        try:
            body(result)
        except Exception as exc:
            result.write(sampler, error=f"{type(exc).__name__}: {exc}")
            raise
    result.write(sampler)
    return result


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} load {os.getloadavg()[0]:.1f}] {message}", flush=True)


# -- real processes ----------------------------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("QUIRE_CACHE_DIR", str(work_dir() / "cache"))  # the benchmarks' own converted models
    env.update(extra or {})
    return env


def quire_argv(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), *args]


def quire(data_dir: Path, *args: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one ``quire`` command in its own process and return it (stdout is the command's output)."""
    proc = subprocess.run(
        quire_argv(data_dir, *args), cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"quire {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


def quire_json(data_dir: Path, *args: str, timeout: float = 3600) -> Any:
    return json.loads(quire(data_dir, *args, "--json", timeout=timeout).stdout)


def python_module(module: str, *args: str, timeout: float = 3600, env: dict[str, str] | None = None) -> Any:
    """Run ``python -m module args`` and parse the last line of its stdout as JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} exited {proc.returncode}: {proc.stderr.strip()[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@dataclass
class Measured:
    seconds: float
    peak_rss_mb: float
    stdout: str


def run_sampled(
    argv: Sequence[str], *, timeout: float = 7200, env: dict[str, str] | None = None, interval: float = 0.2
) -> Measured:
    """Run a process to its end, sampling its RSS (with children) with psutil; raise if it fails."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), cwd=REPO, env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else ""), daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else ""), daemon=True),
    ]
    for r in readers:
        r.start()
    try:
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
                peak = max(peak, rss)
            except psutil.Error:
                pass
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                raise TimeoutError(f"{argv} ran over {timeout}s")
            time.sleep(interval)
    finally:
        proc.wait()
        for r in readers:
            r.join(timeout=5)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-4:])} exited {proc.returncode}: {''.join(err)[-3000:]}")
    return Measured(seconds, round(peak / 2**20, 1), "".join(out))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def db_rows(data_dir: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of one read query on a data directory's database (apsw, the only SQLite in this process)."""
    from knowledge.store.database import DB_FILENAME, open_raw_connection

    conn = open_raw_connection(data_dir / DB_FILENAME)
    try:
        return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]
    finally:
        conn.close()
