"""What ``bench_team_workers`` checks in a store after its workers finished (either engine): nothing lost,
nothing duplicated, nothing stuck, every folder run settled — read with plain SQL through the store's
``Database`` (``knowledge.store.postgres.open_store``), so the check opens no worker session of its own."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from knowledge.library.index import fts_table, vec_table
from knowledge.store.schema import ACTIVE_STATUSES
from knowledge.store.schema_runs import TERMINAL_RUN_STATUSES


@dataclass
class Check:
    documents: int  # handed in
    lost: int  # a document with neither an item nor a settled run outcome, or an item never settled
    duplicated: int  # second items for a source, chunk / vector / keyword rows twice or missing, batches twice
    stuck: int  # jobs pending or running, items in an active status or still deleting
    unsettled_runs: int
    items_by_status: dict[str, int] = field(default_factory=dict)
    failed_reasons: dict[str, int] = field(default_factory=dict)
    run_dispositions: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)  # "type status attempt": count
    chunks: int = 0

    @property
    def problems(self) -> int:
        not_completed = sum(n for s, n in self.items_by_status.items() if s != "completed")
        return self.lost + self.duplicated + self.stuck + self.unsettled_runs + not_completed

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "problems": self.problems}


@contextmanager
def _reading(url: str | None, local: Path) -> Iterator[Connection]:
    from knowledge.store.postgres import open_store

    db = open_store(url if url else local)
    try:
        with db.read() as conn:
            yield conn
    finally:
        db.dispose()


def check_store(url: str | None, local: Path, base: str, expected: set[str], runs: Sequence[int] = ()) -> Check:
    """``expected``: the documents' file names (unique in the corpus)."""
    with _reading(url, local) as conn:
        base_id = int(conn.execute(text("SELECT id FROM bases WHERE name = :n"), {"n": base}).scalar_one())
        files = conn.execute(
            text("SELECT name, status, error_code FROM items WHERE base_id = :b AND type = 'file'"), {"b": base_id}
        ).all()
        outcomes = conn.execute(
            text(
                "SELECT s.relative_path, o.disposition FROM folder_run_sources s "
                "JOIN folder_run_outcomes o ON o.source_id = s.id AND o.run_id = s.run_id"
            )
        ).all()
        duplicated = _duplicated(conn, base_id)
        stuck = _stuck(conn, base_id)
        run_rows = conn.execute(text("SELECT id, status FROM folder_runs")).all()
        jobs = conn.execute(text("SELECT type, status, attempt, count(*) FROM jobs GROUP BY 1, 2, 3")).all()
        chunks = int(conn.execute(text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": base_id}).scalar_one())
    per_name = Counter(f.name for f in files)
    settled_without_item = {Path(p).name for p, d in outcomes if d != "committed"}
    seen = {f.name for f in files if f.status not in (*ACTIVE_STATUSES, "deleting")}
    missing_runs = set(runs) - {r.id for r in run_rows}
    return Check(
        documents=len(expected),
        lost=len(expected - seen - settled_without_item) + sum(1 for f in files if f.name not in expected),
        duplicated=duplicated + sum(n - 1 for n in per_name.values() if n > 1),
        stuck=stuck,
        unsettled_runs=sum(1 for r in run_rows if r.status not in TERMINAL_RUN_STATUSES) + len(missing_runs),
        items_by_status=dict(Counter(f.status for f in files)),
        failed_reasons=dict(Counter(str(f.error_code) for f in files if f.status == "failed")),
        run_dispositions=dict(Counter(d for _p, d in outcomes)),
        jobs={f"{j[0].rsplit('.', 1)[-1]} {j[1]} {j[2]}": int(j[3]) for j in jobs},
        chunks=chunks,
    )


def _duplicated(conn: Connection, base_id: int) -> int:
    chunk_ids = {int(r[0]) for r in conn.execute(text("SELECT id FROM chunks WHERE base_id = :b"), {"b": base_id})}
    found = int(
        conn.execute(
            text(
                "SELECT count(*) FROM (SELECT item_id, ordinal FROM chunks WHERE base_id = :b "
                "GROUP BY item_id, ordinal HAVING count(*) > 1) AS twice"
            ),
            {"b": base_id},
        ).scalar_one()
    )
    for table in (vec_table(base_id), fts_table(base_id)):
        held = [int(r[0]) for r in conn.execute(text(f"SELECT rowid FROM {table}"))]
        found += len(held) - len(set(held)) + len(set(held) ^ chunk_ids)
    found += int(
        conn.execute(
            text("SELECT count(*) FROM (SELECT source_id FROM ingest_batches GROUP BY source_id HAVING count(*) > 1) b")
        ).scalar_one()
    )
    counted = conn.execute(
        text("SELECT coalesce(sum(chunk_count), 0) FROM items WHERE base_id = :b AND status = 'completed'"),
        {"b": base_id},
    ).scalar_one()
    return found + abs(int(counted) - len(chunk_ids))


def _stuck(conn: Connection, base_id: int) -> int:
    jobs = conn.execute(text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")).scalar_one()
    return int(jobs) + _count_items_in(conn, base_id, (*ACTIVE_STATUSES, "deleting"))


def _count_items_in(conn: Connection, base_id: int, statuses: Sequence[str]) -> int:
    from sqlalchemy import bindparam

    query = text("SELECT count(*) FROM items WHERE base_id = :b AND status IN :s").bindparams(
        bindparam("s", expanding=True)
    )
    return int(conn.execute(query, {"b": base_id, "s": list(statuses)}).scalar_one())


def unsettled(url: str, local: Path) -> bool:
    """Whether work is still under way: a job pending or running, or a folder run not settled."""
    with _reading(url, local) as conn:
        jobs = conn.execute(text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")).scalar_one()
        runs = conn.execute(text("SELECT status FROM folder_runs")).scalars().all()
    return bool(jobs) or any(s not in TERMINAL_RUN_STATUSES for s in runs)


def held_claims(url: str, local: Path, host: str) -> list[str]:
    """The jobs a machine's workers are running (their claims' lease owners name the host)."""
    with _reading(url, local) as conn:
        rows = conn.execute(
            text("SELECT id, type FROM jobs WHERE status = 'running' AND lease_owner LIKE :h"), {"h": f"{host}/%"}
        ).all()
    return [f"{r[0]}:{str(r[1]).rsplit('.', 1)[-1]}" for r in rows]


class LeaseWatch:
    """While workers run: how close a live claim came to losing its lease. Every ``interval`` s it reads the
    running jobs' lease expiry and the open sessions' last heartbeat. ``least_margin``: the least time a lease
    had left when it was seen renewed (observed within ``interval`` of the renewal, so a little low);
    ``longest_beat_gap``: the longest time between two heartbeats of one session. A claim that is never
    renewed (its worker was killed) counts in neither. A lease that runs out under a live worker lets another
    machine's recovery take its job over."""

    def __init__(self, url: str, interval: float = 0.5) -> None:
        import threading

        self.url, self.interval = url, interval
        self.least_margin: float | None = None
        self.longest_beat_gap = 0.0
        self._leases: dict[tuple[int, int], float] = {}  # (job, attempt) -> lease expiry last seen
        self._beats: dict[str, float] = {}  # session -> heartbeat last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> LeaseWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        from knowledge.store.postgres import open_store

        db = open_store(self.url)
        try:
            while not self._stop.wait(self.interval):
                with db.read() as conn:
                    leases = conn.execute(
                        text("SELECT id, attempt, lease_expires_at FROM jobs WHERE status = 'running'")
                    ).all()
                    beats = conn.execute(
                        text("SELECT id, heartbeat_at FROM worker_sessions WHERE ended_at IS NULL")
                    ).all()
                self._observe(time.time(), leases, beats)
        finally:
            db.dispose()

    def _observe(self, now: float, leases: Sequence[Any], beats: Sequence[Any]) -> None:
        for job, attempt, expires in leases:
            if expires is None:
                continue
            before = self._leases.get((job, attempt))
            if before is not None and float(expires) != before:  # renewed since the last look
                margin = before - now
                self.least_margin = margin if self.least_margin is None else min(self.least_margin, margin)
            self._leases[(job, attempt)] = float(expires)
        for session, beat in beats:
            before = self._beats.get(session)
            if before is not None and float(beat) != before:
                self.longest_beat_gap = max(self.longest_beat_gap, float(beat) - before)
            self._beats[session] = float(beat)

    def as_dict(self) -> dict[str, Any]:
        margin = None if self.least_margin is None else round(self.least_margin, 1)
        return {"least_lease_margin_seconds": margin, "longest_heartbeat_gap_seconds": round(self.longest_beat_gap, 1)}
