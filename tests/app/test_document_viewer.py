"""The document viewer on real hits: real files, indexed by the window's real worker, searched, opened.

A PDF hit opens at its page with the highlight over the passage's text, checked against pdfium's own
character boxes; a Markdown hit opens scrolled to its lines, selected; a deleted item's hit shows a
message and none of its content; a copy pdfium cannot open shows a message, not an exception.
"""

from __future__ import annotations

import random
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from pytestqt.qtbot import QtBot

from app import document_viewer
from app.document_viewer import DocumentViewer, Shown
from app.window import MainWindow
from knowledge import lifecycle
from knowledge.search import Hit
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, create_base, load_all, select_ids, tree_items
from tests.sources.builders import make_pdf
from tests.support.prompters import ScriptedPrompter

WORD_LIST = (
    "river stone lantern harbor meadow copper violin orchard ledger compass quarry saddle thimble walnut "
    "beacon parcel timber glacier anchor canvas falcon marble pigeon rudder sprocket tunnel velvet willow "
    "basalt cobalt drizzle ember fennel gravel hinge ivory juniper kettle lumber mortar nectar oyster pebble"
)
WORDS = WORD_LIST.split()
TARGET = [
    "Blossom end rot in tomatoes comes from a shortage of calcium",
    "reaching the fruit, most often when watering is uneven",
    "in hot weather; mulch the beds and water deeply each week.",
]
SECOND = "Peppers show blossom end rot too when calcium cannot reach them."
QUERY = "blossom end rot calcium"


def _filler(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + "." for _ in range(count)]


def _settled(qtbot: QtBot, window: MainWindow) -> bool:
    load_all(qtbot, window.model)
    found = tree_items(window.model)
    return bool(found) and all(i.status in ("completed", "failed", "skipped") for i in found)


def _index(qtbot: QtBot, window: MainWindow, paths: list[Path]) -> None:
    window.add_paths(paths)
    qtbot.waitUntil(lambda: _settled(qtbot, window), timeout=WORKER_TIMEOUT_MS)
    assert {i.status for i in tree_items(window.model) if not i.is_container} == {"completed"}


def _search(qtbot: QtBot, window: MainWindow, text: str) -> list[Hit]:
    panel = window.search_panel
    panel.query.setText(text)
    panel.mode.setCurrentText("hybrid")
    with qtbot.waitSignal(panel.searched, timeout=WORKER_TIMEOUT_MS) as blocker:
        panel.run_search()
    return list(blocker.args[0])


def _open_top_hit(qtbot: QtBot, window: MainWindow) -> DocumentViewer:
    window.search_panel.table.selectRow(0)
    window.search_panel.show_in_document()
    viewer = window.findChild(DocumentViewer, "documentViewer")
    assert viewer is not None
    qtbot.waitUntil(lambda: viewer.loaded, timeout=20_000)
    return viewer


def _inside(box: tuple[float, float, float, float], boxes: list[tuple[float, float, float, float]]) -> bool:
    left, bottom, right, top = box
    return any(
        x0 - 0.5 <= left and right <= x1 + 0.5 and y0 - 0.5 <= bottom and top <= y1 + 0.5 for x0, y0, x1, y1 in boxes
    )


def _center_in(box: tuple[float, float, float, float], boxes: list[tuple[float, float, float, float]]) -> bool:
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return any(x0 <= x <= x1 and y0 <= y <= y1 for x0, y0, x1, y1 in boxes)


def _line_boxes(textpage: pdfium.PdfTextPage, line: str) -> list[tuple[float, float, float, float]]:
    """pdfium's boxes of the characters of ``line`` on the page (spaces have none worth checking)."""
    found = textpage.search(line, match_case=True).get_next()
    assert found is not None, f"{line!r} is not on the page"
    index, count = found
    boxes = [textpage.get_charbox(i) for i in range(index, index + count)]
    return [b for b in boxes if b[2] - b[0] > 0.5 and b[3] - b[1] > 0.5]


def _current_boxes(viewer: DocumentViewer) -> list[tuple[float, float, float, float]]:
    page = viewer.canvas.page
    assert page is not None
    return [box for h in page.highlights if h.current for box in h.boxes]


def _check_highlight(viewer: DocumentViewer, pdf: bytes, lines: list[str], passage: str) -> None:
    """Every character of the passage's whole lines lies in the highlight; lines two away stay clear."""
    assert viewer.shown.kind == "pdf" and viewer.shown.page is not None
    document = pdfium.PdfDocument(pdf)
    try:
        textpage = document[viewer.shown.page - 1].get_textpage()
        highlight = _current_boxes(viewer)
        assert highlight, "nothing highlighted"
        inside = [n for n, line in enumerate(lines) if line in passage]
        assert inside, "the passage holds no whole line of its page"
        for n in inside:
            assert all(_inside(box, highlight) for box in _line_boxes(textpage, lines[n])), lines[n]
        far = [n for n in range(len(lines)) if all(abs(n - m) >= 2 for m in inside)]
        assert far, "the passage covers the whole page: nothing to check outside it"
        for n in far:
            assert not any(_center_in(box, highlight) for box in _line_boxes(textpage, lines[n])), lines[n]
    finally:
        document.close()
    canvas = viewer.canvas
    assert canvas.current_rects() and all(canvas.rect().contains(r.toRect()) for r in canvas.current_rects())


def test_a_pdf_hit_opens_at_its_page_with_its_passage_highlighted_and_steps_to_the_next_hit(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path, prompter: ScriptedPrompter
) -> None:
    create_base(data_dir, "garden")
    pages = [_filler(seed, 46) for seed in range(5)]
    pages[2][20:23] = TARGET  # the passage stands mid-page 3: the chunk holding it starts on that page
    pages[4][30] = SECOND
    pdf = make_pdf(pages)
    path = tmp_path / "garden-notes.pdf"
    path.write_bytes(pdf)
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(make_pdf([["Quinces ripen late in autumn and keep for weeks in a cool shed."]]))
    window = open_window(start_worker=True)
    _index(qtbot, window, [path, damaged])

    hits = _search(qtbot, window, QUERY)
    top = hits[0]
    assert Path(top.source_path or "").name == "garden-notes.pdf" and TARGET[0] in top.text and top.page == 3
    viewer = _open_top_hit(qtbot, window)
    assert viewer.shown == Shown("pdf", page=3)
    _check_highlight(viewer, pdf, pages[2], top.text)

    # the document's other hits are a step away, in reading order; each opens at its own page
    document = viewer.document
    assert document is not None and len(document.passages) >= 2
    assert [p.ordinal for p in document.passages] == sorted(p.ordinal for p in document.passages)
    for index, passage in enumerate(document.passages):
        viewer.go_to_hit(index)
        qtbot.waitUntil(lambda: not viewer.rendering, timeout=10_000)
        assert viewer.shown.page == passage.location.page and viewer.canvas.current_rects()
    second = next(p for p in document.passages if SECOND in p.text)
    viewer.go_to_hit(document.passages.index(second))
    qtbot.waitUntil(lambda: not viewer.rendering, timeout=10_000)
    assert viewer.shown.page == 5
    _check_highlight(viewer, pdf, pages[4], second.text)

    # page by page on request; "Open in default app" hands the source over as the search panel does
    viewer.go_to_page(0)
    qtbot.waitUntil(lambda: not viewer.rendering, timeout=10_000)
    assert viewer.shown.page == 1
    assert not viewer.prev_page.isEnabled() and viewer.next_page.isEnabled()
    viewer.open_button.click()
    assert prompter.opened_at and prompter.opened_at[-1].path == path  # type: ignore[attr-defined]
    viewer.close()

    # the base's own copy is damaged on disk (the original is fine): a message and the passage as text
    top = _search(qtbot, window, "quinces ripen late in autumn")[0]
    assert Path(top.source_path or "").name == "damaged.pdf"
    quire, base = window.ctx.quire, window.ctx.base
    assert quire is not None and base is not None
    copy = lifecycle.owned_copy_path(quire, lifecycle.get_item(quire, base.id, top.item_id))
    assert copy is not None and copy != damaged
    copy.write_bytes(b"%PDF-1.4\nthis copy was damaged on disk\n")
    viewer = _open_top_hit(qtbot, window)
    qtbot.waitUntil(lambda: viewer.shown.kind == "text", timeout=10_000)
    assert viewer.stack.currentWidget() is viewer.text and "cannot be shown" in viewer.header.text()
    assert "Quinces ripen late" in viewer.text.textCursor().selectedText()
    viewer.close()


def test_a_markdown_hit_opens_at_its_lines_and_a_deleted_items_hit_opens_nothing(
    qtbot: QtBot,
    open_window: WindowFactory,
    data_dir: Path,
    tmp_path: Path,
    prompter: ScriptedPrompter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_base(data_dir, "notes")
    monkeypatch.setattr(document_viewer, "EXCERPT_CHARS", 3_000)  # a long document, at a test's size
    lines = _filler(7, 300)  # ~18,000 characters: the viewer shows an excerpt around the hit
    lines[250:253] = TARGET
    path = tmp_path / "season.md"
    path.write_text("\n".join(lines) + "\n")
    page = tmp_path / "quinces.html"
    page.write_text(
        "<html><body><h1>Quinces</h1><p>" + " ".join(_filler(9, 30)) + "</p>"
        "<p>Quinces ripen late in autumn and keep for weeks in a cool shed.</p></body></html>"
    )
    window = open_window(start_worker=True)
    _index(qtbot, window, [path, page])

    # a web page is shown as its extracted text, the passage selected
    html_hit = _search(qtbot, window, "quinces ripen late in autumn")[0]
    assert Path(html_hit.source_path or "").name == "quinces.html"
    viewer = _open_top_hit(qtbot, window)
    assert viewer.shown.kind == "text"
    assert viewer.text.textCursor().selectedText().replace("\u2029", "\n") == html_hit.text
    viewer.close()

    top = _search(qtbot, window, QUERY)[0]
    assert Path(top.source_path or "").name == "season.md"
    assert top.line_start is not None and top.line_end is not None
    assert top.line_start <= 251 and top.line_end >= 253  # the target's lines (1-based)
    viewer = _open_top_hit(qtbot, window)
    assert viewer.shown.kind == "lines"
    cursor = viewer.text.textCursor()
    assert cursor.selectedText() == "\u2029".join(lines[top.line_start - 1 : top.line_end])  # whole lines
    first_block = viewer.text.document().findBlock(cursor.selectionStart()).blockNumber()
    assert viewer.first_line > 1 and viewer.first_line + first_block == top.line_start  # an excerpt, lines kept
    assert len(viewer.text.toPlainText()) < len("\n".join(lines)) and "excerpt" in viewer.header.text()
    assert viewer.text.verticalScrollBar().value() > 0  # scrolled down to them
    assert viewer.text.viewport().rect().intersects(viewer.text.cursorRect())  # and they are in view
    assert f"lines {top.line_start}-{top.line_end}" in viewer.header.text()

    # the item is deleted: the open viewer drops its content at once
    item = next(i for i in tree_items(window.model) if i.name == "season.md")
    select_ids(window, [item.id])
    prompter.confirm_answers = [True]
    with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000):
        window.delete_selected()
    assert viewer.shown.kind == "message" and viewer.text.toPlainText() == ""
    assert "deleted" in viewer.message.text()
    viewer.close()

    # the hit kept from before the delete (a list another surface still shows) opens no content
    base = window.ctx.base
    assert base is not None
    late = window.open_document_viewer(base.id, [top], top.chunk_id)
    qtbot.waitUntil(lambda: late.loaded, timeout=10_000)
    assert late.shown.kind == "message" and late.document is None
    assert "deleted" in late.message.text() and late.text.toPlainText() == ""
    late.close()
