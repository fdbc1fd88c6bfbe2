"""The real window in its own process, with a 10 ms main-thread heartbeat while work happens around it.

``python -m tests.benchmarks.app_probe ingest DATA_DIR BASE FOLDER`` — opens ``MainWindow`` on DATA_DIR
(offscreen, with its real worker process), selects BASE, starts the heartbeat, adds FOLDER the way a
drop does (``MainWindow.add_paths``) and runs until the worker has nothing left to do.

``python -m tests.benchmarks.app_probe delete DATA_DIR BASE ROOT_ID`` — the same, but the root item is
expanded (its first page of rows loaded), selected and deleted with the window's Delete action (the
confirmation answered yes); runs until the delete job is done.

The heartbeat is a ``QTimer`` (10 ms, precise) on the main thread; a tick's lateness is how much later
than 10 ms after the previous tick it ran, from the moment the work is asked for until 1.5 s after the
worker has nothing left (the window's last refreshes included). ``make_application`` sets the process up
as ``quire gui`` does. Prints one JSON line with max / p99 / p50 lateness.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QModelIndex, Qt, QTimer
from PySide6.QtWidgets import QApplication

from app import ops
from app.main import make_application
from app.prompts import YesPrompter
from app.startup import PollResult
from app.window import MainWindow

INTERVAL_S = 0.010
TIMEOUT_S = 1800
TAIL_MS = 1500


class Heartbeat:
    def __init__(self) -> None:
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(int(INTERVAL_S * 1000))
        self.timer.timeout.connect(self._tick)
        self.late: list[float] = []
        self._last = 0.0

    def start(self) -> None:
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.late.append(max(0.0, now - self._last - INTERVAL_S))
        self._last = now

    def summary(self) -> dict[str, float]:
        values = sorted(self.late) or [0.0]

        def pct(q: float) -> float:
            return round(values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] * 1000, 2)

        return {
            "ticks": len(self.late),
            "max_ms": round(values[-1] * 1000, 2),
            "p99_ms": pct(0.99),
            "p50_ms": pct(0.50),
        }


class WorkBeat(Heartbeat):
    """The heartbeat, also counting the main thread's own CPU time between ticks: on a machine busier
    than its cores, lateness includes waiting for a core; the CPU time is the work the thread did."""

    def __init__(self) -> None:
        super().__init__()
        self.work: list[float] = []
        self._cpu = 0.0

    def start(self) -> None:
        self._cpu = time.thread_time()
        super().start()

    def _tick(self) -> None:
        cpu = time.thread_time()
        self.work.append(cpu - self._cpu)
        self._cpu = cpu
        super()._tick()


def main(argv: list[str]) -> int:
    action, data_dir, base_name, what = argv[0], Path(argv[1]), argv[2], argv[3]
    app = make_application()
    window = MainWindow(data_dir, prompter=YesPrompter(), start_worker=True, poll_ms=500)
    window.show()
    beat = Heartbeat()
    state = {"phase": "starting", "saw_work": False, "t0": 0.0, "t1": 0.0}

    def finish() -> None:
        state["t1"] = time.perf_counter()
        beat.stop()
        app.quit()

    def polled(result: PollResult) -> None:
        if state["phase"] != "working":
            return
        busy = result.live_jobs > 0 or (result.progress is not None and result.progress.active > 0)
        if busy:
            state["saw_work"] = True
        elif state["saw_work"] or time.perf_counter() - state["t0"] > 30:
            state["phase"] = "tail"
            QTimer.singleShot(TAIL_MS, finish)  # the last refreshes of the window count too

    def begin() -> None:
        base = next((b for b in window.ctx.bases if b.name == base_name), None)
        if base is None:
            raise SystemExit(f"no base {base_name!r}")
        window.ctx.select_base(base)
        if action == "ingest":
            QTimer.singleShot(500, start_ingest)
        else:
            QTimer.singleShot(500, lambda: expand_then_delete(int(what)))

    def start_ingest() -> None:
        state["phase"], state["t0"] = "working", time.perf_counter()
        beat.start()
        window.add_paths([Path(what)])

    def expand_then_delete(root_id: int, tries: int = 0) -> None:
        index = window.model.index_for_id(root_id)
        if not index.isValid():
            if tries > 200:
                raise SystemExit(f"item {root_id} never appeared in the tree")
            if window.model.canFetchMore(QModelIndex()):
                window.model.fetchMore(QModelIndex())
            QTimer.singleShot(50, lambda: expand_then_delete(root_id, tries + 1))
            return
        window.tree.expand(index)
        if window.model.canFetchMore(index):
            window.model.fetchMore(index)
        QTimer.singleShot(1500, lambda: delete_root(root_id))

    def delete_root(root_id: int) -> None:
        from PySide6.QtCore import QItemSelectionModel

        index = window.model.index_for_id(root_id)
        window.tree.selectionModel().select(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        state["loaded_rows"] = window.model.rowCount(index)
        state["phase"], state["t0"] = "working", time.perf_counter()
        beat.start()
        window.delete_selected()

    window.started.connect(lambda _r: QTimer.singleShot(0, begin))
    window.polled.connect(polled)
    QTimer.singleShot(TIMEOUT_S * 1000, finish)
    window.start()
    app.exec()
    window.shutdown()
    ops.wait_for_ops(10_000)
    print(
        json.dumps(
            {
                "action": action,
                "seconds": round(state["t1"] - state["t0"], 2),
                "saw_work": state["saw_work"],
                "loaded_rows": state.get("loaded_rows"),
                "heartbeat": beat.summary(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    QApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    sys.exit(main(sys.argv[1:]))
