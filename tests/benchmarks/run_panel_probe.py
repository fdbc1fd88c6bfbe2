"""The real window open on the Folder runs tab while its worker executes a big folder run, with a 10 ms
main-thread heartbeat.

``python -m tests.benchmarks.run_panel_probe DATA_DIR BASE FOLDER`` — opens ``MainWindow`` on DATA_DIR
(offscreen, with its real worker process; the folder-run cap raised to fit FOLDER first), shows the
Folder runs tab, previews FOLDER into BASE, starts the
run the way the Start button does, and keeps the run selected (its Sources tab shown) until it is terminal,
scrolling the sources table to its end every two seconds as a person reading along would. The heartbeat
(``app_probe.WorkBeat``) runs from Start until 1.5 s after the run is terminal; each kind of ``Op`` callback
is timed. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt, QTimer  # noqa: TID251 - drives the real window in its own process
from PySide6.QtWidgets import QApplication  # noqa: TID251

from app import ops
from app.main import make_application
from app.prompts import YesPrompter
from app.run_reads import PreviewOutcome
from app.window import MainWindow
from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import RunSummary
from knowledge.store.schema_runs import TERMINAL_RUN_STATUSES
from tests.benchmarks.app_probe import TAIL_MS, TIMEOUT_S, WorkBeat

SCROLL_MS = 2000
slowest: dict[str, float] = {}  # the longest each kind of Op callback held the main thread, in seconds


def _handler_name(callback: Callable[[], None]) -> str:
    for cell in callback.__closure__ or ():
        op = cell.cell_contents
        if isinstance(op, ops.Op):
            handler = op._success or op._failure
            return str(getattr(handler, "__qualname__", handler))
    return "?"


def time_callbacks() -> None:
    """Time every Op callback the main thread runs (patched before the first Op makes the bridge)."""
    real = ops._Bridge._run

    def timed(bridge: ops._Bridge, callback: Callable[[], None]) -> None:
        started = time.perf_counter()
        real(bridge, callback)
        name = _handler_name(callback)
        slowest[name] = max(slowest.get(name, 0.0), time.perf_counter() - started)

    ops._Bridge._run = timed  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    data_dir, base_name, folder = Path(argv[0]), argv[1], Path(argv[2])
    quire = open_quire(data_dir)
    try:
        folder_runs.set_descendant_cap(quire, 2 * sum(1 for _ in folder.rglob("*")))  # the walk is set-up here
    finally:
        quire.close()
    time_callbacks()
    app = make_application()
    window = MainWindow(data_dir, prompter=YesPrompter(), start_worker=True, poll_ms=500)
    window.show()
    panel = window.folder_runs_panel
    beat = WorkBeat()
    state: dict[str, object] = {"phase": "starting", "t0": 0.0, "t1": 0.0, "status": None, "error": None}
    scroller = QTimer()
    scroller.setInterval(SCROLL_MS)
    scroller.timeout.connect(panel.sources_table.scrollToBottom)

    def finish() -> None:
        state["t1"] = time.perf_counter()
        beat.stop()
        scroller.stop()
        app.quit()

    def begin() -> None:
        base = next((b for b in window.ctx.bases if b.name == base_name), None)
        if base is None:
            raise SystemExit(f"no base {base_name!r}")
        window.ctx.select_base(base)
        window.tabs.setCurrentWidget(panel)
        panel.base_combo.setCurrentIndex(panel.base_combo.findData(base.id))
        panel.preview(folder)

    def previewed(outcome: PreviewOutcome) -> None:
        if outcome.preview is None:
            state["error"] = outcome.refusal
            finish()
            return
        state["phase"], state["t0"] = "working", time.perf_counter()
        state["sources"] = len(outcome.preview.eligible)
        beat.start()
        scroller.start()
        panel.start_run()

    def runs_shown(_runs: list[RunSummary]) -> None:
        summary = panel.selected_summary()
        if state["phase"] != "working" or summary is None or summary.run.status not in TERMINAL_RUN_STATUSES:
            return
        state["phase"], state["status"] = "tail", summary.run.status
        state["counts"] = summary.counts
        QTimer.singleShot(TAIL_MS, finish)  # the panel's last refreshes count too

    panel.previewed.connect(previewed)
    panel.runs_shown.connect(runs_shown)
    window.started.connect(lambda _r: QTimer.singleShot(500, begin))
    QTimer.singleShot(TIMEOUT_S * 1000, finish)
    window.start()
    app.exec()
    shown = {"rows_paged_in": panel.sources_model.rowCount(), "audit_rows": panel.audit_model.rowCount()}
    window.shutdown()
    ops.wait_for_ops(10_000)
    summary = beat.summary()
    summary["max_work_ms"] = round(max(beat.work, default=0.0) * 1000, 2)
    print(
        json.dumps(
            {
                "seconds": round(float(state["t1"]) - float(state["t0"]), 2),  # type: ignore[arg-type]
                "status": state["status"],
                "sources": state.get("sources"),
                "counts": state.get("counts"),
                "shown": shown,
                "error": state["error"],
                "heartbeat": summary,
                "slowest_callbacks_ms": {
                    k: round(v * 1000, 2) for k, v in sorted(slowest.items(), key=lambda kv: -kv[1])[:8]
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    QApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    sys.exit(main(sys.argv[1:]))
