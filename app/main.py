"""Entry point of the desktop app: ``quire gui`` / ``quire-gui``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QMessageBox

from knowledge.errors import DataDirInUse
from knowledge.instance_lock import GuiInstanceLock
from knowledge.paths import resolve_data_dir


def run_gui(data_dir: Path) -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    lock = GuiInstanceLock(data_dir)
    try:
        lock.acquire()
    except DataDirInUse as exc:
        QMessageBox.critical(None, "Quire is already open", str(exc))
        print(f"quire: {exc}", file=sys.stderr)
        return 4
    try:
        window = QMainWindow()
        window.setWindowTitle(f"Quire — {data_dir}")
        window.setCentralWidget(QLabel(f"Data directory: {data_dir}"))
        window.resize(1000, 700)
        window.show()
        return int(app.exec())
    finally:
        lock.release()


def main() -> int:
    parser = argparse.ArgumentParser(prog="quire-gui")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    return run_gui(resolve_data_dir(args.data_dir))


if __name__ == "__main__":
    sys.exit(main())
