"""Render the main views into PNGs: ``python -m app.screenshots docs/screenshots`` (``make screenshots``).

It builds a small demo in a temporary data directory — a base with the sample notes of
``resources/sample`` plus what real folders hold (a photo of a whiteboard and a scanned letter, read by
OCR; a holiday photo with no text, an archive, an empty file and an ignored draft, all skipped quietly)
indexed by the real worker process, and a folder run over a copy of the same notes into a second base —
then grabs the main window with its menu bar, the search panel (results grouped by document), the chunk
viewer, the document viewer on a PDF hit, the folder-run panel, the Preferences dialog, and the main
window in the dark palette. Run it offscreen (``QT_QPA_PLATFORM=offscreen``); it takes a minute, mostly
the worker loading the model.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QModelIndex
from PySide6.QtWidgets import QApplication, QWidget

log = logging.getLogger("quire.screenshots")
TIMEOUT = 240.0


def spin_until(predicate: Callable[[], object], what: str, timeout: float = TIMEOUT) -> None:
    """Run the event loop until ``predicate`` holds (the script's only way of waiting)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        QCoreApplication.processEvents()
        time.sleep(0.02)


def prepare_demo(root: Path) -> tuple[Path, Path, Path]:
    """A data directory with two bases, and two copies of the sample notes to add."""
    from app.bases_panel import create_default_base
    from app.resources import resources_dir
    from knowledge.compose import open_quire

    data_dir, notes, project = root / "data", root / "Notes", root / "Project notes"
    shutil.copytree(resources_dir() / "sample", notes)
    add_real_folder_files(notes)
    shutil.copytree(resources_dir() / "sample", project)
    _text_image(["Sprint review 12 March", "ship the export button"]).save(project / "scan-2024-03-12.png")
    (project / "private").mkdir()
    (project / "private" / "salary-review.md").write_text("# Salary review\n\nNot for the index.\n")
    (project / ".quireignore").write_text("private/\n")
    quire = open_quire(data_dir)
    try:
        create_default_base(quire, "Household")
        create_default_base(quire, "Work")
    finally:
        quire.close()
    return data_dir, notes, project


def _text_image(lines: list[str], size: tuple[int, int] = (1240, 700)) -> Any:
    """A picture of text (what a phone photo of a whiteboard or a scanner gives), for OCR."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=44)
    for row, line in enumerate(lines):
        draw.text((90, 110 + row * 80), line, fill=0, font=font)
    return image


ORCHARD_GUIDE = [
    [
        "A small orchard through the year",
        "",
        "Choosing trees",
        "A garden orchard starts with rootstocks as much as varieties. A dwarfing stock such",
        "as M9 keeps an apple tree below two metres and fruiting from its third year; a",
        "vigorous one makes a tree for a meadow that will outlive the person who planted it.",
        "Buy two-year-old trees with a clean graft union and plant them while dormant, with",
        "the union a hand's width above the soil so the variety does not root on its own.",
        "Most apples and pears need a partner of another variety that flowers at the same",
        "time; the nursery's pollination groups tell which ones do.",
        "",
        "Winter pruning of apples and pears",
        "Apple and pear trees are pruned in late winter, while they are dormant and before",
        "the buds swell. Cut out dead, damaged and crossing branches first, then thin the",
        "centre so light and air reach every part of the crown. Never remove more than a",
        "quarter of the canopy in one winter: hard cuts answer with a thicket of upright",
        "water shoots the following summer. Cut just above an outward-facing bud, sloping",
        "away from it, and leave the branch collar so the wound can close.",
        "",
        "Stone fruit is pruned in summer",
        "Plums, cherries, apricots and peaches are the exception. They are pruned in summer,",
        "in dry weather after fruiting, because the wounds of a winter cut let in silver",
        "leaf and bacterial canker, which enter through open cuts in cold, wet months.",
        "Keep their pruning light: shorten long shoots and remove whatever is dead, and let",
        "the tree keep its natural shape.",
    ],
    [
        "Feeding and mulching",
        "In early spring spread a ring of compost around each tree, a hand's width clear of",
        "the trunk, and top it with bark mulch to hold the moisture in. Grass competes hard",
        "for water and nitrogen: keep a clear circle a metre across for the first years.",
        "Young trees need watering through their first two summers; a deep soak once a week",
        "does more good than a daily splash that never reaches the roots.",
        "",
        "Thinning the fruit",
        "When the June drop is over, thin apples to one or two fruits a cluster, a hand",
        "apart. The tree sets more than it can fill; thinned fruit grows larger and the",
        "tree crops again next year instead of resting every other one.",
    ],
]


def write_text_pdf(path: Path, pages: list[list[str]]) -> None:
    """A PDF with a real text layer (drawn by Qt's PDF writer), as a word processor would export it."""
    from PySide6.QtGui import QFont, QPageSize, QPainter, QPdfWriter

    writer = QPdfWriter(str(path))
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setResolution(72)  # painter units are PDF points
    painter = QPainter(writer)
    for number, lines in enumerate(pages):
        if number:
            writer.newPage()
        for row, line in enumerate(lines):
            painter.setFont(QFont("Sans Serif", 16 if row == 0 else 10, 700 if row == 0 else 400))
            painter.drawText(30, 40 + 18 * row, line)
    painter.end()


def add_real_folder_files(folder: Path) -> None:
    """What real folders hold besides notes: read by OCR, or skipped with a reason (never a red row)."""
    import io
    import zipfile

    from PIL import Image, ImageDraw

    write_text_pdf(folder / "orchard-guide.pdf", ORCHARD_GUIDE)

    whiteboard = _text_image(["Garden plan for spring", "tomatoes by the south wall", "water the seedlings daily"])
    try:
        import pillow_heif

        pillow_heif.from_pillow(whiteboard.convert("RGB")).save(folder / "whiteboard-photo.heic", quality=90)
    except ImportError:  # without the HEIC decoder the demo shows the same photo as a PNG
        whiteboard.save(folder / "whiteboard-photo.png")
    letter = [_text_image(["Dear neighbour,", "the hedge will be trimmed on Saturday."], (1240, 1754))]
    letter.append(_text_image(["Kind regards,", "the garden committee"], (1240, 1754)))
    letter[0].save(folder / "scanned-letter.pdf", save_all=True, append_images=letter[1:], resolution=150)
    photo = Image.linear_gradient("L").resize((900, 600)).convert("RGB")  # a holiday photo: no text in it
    ImageDraw.Draw(photo).ellipse((520, 80, 680, 240), fill=(250, 220, 120))
    photo.save(folder / "holiday.jpg", quality=85)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("receipts/2024-01.txt", "groceries 42.10")
    (folder / "receipts.zip").write_bytes(archive.getvalue())
    (folder / "shopping-list.txt").write_text("")
    (folder / "draft.tmp").write_text("half a thought")
    (folder / ".quireignore").write_text("*.tmp\n")


def expand_all(window: object) -> None:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    model, tree = window.model, window.tree

    def loaded(index: QModelIndex) -> bool:
        return not model.can_fetch_page(index) and not model.fetching(index)

    def expand(parent: QModelIndex) -> None:
        for row in range(model.rowCount(parent)):
            index = model.index(row, 0, parent)
            item = model.item_at(index)
            if item is not None and item.is_container:
                tree.expand(index)
                spin_until(functools.partial(loaded, index), "a folder's rows")
                expand(index)

    expand(QModelIndex())


def settled(window: object) -> bool:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    model = window.model
    rows = [model.item_at(model.index(r, 0)) for r in range(model.rowCount())]
    return bool(rows) and all(i is not None and i.status in ("completed", "failed", "skipped") for i in rows)


def grab(widget: QWidget, path: Path) -> None:
    from PySide6.QtWidgets import QMainWindow

    if isinstance(widget, QMainWindow):
        widget.statusBar().clearMessage()
    QCoreApplication.processEvents()
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print(f"wrote {path}")


def render(out_dir: Path) -> list[Path]:
    from app.main import make_application
    from app.prompts import YesPrompter
    from app.window import MainWindow

    make_application()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="quire-demo-") as tmp:
        data_dir, notes, project = prepare_demo(Path(tmp))
        window = MainWindow(data_dir, prompter=YesPrompter(), start_worker=True, poll_ms=200)
        window.resize(1280, 780)
        window.show()
        done: list[object] = []
        window.started.connect(done.append)
        window.start()
        spin_until(lambda: done, "start-up")
        shots = _shoot(window, out_dir, notes, project)
        window.shutdown()
        window.close()
    return shots


def _shoot(window: object, out_dir: Path, notes: Path, project: Path) -> list[Path]:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    household = next(b for b in window.ctx.bases if b.name == "Household")
    window.ctx.select_base(household)
    window.add_paths([notes])
    spin_until(lambda: settled(window), "the sample notes to be indexed")
    expand_all(window)
    window.message_bar.dismiss()
    _select(window, "tomato-growing.md")
    shots = [out_dir / "main-window.png"]
    grab(window, shots[-1])

    shots.append(_search(window, out_dir))
    shots.append(_chunks(window, out_dir))
    shots.append(_document_viewer(window, out_dir))
    shots.append(_folder_run(window, out_dir, project))
    shots.append(_preferences(window, out_dir))
    shots.append(_dark(window, out_dir))
    return shots


def _preferences(window: object, out_dir: Path) -> Path:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    dialog = window.menus.open_preferences()
    spin_until(lambda: dialog.is_loaded, "the preferences")
    path = out_dir / "preferences.png"
    grab(dialog, path)
    dialog.close()
    return path


def _dark(window: object, out_dir: Path) -> Path:
    from PySide6.QtGui import QPalette

    from app.resources import apply_theme
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    light = QPalette(app.palette())
    apply_theme(app, dark=True)
    household = next(b for b in window.ctx.bases if b.name == "Household")
    hits: list[object] = []
    window.search_panel.searched.connect(hits.append)
    window.ctx.select_base(household)  # back from the folder run's base: the typed query searches again
    window.tabs.setCurrentWidget(window.search_panel)
    spin_until(lambda: hits, "search results in the dark palette")
    path = out_dir / "dark-mode.png"
    grab(window, path)
    app.setPalette(light)
    apply_theme(app, dark=False)
    return path


def _select(window: object, name: str) -> None:
    from PySide6.QtCore import QItemSelectionModel

    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    item = next(i for i in window.model.loaded_items() if i.name == name)
    flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
    window.tree.selectionModel().select(window.model.index_for_id(item.id), flags)


def _search(window: object, out_dir: Path) -> Path:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    panel = window.search_panel
    window.tabs.setCurrentWidget(panel)
    hits: list[object] = []
    panel.searched.connect(hits.append)
    panel.query.setText("why do tomatoes get black patches at the bottom")  # searches as it is typed
    spin_until(lambda: hits, "search results")
    path = out_dir / "search.png"
    grab(window, path)
    return path


def _chunks(window: object, out_dir: Path) -> Path:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    hit = window.search_panel.current_hit()
    assert hit is not None and window.ctx.base is not None
    viewer = window.open_chunk_viewer(window.ctx.base.id, hit.item_id, hit.item_name, hit.chunk_id)
    spin_until(lambda: viewer.loaded, "the chunk viewer")
    path = out_dir / "chunk-viewer.png"
    grab(viewer, path)
    viewer.close()
    return path


def _document_viewer(window: object, out_dir: Path) -> Path:
    """A PDF hit in the document viewer: its page, the passage painted over the text."""
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    panel = window.search_panel
    found: list[list[Any]] = []
    panel.searched.connect(found.append)
    panel.query.setText("when should plum trees be pruned")
    spin_until(lambda: found, "search results for the orchard guide")
    hits = [h for h in found[-1] if h.item_name == "orchard-guide.pdf"]
    assert hits and window.ctx.base is not None, "the orchard guide was not found"
    viewer = window.open_document_viewer(window.ctx.base.id, hits, hits[0].chunk_id)
    viewer.resize(900, 640)
    spin_until(lambda: viewer.loaded and not viewer.rendering, "the document viewer")
    path = out_dir / "document-viewer.png"
    grab(viewer, path)
    viewer.close()
    return path


def _folder_run(window: object, out_dir: Path, project: Path) -> Path:
    from app.window import MainWindow

    assert isinstance(window, MainWindow)
    work = next(b for b in window.ctx.bases if b.name == "Work")
    window.ctx.select_base(work)
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)
    panel.base_combo.setCurrentIndex(panel.base_combo.findData(work.id))
    previews: list[object] = []
    panel.previewed.connect(previews.append)
    panel.preview(project)
    spin_until(lambda: previews, "the folder-run preview")
    panel.start_run()
    spin_until(
        lambda: (summary := panel.selected_summary()) is not None and summary.run.status == "completed",
        "the folder run",
    )
    spin_until(
        lambda: panel.run_view is not None and panel.run_view.summary.run.status == "completed", "details"
    )
    path = out_dir / "folder-runs.png"
    grab(window, path)
    return path


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    out_dir = Path(argv[0] if argv else "docs/screenshots")
    QApplication.instance() or QApplication([sys.argv[0]])
    render(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
