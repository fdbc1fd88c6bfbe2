"""Start-up and shutdown: the window before any model import, the worker process's life, one GUI per data dir."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import psutil
from pytestqt.qtbot import QtBot
from sqlalchemy import select

from app.main import acquire_instance_lock
from app.window import MainWindow
from jobs.schema import worker_sessions
from knowledge.lifecycle import operations
from tests.app.conftest import WindowFactory
from tests.conftest import REPO, python_proc, wait_until
from tests.knowledge.helpers import make_base

SHOW_AND_START = """
import json, sys, time
from pathlib import Path
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.main import make_application
make_application()
from app.window import MainWindow
window = MainWindow(Path(sys.argv[1]), start_worker=False)
window.show()
app.processEvents()
heavy = ("torch", "sentence_transformers", "transformers")
at_show = [m for m in heavy if m in sys.modules]
done = []
window.started.connect(done.append)
window.start()
deadline = time.monotonic() + 60
while not done and time.monotonic() < deadline:
    app.processEvents()
    time.sleep(0.01)
after_start = [m for m in heavy if m in sys.modules]
window.shutdown()
report = {"visible": window.isVisible(), "at_show": at_show, "after_start": after_start, "started": bool(done)}
print(json.dumps(report))
"""


def test_the_window_shows_and_starts_before_any_model_or_torch_import(data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, "-c", SHOW_AND_START, str(data_dir)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"visible": True, "at_show": [], "after_start": [], "started": True}


def test_the_worker_process_starts_after_the_window_and_stops_on_sigterm(
    qtbot: QtBot, open_window: WindowFactory
) -> None:
    window = open_window(start_worker=True)
    qtbot.waitUntil(lambda: window.worker.state == "running", timeout=10_000)
    pid = window.worker.pid
    assert pid is not None
    qtbot.waitUntil(lambda: pid in _worker_session_pids(window), timeout=30_000)  # past its start-up
    assert psutil.Process(pid).cmdline()[1:] == [
        "-m",
        "app.cli",
        "--data-dir",
        str(window.ctx.data_dir),
        "worker",
        "--log",
        "--progress-every",
        "0",
    ]
    log = window.ctx.data_dir / "worker.log"  # its own rotated log, owner-only
    assert log.is_file() and stat.S_IMODE(log.stat().st_mode) == 0o600
    window.shutdown()
    assert window.worker.last_exit == (0, "normal")  # it stopped by itself on SIGTERM, not killed
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_crashed_worker_is_restarted_and_takes_the_work(qtbot: QtBot, open_window: WindowFactory) -> None:
    """The window's worker killed with SIGKILL: the window starts a new one, which indexes what is added next."""
    window = open_window(start_worker=True)
    qtbot.waitUntil(lambda: window.worker.state == "running", timeout=10_000)
    first = window.worker.pid
    assert first is not None
    qtbot.waitUntil(lambda: first in _worker_session_pids(window), timeout=30_000)
    os.kill(first, signal.SIGKILL)
    qtbot.waitUntil(lambda: window.worker.last_exit is not None, timeout=10_000)
    assert window.worker.last_exit == (9, "crashed")
    qtbot.waitUntil(lambda: window.worker.pid not in (None, first), timeout=30_000)
    second = window.worker.pid
    qtbot.waitUntil(lambda: second in _worker_session_pids(window), timeout=60_000)
    quire = window.ctx.quire
    assert quire is not None
    make_base(quire)
    note = operations.add_items(quire, "kb", [operations.NoteInput("Kingfishers dive for minnows.")]).created[0]
    qtbot.waitUntil(lambda: operations.get_item(quire, "kb", note).status == "completed", timeout=180_000)
    assert window.worker.pid == second  # the restarted worker did it, and it is still running
    window.shutdown()
    assert window.worker.last_exit == (0, "normal")


def _worker_session_pids(window: MainWindow) -> set[int]:
    quire = window.ctx.quire
    assert quire is not None
    with quire.db.read() as conn:
        rows = conn.execute(select(worker_sessions.c.pid).where(worker_sessions.c.hosts_worker == 1)).all()
    return {int(r.pid) for r in rows}


def test_the_worker_stops_when_the_app_dies(data_dir: Path) -> None:
    parent_code = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-m', 'app.worker_launch', str(os.getpid()), sys.argv[1]])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = python_proc("-c", parent_code, str(data_dir))
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    wait_until(lambda: _running(child) and "app.cli" in " ".join(psutil.Process(child).cmdline()), timeout=30)
    os.kill(parent.pid, signal.SIGKILL)  # the app crashes
    parent.wait(timeout=10)
    wait_until(lambda: not _running(child), timeout=30)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_second_window_on_the_same_data_directory_is_refused(data_dir: Path) -> None:
    first, refusal = acquire_instance_lock(data_dir)
    assert first is not None and refusal is None
    try:
        second, refusal = acquire_instance_lock(data_dir)
        assert second is None
        assert refusal is not None and "Quire is already open on this data directory" in refusal
        assert str(os.getpid()) in refusal
    finally:
        first.release()
    again, refusal = acquire_instance_lock(data_dir)
    assert again is not None and refusal is None
    again.release()


def test_the_first_search_finds_the_query_process_and_vectors_warmed(
    qtbot: QtBot, data_dir: Path, open_window: WindowFactory
) -> None:
    """On a base that holds chunks, opening the window spawns the base's query process before recovery and
    warms a throwaway search meanwhile; the person's first search is answered by that same process."""
    from app import ops
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from tests.portable.helpers import synthetic_base

    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "kb", files=3, chunks_per_file=2)
    finally:
        quire.close()
    window = open_window()
    assert window.ctx.quire is not None and window.ctx.base is not None
    encoder = window.ctx.quire.query_encoder(get_base(window.ctx.quire.db, "kb"))
    assert encoder.started == 1  # spawned by open_and_recover, before any search was asked
    qtbot.waitUntil(lambda: ops.in_flight() == 0, timeout=120_000)  # the warm-up search has run
    assert window.ctx.quire.vectors.held_count(window.ctx.base.id) == 6  # its vectors are open
    panel = window.search_panel
    panel.query.setText("protein")
    with qtbot.waitSignal(panel.searched, timeout=60_000) as shown:
        panel.run_search()
    assert shown.args[0] and encoder.started == 1
