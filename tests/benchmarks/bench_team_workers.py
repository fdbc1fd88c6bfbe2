"""Workers on a team store, measured: ``python -m tests.benchmarks.bench_team_workers [--quick]`` (on purpose:
``run_all --only team_workers``) writes ``results/team_workers[-quick].json``.

(a) **Ingest throughput.** The same SciFact documents (1,000: ``corpus.load(quick=True)``; ``--docs`` takes
    fewer), in five folders of 200 added by one ``quire add`` (one index job each, so three workers all find
    work), ingested through the real CLI in this one run: by one process on SQLite (``quire add``, then ``quire
    worker --until-idle``), and on a team store — PostgreSQL + pgvector and Redis started on loopback from their
    wheels, a fresh database and Redis for each — by 1, 2 and 3 ``quire worker --until-idle`` processes
    started together (first spawn to last exit). Two rounds in mirrored order; the means are compared. The
    ``add`` counts (on a team store it walks the folders and uploads every file in the person's process, where
    SQLite's worker walks them): docs/s are of add + workers, the workers' own figure beside.
(b) **A SIGKILL soak.** Three workers on one team store, one killed at random every few seconds and started
    again at once, for ``--soak-seconds`` while work arrives (``quire add`` of folders and folder runs started
    meanwhile); then the workers finish and the store is checked: 0 lost (every document has its one item,
    settled), 0 duplicated (no second item for a source, no second chunk, vector or keyword row, at most one
    ingest batch a source), 0 stuck (no job pending or running, no item in an active status), every folder run
    settled. Worker 0 runs on the person's machine (the folder runs are pinned to it, and a restart there
    finds its dead predecessor by pid); workers 1 and 2 come back as a new machine after each kill, so the
    claims of the one that died are taken over only when its lease has run out.

All workers run on this machine (2 cores, shared): the scaling figures show the claims sharing work and what
the machine's cores allow, not what separate machines would give.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.benchmarks import corpus
from tests.benchmarks.bench_ingest import area, fresh
from tests.benchmarks.common import (
    REPO,
    RESULTS,
    LoadSampler,
    Result,
    child_env,
    loadavg,
    log,
    quire_argv,
    run_benchmark,
    target,
)
from tests.benchmarks.team_checks import LeaseWatch, check_store, held_claims, unsettled
from tests.support.servers import PostgresServer, RedisServer, start_postgres, start_redis

BASE = "kb"
WORKERS = (1, 2, 3)
ROUNDS = 2
LEASE_SECONDS = 10.0  # the soak's workers: a dead machine's claims wait this long for another
PERSON = "person"  # the machine with the folders (QUIRE_HOST of the person's commands and of worker 0)


@dataclass
class Store:
    url: str | None  # None: the SQLite data directory
    queue: str | None
    local: Path  # the person's data directory (on SQLite: the store itself)

    def where(self) -> list[str]:
        return (["--store", self.url] if self.url else []) + (["--queue", self.queue] if self.queue else [])


def _env(host: str | None) -> dict[str, str]:
    env = child_env({"QUIRE_HOST": host} if host else None)
    for name in ("QUIRE_STORE", "QUIRE_QUEUE"):  # the store is given on the command line
        env.pop(name, None)
    return env


def cli(store: Store, *args: str, host: str = PERSON, timeout: float = 7200) -> Any:
    proc = subprocess.run(
        quire_argv(store.local, *store.where(), "--json", *args),
        cwd=REPO, env=_env(host), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"quire {args[0]} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def spawn_worker(store: Store, data_dir: Path, host: str, log_to: Path, *extra: str) -> subprocess.Popen[bytes]:
    """A ``quire worker`` of its own machine: its own data directory and host name."""
    with log_to.open("ab") as out:
        return subprocess.Popen(
            quire_argv(data_dir, *store.where(), "--json", "worker", "--no-watch", "--nice", "0", *extra),
            cwd=REPO, env=_env(host), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def team_store(server: PostgresServer, redis: RedisServer | None, name: str, local: Path) -> Store:
    store = Store(server.create_database(name), redis.url if redis else None, fresh(local))
    cli(Store(None, None, store.local), "store", "init", store.url or "")
    return store


# -- (a) throughput ------------------------------------------------------------------------------------------


def ingest(store: Store, folders: list[Path], workers: int, root: Path) -> dict[str, Any]:
    """``quire add`` of the folders (one index job each), then ``workers`` workers until the queue is idle."""
    cli(store, "base", "create", BASE)
    t0 = time.monotonic()
    cli(store, "add", BASE, *(str(f) for f in folders))
    added = time.monotonic() - t0
    logs = [root / f"worker-{n}.log" for n in range(workers)]
    watch = LeaseWatch(store.url) if store.url else nullcontext()
    t1 = time.monotonic()
    with watch:
        procs = [
            spawn_worker(store, store.local if store.url is None else fresh(root / f"machine-{n}"), f"machine-{n}",
                         logs[n], "--until-idle", "--timeout", "7200")
            for n in range(workers)
        ]  # fmt: skip
        for proc in procs:
            proc.wait(timeout=7200)
    seconds = time.monotonic() - t1
    reports = [_last_json(path) for path in logs]
    failed = [(n, p.returncode) for n, p in enumerate(procs) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"workers exited {failed}: {logs[failed[0][0]].read_text()[-2000:]}")
    return {"add_seconds": round(added, 1), "worker_seconds": round(seconds, 1),
            "jobs_per_worker": [r.get("jobs_finished") for r in reports],
            "leases": watch.as_dict() if isinstance(watch, LeaseWatch) else None}  # fmt: skip


def _last_json(path: Path) -> dict[str, Any]:
    for line in reversed(path.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            return json.loads(line)  # type: ignore[no-any-return]
    return {}


def throughput(result: Result, data: corpus.SciFact, folders: list[Path], root: Path) -> dict[str, Any]:
    """Every configuration ``ROUNDS`` times, the rounds in mirrored order (SQLite, 1, 2, 3 workers, then 3, 2,
    1, SQLite), so a drift in the machine's load weighs on each about equally; each figure is their mean."""
    expected = {f"{doc_id}.txt" for doc_id in data.docs}
    configs = ["sqlite", *(f"postgresql-{n}" for n in WORKERS)]
    order = [c for r in range(ROUNDS) for c in (configs if r % 2 == 0 else configs[::-1])]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    server = start_postgres()
    try:
        for k, config in enumerate(order):
            log(f"{config} (run {k + 1} of {len(order)}): {len(data.docs)} documents")
            where = fresh(root / f"{config}-{k}")
            if config == "sqlite":
                store = Store(None, None, where / "person")
                run = ingest(store, folders, 1, where)
            else:
                redis = start_redis()
                try:
                    store = team_store(server, redis, f"quire_workers_{k}", where / "person")
                    run = ingest(store, folders, int(config.rsplit("-", 1)[1]), where)
                finally:
                    redis.stop()
            run["check"] = check_store(store.url, store.local, BASE, expected).as_dict()
            runs[config].append(run)
    finally:
        server.stop()
    out = {c: _mean_of(rs, len(data.docs)) for c, rs in runs.items()}
    base = out["sqlite"]["docs_per_second"]
    for name, r in out.items():
        r["ratio_to_sqlite"] = round(r["docs_per_second"] / base, 3)
        log(f"{name}: {r['docs_per_second']} docs/s ({r['ratio_to_sqlite']}x SQLite), add {r['add_seconds']} s")
    for n in WORKERS:
        problems = out[f"postgresql-{n}"]["check"]["problems"]
        result.targets.append(target(f"{n} worker(s): documents not indexed exactly once", problems, at_most=0))
    return out


def _leases_of(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    seen = [r["leases"] for r in runs if r.get("leases")]
    margins = [s["least_lease_margin_seconds"] for s in seen if s["least_lease_margin_seconds"] is not None]
    if not seen:
        return None
    return {"least_lease_margin_seconds": min(margins) if margins else None,
            "longest_heartbeat_gap_seconds": max(s["longest_heartbeat_gap_seconds"] for s in seen)}  # fmt: skip


def _mean_of(runs: list[dict[str, Any]], documents: int) -> dict[str, Any]:
    """A configuration's runs: mean seconds, docs/s of the means (the add counts too: on a team store it walks
    and uploads what SQLite's worker reads), each run kept, and the check of every run summed."""
    add = sum(r["add_seconds"] for r in runs) / len(runs)
    work = sum(r["worker_seconds"] for r in runs) / len(runs)
    checks = [r["check"] for r in runs]
    return {
        "add_seconds": round(add, 1), "worker_seconds": round(work, 1),
        "docs_per_second": round(documents / (add + work), 2), "workers_docs_per_second": round(documents / work, 2),
        "jobs_per_worker": runs[0]["jobs_per_worker"], "runs": runs, "leases": _leases_of(runs),
        "check": {"problems": sum(c["problems"] for c in checks), "jobs": checks[0]["jobs"]},
    }  # fmt: skip


# -- (b) the soak --------------------------------------------------------------------------------------------


@dataclass
class Slot:
    number: int
    host: str
    proc: subprocess.Popen[bytes] | None = None
    lives: int = 0
    kills: list[dict[str, Any]] = field(default_factory=list)


def soak(docs: list[Path], root: Path, seconds: float, seed: int) -> dict[str, Any]:
    """``docs``: the sub-folders of the corpus (200 documents each), handed in over the soak."""
    rng = random.Random(seed)
    server, redis = start_postgres(), start_redis()
    try:
        store = team_store(server, redis, "quire_soak", root / "person")
        cli(store, "base", "create", BASE)
        # what arrives when (a share of the kill phase) and how: adds of folders and folder runs
        plan = [(0.0, "add"), (0.0, "run"), (0.3, "add"), (0.5, "run"), (0.7, "add")]
        arrivals = [(when, how, folder) for (when, how), folder in zip(plan, docs, strict=False)]
        handed_in = [folder for _when, _how, folder in arrivals]
        slots = [Slot(n, PERSON if n == 0 else f"machine-{n}") for n in range(3)]
        with LeaseWatch(store.url or "") as watch:
            for slot in slots:
                _start(store, slot, root)
            t0, kills, persons = time.monotonic(), 0, []
            next_kill = t0 + rng.uniform(3, 20)
            while time.monotonic() - t0 < seconds:
                while arrivals and time.monotonic() - t0 >= arrivals[0][0] * seconds:
                    _when, how, folder = arrivals.pop(0)  # the person's command runs while the kills go on
                    persons.append(_person(store, ("add",) if how == "add" else ("run", "start"), folder))
                    log(f"soak: {how} {folder.name}")
                if time.monotonic() >= next_kill:
                    slot = rng.choice(slots)
                    held = held_claims(store.url or "", store.local, slot.host)
                    assert slot.proc is not None
                    os.kill(slot.proc.pid, signal.SIGKILL)
                    slot.proc.wait(timeout=60)
                    slot.kills.append({"at": round(time.monotonic() - t0, 1), "host": slot.host, "claims": held})
                    kills += 1
                    if slot.number:  # another machine comes back: the dead one's claims wait for their lease
                        slot.host = f"machine-{slot.number}-{slot.lives}"
                    _start(store, slot, root)
                    next_kill = time.monotonic() + rng.uniform(3, 20)
                time.sleep(0.2)  # the soak's own pace (arrivals and kills are timed), not a synchronisation
            for _when, how, folder in arrivals:  # anything the kill phase did not reach
                persons.append(_person(store, ("add",) if how == "add" else ("run", "start"), folder))
            runs = [answer["run_id"] for answer in (_answer(p) for p in persons) if "run_id" in answer]
            log(f"soak: {kills} kills in {seconds:.0f} s; letting the workers finish")
            settled_at = _wait_settled(store, time.monotonic() + 3600)
        finish_seconds = round(settled_at - t0 - seconds, 1)
        for slot in slots:
            if slot.proc is not None:
                slot.proc.send_signal(signal.SIGTERM)
                slot.proc.wait(timeout=300)
        expected = {p.name for d in handed_in for p in d.glob("*.txt")}
        check = check_store(store.url, store.local, BASE, expected, runs=runs)
    finally:
        redis.stop()
        server.stop()
    return {
        "kill_phase_seconds": seconds, "seed": seed, "kills": kills, "finish_seconds_after_kills": finish_seconds,
        "kills_by_slot": [len(s.kills) for s in slots], "kills_holding_claims": sum(
            1 for s in slots for k in s.kills if k["claims"]),
        "kill_log": [k for s in slots for k in s.kills], "check": check.as_dict(), "leases": watch.as_dict(),
    }  # fmt: skip


def _person(store: Store, command: tuple[str, ...], folder: Path) -> subprocess.Popen[str]:
    """The person's ``quire add`` / ``quire run start`` of a folder, on the person's machine, not waited for."""
    return subprocess.Popen(
        quire_argv(store.local, *store.where(), "--json", *command, BASE, str(folder)),
        cwd=REPO, env=_env(PERSON), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"the person's command exited {proc.returncode}: {err.strip()[-2000:]}")
    return json.loads(out) if out.strip() else {}  # type: ignore[no-any-return]


def _start(store: Store, slot: Slot, root: Path) -> None:
    slot.lives += 1
    data_dir = root / slot.host
    data_dir.mkdir(parents=True, exist_ok=True)
    slot.proc = spawn_worker(store, data_dir, slot.host, root / f"slot-{slot.number}.log",
                             "--lease-seconds", str(LEASE_SECONDS))  # fmt: skip


def _wait_settled(store: Store, deadline: float) -> float:
    while unsettled(store.url or "", store.local):
        if time.monotonic() > deadline:
            raise TimeoutError("the soak's work did not settle within an hour")
        time.sleep(1.0)  # polling the store for the condition
    return time.monotonic()


# -- the run -------------------------------------------------------------------------------------------------


def run(quick: bool, docs: int | None = None, soak_seconds: float = 240.0, only: str = "both") -> Result:
    return run_benchmark("team_workers", quick, lambda result: _run(result, quick, docs, soak_seconds, only))


def _run(result: Result, quick: bool, docs: int | None, soak_seconds: float, only: str) -> None:
    data = corpus.load(quick=True)  # 1,000 documents (the scaling runs are long on 2 shared cores)
    if docs is not None:
        data = corpus.SciFact({d: data.docs[d] for d in list(data.docs)[:docs]}, data.queries, data.qrels)
    root = area(quick) / "team_workers"
    folder = root / "docs"
    parts = corpus.write_tree(data, folder)
    result.data.update(documents=len(data.docs), cores=os.cpu_count(), lease_seconds=LEASE_SECONDS)
    kept = _kept_parts(quick, only)  # --only reruns one part; the other stays as its own run measured it
    result.data.update(kept)
    if only in ("both", "throughput"):
        with _part(result, "throughput"):
            result.data["throughput"] = throughput(result, data, parts, fresh(root / "throughput"))
    if only in ("both", "soak"):
        with _part(result, "soak"):
            result.data["soak"] = soak(parts, fresh(root / "soak"), soak_seconds, seed=20261206)
    if "soak" in result.data:
        c = result.data["soak"]["check"]
        for name in ("lost", "duplicated", "stuck", "unsettled_runs"):
            result.targets.append(target(f"SIGKILL soak, 3 workers: {name.replace('_', ' ')}", c[name], at_most=0))
    if "throughput" in kept:
        for name, r in kept["throughput"].items():
            if name.startswith("postgresql-"):
                problems = r["check"]["problems"]
                result.targets.append(target(f"{name[11:]} worker(s): documents not indexed exactly once", problems,
                                             at_most=0))  # fmt: skip


@contextmanager
def _part(result: Result, name: str) -> Iterator[None]:
    """Each part records when it ran and the load around it (the parts of one file may come from two runs)."""
    started, before = time.strftime("%Y-%m-%dT%H:%M:%S"), loadavg()
    with LoadSampler() as sampler:
        yield
    result.data.setdefault("parts", {})[name] = {
        "started_at": started, "loadavg_before": before, "loadavg_after": loadavg(), "during": sampler.summary(),
    }  # fmt: skip


def _kept_parts(quick: bool, only: str) -> dict[str, Any]:
    path = RESULTS / f"team_workers{'-quick' if quick else ''}.json"
    if only == "both" or not path.exists():
        return {}
    earlier = json.loads(path.read_text()).get("results", {})
    other = "soak" if only == "throughput" else "throughput"
    if other not in earlier:
        return {}
    return {other: earlier[other], "parts": {other: earlier.get("parts", {}).get(other, {"started_at": "earlier"})}}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_team_workers")
    parser.add_argument("--quick", action="store_true", help="write results/team_workers-quick.json")
    parser.add_argument("--docs", type=int, help="fewer documents than 1,000")
    parser.add_argument("--soak-seconds", type=float, default=240.0)
    parser.add_argument("--only", choices=("both", "throughput", "soak"), default="both")
    args = parser.parse_args()
    run(args.quick, args.docs, args.soak_seconds, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
