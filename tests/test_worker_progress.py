"""Truthful progress (issue 44): a folder run's sources count as work waiting (the status bar said "Idle"
while a run executed), and ``quire worker`` reports files done / total, chunks, rates and the time left —
redrawn on a terminal, a line now and then otherwise — on stderr, never mixed into its answer."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from app.cli.worker_progress import CLEAR_LINE, ProgressLine
from knowledge import folder_runs, lifecycle
from knowledge.lifecycle.progress import WorkTotals
from knowledge.lifecycle.work_rate import ProgressTracker, progress_text
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.folder_runs.helpers import PERSON, drain, make_base, make_docs


class Terminal(io.StringIO):
    """What ProgressLine writes to, as a terminal would receive it."""

    def isatty(self) -> bool:
        return True


def totals(waiting: int, completed: int, chunks: int, **more: object) -> WorkTotals:
    return WorkTotals(waiting, completed, 0, chunks, False, **more)  # type: ignore[arg-type]


def test_the_tracker_counts_from_when_work_appeared_and_measures_both_rates() -> None:
    assert ProgressTracker().update(totals(0, 5, 50), at=0.0).total == 0  # idle: nothing to count
    tracker = ProgressTracker()
    first = tracker.update(totals(10, 5, 50), at=1.0)
    assert (first.done, first.total, first.files_per_second) == (0, 10, None)
    later = tracker.update(totals(6, 7, 70, settled_in_runs=2), at=3.0)  # 2 indexed, 2 skipped by a run
    assert (later.done, later.total) == (4, 10)
    assert later.files_per_second == 2.0 and later.chunks_per_second == 10.0 and later.eta_seconds == 3.0
    ended = tracker.update(totals(6, 8, 80), at=4.0)  # the run ended, its skips left the count: done holds
    assert ended.done == 4
    text = progress_text(tracker.update(totals(5, 10, 90, in_hand="docs/a.txt"), at=5.0), in_hand=True)
    assert text.startswith("5/10 files · 90 chunks") and text.endswith("docs/a.txt")


def test_a_folder_runs_sources_are_work_waiting_until_they_settle(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "docs", 30), key="p")
    work = lifecycle.work_totals(quire)
    assert (work.waiting, work.settled) == (30, 0)  # no worker yet: every source waits
    terminal = Terminal()
    line = ProgressLine(quire, terminal, interval=0)
    line.report()
    assert terminal.getvalue().startswith(CLEAR_LINE) and "0/30 files" in terminal.getvalue()
    drain(quire)
    work = lifecycle.work_totals(quire)
    assert (work.waiting, work.completed) == (0, 30)
    line.report()
    line.stop()
    shown = terminal.getvalue().split(CLEAR_LINE)
    assert shown[-2].startswith("Idle · ") and shown[-1] == ""  # the last line is cleared when it stops


def test_quire_worker_reports_a_runs_progress_on_stderr(data_dir: Path, tmp_path: Path) -> None:
    folder = make_docs(tmp_path / "docs", 190)  # under the cap of 200
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    assert quire_cli("run", "start", "kb", str(folder), data_dir=data_dir).returncode == 0
    done = quire_cli("--json", "worker", "--until-idle", "--progress-every", "0.2", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["jobs_finished"] >= 1  # stdout is the answer alone
    reported = [tuple(map(int, m.groups())) for m in re.finditer(r"^progress: (\d+)/(\d+) files", done.stderr, re.M)]
    assert reported, done.stderr
    assert all(total == 190 and 0 <= n <= total for n, total in reported), reported
    assert "Idle" not in "".join(line for line in done.stderr.splitlines() if "/190 files" in line)


def test_a_bad_interval_is_refused(data_dir: Path) -> None:
    done = quire_cli("worker", "--until-idle", "--progress-every", "-1", data_dir=data_dir)
    assert done.returncode == 2 and "--progress-every" in done.stderr
