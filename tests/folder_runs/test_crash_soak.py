"""Crash soak: real `quire worker` processes SIGKILLed at random points of one folder run, then finished.

The kill points are drawn from a seeded random generator, so a failure reproduces:
* ``early``   — a random moment after the process is spawned (before it claims, while it claims or
  enters the run, or while it imports the model);
* ``entered`` — a random moment after this attempt filed its ``started`` entry (typically while the
  model loads or the first source is read, parsed or embedded);
* ``commits`` — right after this attempt committed 1 to 3 more sources (typically in the middle of the
  next source, often inside its write transaction).
Startup recovery in the next worker hands the dead attempt's claim back at once (its session's pid is
gone), and the next attempt takes the run over and re-walks the manifest from the start.

After each kill the test notes which sources the dead attempt left in flight (only the one being worked
on, or the group being embedded: ``tests/folder_runs/test_source_deaths.py`` shows the marks are that
precise); a source is quarantined exactly when it was in flight at two kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from app.cli.commands_doctor import data_dir_checks
from knowledge import folder_runs
from knowledge.library import audit
from knowledge.library.index import fts_table, vec_table
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc, wait_until
from tests.folder_runs.helpers import (
    PERSON,
    assert_commit_entries_count_the_ledger,
    doc_text,
    entries,
    make_base,
    make_docs,
    rows,
    scalar,
)
from tests.support.engine_fixtures import engine_quire
from tests.support.files import write_tree

SEED = 20261202
KILLS = 8  # each kill starts a worker: the default run has each mode a few times, `make soak` SOAK_KILLS
SOAK_KILLS = 22
TEAM_KILLS = 4  # on a team store: the same kill points, fewer (`make soak` SOAK_TEAM_KILLS)
SOAK_TEAM_KILLS = 8
INGESTIBLE = 60
MODES = ("early", "entered", "commits")
WEIGHTS = (0.25, 0.35, 0.40)


def spawn_worker(data_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return python_proc("-m", "app.cli", "--data-dir", str(data_dir), "--json", "worker", *extra)


def batches(quire: Quire) -> int:
    return int(scalar(quire, "SELECT count(*) FROM ingest_batches"))


def started_entries(quire: Quire, run_id: int) -> int:
    return sum(1 for e in entries(quire, run_id) if e.action == audit.RUN_STARTED)


def left_in_flight(quire: Quire, run_id: int) -> set[tuple[str, int]]:
    """(source, attempt) of every unsettled source a dead attempt left marked in flight."""
    found = rows(
        quire,
        "SELECT s.relative_path, f.attempt FROM folder_run_in_flight f JOIN folder_run_sources s ON s.id = f.source_id"
        " WHERE f.run_id = :r AND f.attempt IS NOT NULL AND NOT EXISTS (SELECT 1 FROM folder_run_outcomes o"
        " WHERE o.run_id = f.run_id AND o.source_id = f.source_id)",
        r=run_id,
    )
    return {(str(path), int(attempt)) for path, attempt in found}


def run_status(quire: Quire, run_id: int) -> str:
    return str(scalar(quire, "SELECT status FROM folder_runs WHERE id = :r", r=run_id))


# the data directory, or a team store: its workers are the same processes, reaching it through QUIRE_STORE
quire = pytest.fixture(engine_quire)


@pytest.mark.parametrize(
    ("quire", "wanted"),
    [
        ("sqlite", KILLS),
        pytest.param("sqlite", SOAK_KILLS, marks=pytest.mark.soak),
        pytest.param("postgresql", TEAM_KILLS, marks=pytest.mark.engines),
        pytest.param("postgresql", SOAK_TEAM_KILLS, marks=[pytest.mark.engines, pytest.mark.soak]),
    ],
    indirect=["quire"],
)
def test_sigkill_at_random_points_converges_to_one_batch_per_source(
    quire: Quire, data_dir: Path, tmp_path: Path, wanted: int
) -> None:
    began = time.monotonic()
    try:
        make_base(quire)
        folder = make_docs(tmp_path / "folder", INGESTIBLE)
        write_tree(
            folder,
            {
                "sub/twin-a.txt": doc_text(500),
                "sub/twin-b.txt": doc_text(500),  # same bytes: settles already_covered by twin-a
                "empty.txt": "",  # eligible by type, empty: skipped (issue 12)
                "gone.txt": doc_text(501),
                "changed.txt": doc_text(502),
                "ignored.txt": doc_text(503),
                "picture.bin": b"\x00\x01",  # never eligible
            },
        )
        started = folder_runs.start_run(quire, PERSON, "kb", folder, key="soak")
        (folder / "gone.txt").unlink()
        (folder / "changed.txt").write_text("edited after the preview\n", encoding="utf-8")
        (folder / ".quireignore").write_text("ignored.txt\n", encoding="utf-8")

        rng = random.Random(SEED)
        kills: list[dict[str, object]] = []
        deaths: set[tuple[str, int]] = set()  # (source, attempt) it was in flight under when that attempt died
        while len(kills) < wanted and run_status(quire, started.run_id) not in ("completed", "failed"):
            mode = rng.choices(MODES, WEIGHTS)[0]
            before_batches, before_started = batches(quire), started_entries(quire, started.run_id)
            proc = spawn_worker(data_dir)
            try:
                if mode == "early":
                    time.sleep(rng.uniform(0.2, 2.0))  # the random kill point itself, not a synchronisation
                elif mode == "entered":
                    wait_until(lambda b=before_started: started_entries(quire, started.run_id) > b, timeout=300)
                    time.sleep(rng.uniform(0.0, 2.5))  # the random kill point
                else:
                    want = before_batches + rng.randint(1, 3)
                    wait_until(
                        lambda w=want: batches(quire) >= w or run_status(quire, started.run_id) == "completed",
                        timeout=300,
                        interval=0.005,
                    )
            finally:
                os.kill(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=60)
            assert proc.returncode == -signal.SIGKILL
            in_flight = left_in_flight(quire, started.run_id)
            deaths |= in_flight
            kills.append(
                {"mode": mode, "committed_by_it": batches(quire) - before_batches, "in_flight": len(in_flight)}
            )

        final = spawn_worker(data_dir, "--until-idle")
        out, err = final.communicate(timeout=300)
        assert final.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["jobs_finished"] >= 1

        check_converged(quire, started.run_id, kills)
        died = Counter(path for path, _attempt in deaths)
        quarantined = {s.relative_path for s in folder_runs.show_run(quire, started.run_id).sources
                       if s.disposition == "quarantined"}  # fmt: skip
        # never a source that was not in flight at two kills; always one that was
        assert quarantined == {path for path, n in died.items() if n >= 2}, (quarantined, died)
        elapsed = time.monotonic() - began
        print(
            json.dumps(
                {
                    "kills": len(kills),
                    "modes": Counter(k["mode"] for k in kills),
                    "in_flight_per_kill": [k["in_flight"] for k in kills],
                    "quarantined": len(quarantined),
                    "seconds": elapsed,
                }
            )
        )
        assert len(kills) >= wanted - 2, kills
    finally:
        quire.close()
    assert data_dir_checks(data_dir)["integrity"] == "ok"


def check_converged(quire: Quire, run_id: int, kills: list[dict[str, object]]) -> None:
    detail = folder_runs.show_run(quire, run_id)
    run = detail.summary.run
    assert run.status == "completed"
    got = {s.relative_path: s.disposition for s in detail.sources}
    expected_skips = {
        "sub/twin-b.txt": "already_covered",
        "empty.txt": "skipped",
        "gone.txt": "source_unavailable",
        "changed.txt": "source_unavailable",
        "ignored.txt": "excluded",
    }
    # a source in flight across two of the kills settles quarantined (deaths.py: after one kill the window's
    # sources are read alone, and a later kill quarantines the one then in flight): the run goes on past it
    quarantined = sorted(k for k, v in got.items() if v == "quarantined")
    assert {k: v for k, v in got.items() if v not in ("committed", "quarantined")} == expected_skips
    committed = sorted(k for k, v in got.items() if v == "committed")
    assert len(committed) + len(quarantined) == INGESTIBLE + 1  # the docs and twin-a
    assert len(quarantined) <= len(kills)  # each needs a kill of its own while it was read alone

    # exactly one batch per ingested source, none for a skipped one
    per_source = rows(
        quire,
        "SELECT s.relative_path, count(b.id) FROM folder_run_sources s "
        "LEFT JOIN ingest_batches b ON b.source_id = s.id WHERE s.run_id = :r GROUP BY s.id ORDER BY s.relative_path",
        r=run_id,
    )
    assert {p: n for p, n in per_source if n} == {p: 1 for p in committed}
    assert all(n == 0 for p, n in per_source if p in expected_skips or p in quarantined)
    # exactly one item per ingested source, owned by the ingest agent, and its search material whole
    files = rows(quire, "SELECT relative_path, owner, status FROM items WHERE run_id = :r AND type = 'file'", r=run_id)
    assert sorted(f[0] for f in files) == committed
    assert {(f[1], f[2]) for f in files} == {("ingest-agent", "completed")}
    base_id = run.base_id
    chunks = scalar(quire, "SELECT count(*) FROM chunks WHERE base_id = :b", b=base_id)
    assert chunks == scalar(quire, f"SELECT count(*) FROM {vec_table(base_id)}")
    assert chunks == scalar(quire, f"SELECT count(*) FROM {fts_table(base_id)}")
    assert chunks == scalar(quire, "SELECT coalesce(sum(chunk_count), 0) FROM items WHERE base_id = :b", b=base_id)

    log = entries(quire, run_id)
    terminal = [e for e in log if e.action in (audit.RUN_COMPLETED, audit.RUN_FAILED)]
    assert [e.action for e in terminal] == [audit.RUN_COMPLETED]
    assert terminal[0].payload["counts"]["committed"] == len(committed) == batches(quire)
    commits = [e for e in log if e.action == audit.BATCH_COMMITTED]
    assert len(commits) == len(committed)  # one commit entry per ingested source, however many attempts
    assert assert_commit_entries_count_the_ledger(quire, run_id) == len(committed)  # each attempt's counts too
    batch_attempts = Counter(
        a for (a,) in rows(quire, "SELECT attempt FROM ingest_batches WHERE run_id = :r", r=run_id)
    )
    assert Counter(e.attempt for e in commits) == batch_attempts

    # one `started` per attempt that entered, in attempt order; every write filed by the attempt that owned the run
    starts = [e.attempt for e in log if e.action == audit.RUN_STARTED]
    assert starts == sorted(set(starts))
    entered_for_sure = sum(1 for k in kills if k["mode"] != "early") + 1  # those waited for an entry; the last one
    assert entered_for_sure <= len(starts) <= len(kills) + 1
    owner = None
    for e in log:
        if e.action == audit.RUN_STARTED:
            owner = e.attempt
        elif e.action != audit.RUN_CREATED:
            assert e.attempt == owner, (e.action, e.attempt, owner)
    assert terminal[0].attempt == starts[-1] == run.owner_attempt
    assert quire.queue.get(run.job_id or 0).status == "completed"

    hit = search(quire, "kb", "marker17x", mode="keyword")
    assert [h.item_name for h in hit] == ([] if "doc017.txt" in quarantined else ["doc017.txt"])
