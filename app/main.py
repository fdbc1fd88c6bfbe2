"""Entry point of the desktop app: ``quire gui`` / ``quire-gui`` / ``make app``.

The window appears before anything heavy is imported or opened: ``MainWindow.start`` opens the data
directory and runs startup recovery in the background, then starts the worker process. A second window
on the same data directory is refused with a clear message (``GuiInstanceLock``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.team_store import TeamStore
from knowledge.errors import DataDirInUse
from knowledge.instance_lock import GuiInstanceLock
from knowledge.paths import resolve_data_dir

if TYPE_CHECKING:
    from app.window import MainWindow

EXIT_IN_USE = 4
# Benchmarks (tests/benchmarks/bench_app.py): with QUIRE_REPORT_SHOWN=FILE the app writes into FILE the
# wall-clock time (time.time()) at which its window was shown and the event loop was running.
REPORT_SHOWN_ENV = "QUIRE_REPORT_SHOWN"
# The cold-start benchmark (tests/benchmarks/bench_coldstart.py): with QUIRE_FIRST_SEARCH=QUERY and
# QUIRE_REPORT_SEARCHED=FILE, QUERY is searched from the panel the moment the data directory is open, and the
# wall-clock times of that moment and of its hits shown are written into FILE.
FIRST_SEARCH_ENV, REPORT_SEARCHED_ENV = "QUIRE_FIRST_SEARCH", "QUIRE_REPORT_SEARCHED"


def acquire_instance_lock(data_dir: Path) -> tuple[GuiInstanceLock | None, str | None]:
    """The data directory's GUI lock, or the message saying why this window may not open."""
    lock = GuiInstanceLock(data_dir)
    try:
        lock.acquire()
    except DataDirInUse as exc:
        return None, str(exc)
    return lock, None


def make_application() -> QApplication:
    from app.resources import apply_theme, icon

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv)
    app.setApplicationName("Quire")
    app.setOrganizationName("Quire")
    app.setDesktopFileName("quire")
    app.setWindowIcon(icon("quire"))
    apply_theme(app)
    hints = app.styleHints()
    if hints is not None:  # follow the system when the person switches light/dark
        hints.colorSchemeChanged.connect(lambda _scheme: apply_theme(app))
    keep_full_collections_short()
    return app


def keep_full_collections_short() -> None:
    """Keep the cyclic GC from stalling the UI thread (measured: 45-100 ms pauses during ingest/delete).

    A full (generation 2) collection walks every tracked object, and whichever thread triggers it holds
    the GIL meanwhile: with the app's modules loaded that is tens of ms, far more once a search has
    loaded the model. Objects that survive a full collection are long-lived (modules, classes, caches),
    so they are frozen now and after every full collection (``gc.freeze``): the next full collection
    only walks what was allocated since. Cyclic garbage among frozen objects is never freed; refcounting
    still frees everything else.
    """

    if _freeze_survivors not in gc.callbacks:
        gc.freeze()
        gc.callbacks.append(_freeze_survivors)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def run_gui(data_dir: Path, store: TeamStore | None = None) -> int:
    """The window on ``data_dir`` — or, with ``store``, on a team store, ``data_dir`` being this machine's own
    directory (owned copies, caches, the worker's log), locked as ever against a second window."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = make_application()
    lock, refusal = acquire_instance_lock(data_dir)
    if lock is None:
        print(f"quire: {refusal}", file=sys.stderr)
        QMessageBox.critical(None, "Quire is already open", refusal or "")
        return EXIT_IN_USE
    try:
        from app.window import MainWindow

        window = MainWindow(data_dir, store=store)
        window.show()
        _report_shown()
        _report_first_search(window)
        window.start()
        _close_on_signals()
        return int(app.exec())
    finally:
        lock.release()


def _report_shown() -> None:
    path = os.environ.get(REPORT_SHOWN_ENV)
    if path:  # the first event-loop turn, after the show events were processed
        QTimer.singleShot(0, lambda: Path(path).write_text(f"{time.time():.6f}\n", encoding="utf-8"))


def _report_first_search(window: MainWindow) -> None:
    query, path = os.environ.get(FIRST_SEARCH_ENV), os.environ.get(REPORT_SEARCHED_ENV)
    if not query or not path:
        return
    lines: list[str] = []

    def asked(_result: object) -> None:
        lines.append(f"asked {time.time():.6f}")
        window.search_panel.query.setText(query)
        window.search_panel.run_search()

    def shown(hits: list[object]) -> None:
        if len(lines) == 1:
            lines.append(f"shown {time.time():.6f} {len(hits)}")
            Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    window.started.connect(asked)
    window.search_panel.searched.connect(shown)


def _close_on_signals() -> None:
    """Ctrl-C or SIGTERM in a terminal closes the window properly (the worker is stopped, not orphaned).

    Python runs signal handlers only between bytecodes, so a light timer lets it look while Qt waits.
    """

    def close(_signum: int, _frame: object) -> None:  # every window: File ▸ Connect may have replaced the first
        QTimer.singleShot(0, QApplication.closeAllWindows)

    signal.signal(signal.SIGINT, close)
    signal.signal(signal.SIGTERM, close)
    ticker = QTimer(QApplication.instance())
    ticker.timeout.connect(lambda: None)
    ticker.start(250)


def main() -> int:
    parser = argparse.ArgumentParser(prog="quire-gui", description="Quire: the desktop window.")
    parser.add_argument("--data-dir", help="data directory (default: QUIRE_DATA_DIR, else the platform dir)")
    args = parser.parse_args()
    return run_gui(resolve_data_dir(args.data_dir), TeamStore.from_environment())


if __name__ == "__main__":
    sys.exit(main())
