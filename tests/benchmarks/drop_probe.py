"""Drop to searchable, in the real window: ``python -m tests.benchmarks.drop_probe DATA_DIR BASE FOLDER COUNT``.

Opens ``MainWindow`` on DATA_DIR (offscreen) with its real worker process, selects BASE and waits until the
worker is idle. Then, COUNT times (after two warm-up drops that are not counted): writes a one-page note
(alternately ``.txt`` and ``.md``, ~300 words, with a word found nowhere else) into FOLDER, hands it to the
window the way a drop does (``MainWindow.add_paths``) and searches for that word (keyword mode, on the
main thread, every 10 ms) until the note is a hit; the time from the drop to the first hit is one sample.
Before the next drop the worker must be idle again (no live job). The found note is then searched once
more in hybrid mode (the window's default) and must be among the first ten hits. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from app import ops
from app.main import make_application
from app.prompts import YesPrompter
from app.window import MainWindow
from knowledge.search import search

WARMUP = 2
POLL_MS = 10
DEADLINE_S = 60.0
WARMUP_DEADLINE_S = 600.0
SENTENCE = (
    "the committee reviewed the quarterly figures and agreed that the shipping delays came from the new "
    "warehouse schedule rather than from the suppliers themselves so the plan is to move the evening shift "
    "forward by an hour and to measure again at the end of next month before anything else changes"
)
WORDS = SENTENCE.split()


def note_text(n: int, marker: str) -> str:
    body = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(300))
    return f"Meeting note {n}\n\nReference {marker}.\n\n{body}\n"


def main(argv: list[str]) -> int:
    data_dir, base_name, folder, count = Path(argv[0]), argv[1], Path(argv[2]), int(argv[3])
    folder.mkdir(parents=True, exist_ok=True)
    app = make_application()
    window = MainWindow(data_dir, prompter=YesPrompter(), start_worker=True, poll_ms=500)
    window.show()
    samples: list[float] = []
    hybrid_top: list[bool] = []
    state: dict[str, Any] = {"n": 0, "error": None}

    def fail(message: str) -> None:
        state["error"] = message
        app.quit()

    def begin() -> None:
        base = next((b for b in window.ctx.bases if b.name == base_name), None)
        if base is None:
            fail(f"no base {base_name!r}")
            return
        window.ctx.select_base(base)
        QTimer.singleShot(0, drop_next)

    def worker_idle() -> bool:
        quire = window.ctx.quire
        return (
            quire is not None
            and not quire.queue.list(status="pending", limit=1)
            and not quire.queue.list(status="running", limit=1)
        )

    def drop_next() -> None:
        if state["n"] >= count + WARMUP:
            app.quit()
            return
        if not worker_idle():
            QTimer.singleShot(20, drop_next)
            return
        n = state["n"]
        marker = f"zqdrop{n:03d}x{os.getpid()}"
        path = folder / f"note-{n:03d}.{'md' if n % 2 else 'txt'}"
        path.write_text(note_text(n, marker), encoding="utf-8")
        t0 = time.perf_counter()
        window.add_paths([path])
        QTimer.singleShot(0, lambda: look(n, marker, t0))

    def look(n: int, marker: str, t0: float) -> None:
        """One keyword search for the note's word, on the main thread; again in 10 ms until it is found."""
        quire, base = window.ctx.quire, window.ctx.base
        assert quire is not None and base is not None
        if not search(quire, base.id, marker, mode="keyword", limit=1):
            deadline = DEADLINE_S if n >= WARMUP else WARMUP_DEADLINE_S  # the first drop may wait for the model
            if time.perf_counter() - t0 > deadline:
                fail(f"note {n} was not searchable within {deadline:.0f} s")
            else:
                QTimer.singleShot(POLL_MS, lambda: look(n, marker, t0))
            return
        elapsed = time.perf_counter() - t0
        if n >= WARMUP:
            samples.append(elapsed)
            hits = search(quire, base.id, f"reference {marker}", mode="hybrid", limit=10)
            hybrid_top.append(any(marker in hit.text for hit in hits))
        state["n"] = n + 1
        QTimer.singleShot(0, drop_next)

    window.started.connect(lambda _r: QTimer.singleShot(0, begin))
    QTimer.singleShot(int((DEADLINE_S * count + WARMUP_DEADLINE_S * WARMUP) * 1000), app.quit)
    window.start()
    app.exec()
    window.shutdown()
    ops.wait_for_ops(10_000)
    ordered = sorted(samples)

    def pct(q: float) -> float | None:
        if not ordered:
            return None
        return round(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))], 3)

    print(
        json.dumps(
            {
                "drops": len(samples),
                "warmup_drops": WARMUP,
                "p50_s": pct(0.50),
                "p95_s": pct(0.95),
                "max_s": round(ordered[-1], 3) if ordered else None,
                "samples_s": [round(s, 3) for s in samples],
                "hybrid_found": sum(hybrid_top),
                "error": state["error"],
            }
        )
    )
    return 0  # the caller reads "error"


if __name__ == "__main__":
    QApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    sys.exit(main(sys.argv[1:]))
