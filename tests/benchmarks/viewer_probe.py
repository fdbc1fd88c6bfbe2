"""The document viewer in the real window: ``python -m tests.benchmarks.viewer_probe DATA_DIR BASE``.

Opens ``MainWindow`` on DATA_DIR (offscreen, no worker: the base is indexed already), selects BASE and
starts the 10 ms main-thread heartbeat of ``app_probe``. For each marker query in ``QUERIES`` (a line
deep in the 300-page PDF, a passage near the end of a large Markdown file) it searches (keyword, before
the clock starts), opens the top hit with ``MainWindow.open_document_viewer`` and times until the viewer
shows it (the PDF page rendered and set, or the text selected; the searches run before the heartbeat
starts); for the PDF it then turns ``TURNS``
pages one at a time, each timed until it is shown. The heartbeat runs over all of it, so its max
lateness is the main thread's longest stall while the viewer opens, renders and turns pages; beside it,
the most CPU time the main thread spent between two ticks (its own work, without the wait for a core). Prints one
JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer

from app import ops
from app.document_viewer import DocumentViewer
from app.main import make_application
from app.prompts import YesPrompter
from app.window import MainWindow
from knowledge.search import Hit, search
from tests.benchmarks.app_probe import WorkBeat

QUERIES = {"pdf": "zqviewerpdfmarker", "text": "zqviewertextmarker"}
TURNS = 20
POLL_MS = 2
DEADLINE_S = 60.0


def main(argv: list[str]) -> int:
    data_dir, base_name = Path(argv[0]), argv[1]
    app = make_application()
    window = MainWindow(data_dir, prompter=YesPrompter(), start_worker=False, poll_ms=500)
    window.show()
    beat = WorkBeat()
    out: dict[str, Any] = {"error": None}
    plan: list[tuple[str, list[Hit]]] = []

    def fail(message: str) -> None:
        out["error"] = message
        app.quit()

    def begin() -> None:
        base = next((b for b in window.ctx.bases if b.name == base_name), None)
        if base is None:
            fail(f"no base {base_name!r}")
            return
        window.ctx.select_base(base)
        quire = window.ctx.quire
        assert quire is not None
        for kind, query in QUERIES.items():  # searched before the clock: only the viewer is measured
            hits = search(quire, base.id, query, mode="keyword", limit=5)
            if not hits:
                fail(f"{query!r} found nothing")
                return
            plan.append((kind, hits))
        beat.start()
        QTimer.singleShot(0, next_document)

    def next_document() -> None:
        if not plan:
            beat.stop()
            app.quit()
            return
        kind, hits = plan.pop(0)
        base = window.ctx.base
        assert base is not None
        t0 = time.perf_counter()
        viewer = window.open_document_viewer(base.id, hits[:1], hits[0].chunk_id)
        wait(viewer, t0, lambda elapsed: opened(kind, viewer, hits[0].page, elapsed))

    def wait(viewer: DocumentViewer, t0: float, then: Any) -> None:
        if viewer.loaded and not viewer.rendering:
            then(time.perf_counter() - t0)
        elif time.perf_counter() - t0 > DEADLINE_S:
            fail("the viewer showed nothing in time")
        else:
            QTimer.singleShot(POLL_MS, lambda: wait(viewer, t0, then))

    def opened(kind: str, viewer: DocumentViewer, page: int | None, elapsed: float) -> None:
        out[kind] = {"open_s": round(elapsed, 4), "shown": viewer.shown.kind, "page": viewer.shown.page}
        if kind == "pdf":
            out[kind].update(pages=viewer.pdf.count if viewer.pdf else None, hit_page=page)
            turn(viewer, [])
        else:
            out[kind]["characters"] = len(viewer.text.toPlainText())
            viewer.close()
            QTimer.singleShot(0, next_document)

    def turn(viewer: DocumentViewer, samples: list[float]) -> None:
        if len(samples) >= TURNS:
            out["pdf"]["turn_median_s"] = round(statistics.median(samples), 4)
            out["pdf"]["turn_max_s"] = round(max(samples), 4)
            viewer.close()
            QTimer.singleShot(0, next_document)
            return
        t0 = time.perf_counter()
        viewer.go_to_page((viewer.page_index + 1) % (viewer.pdf.count if viewer.pdf else 1))
        wait(viewer, t0, lambda elapsed: (samples.append(elapsed), turn(viewer, samples)))

    window.started.connect(lambda _r: QTimer.singleShot(0, begin))
    QTimer.singleShot(int(DEADLINE_S * (TURNS + 4) * 1000), lambda: fail("the probe timed out"))
    window.start()
    app.exec()
    window.shutdown()
    ops.wait_for_ops(10_000)
    late = sorted(beat.late)
    out["heartbeat"] = {
        "ticks": len(late),
        "max_ms": round(1000 * late[-1], 2) if late else None,
        "p99_ms": round(1000 * late[int(0.99 * (len(late) - 1))], 2) if late else None,
        "max_work_ms": round(1000 * max(beat.work), 2) if beat.work else None,
    }
    print(json.dumps(out))
    return 0 if out["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
