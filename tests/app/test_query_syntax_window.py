"""The window runs the query-syntax table (tests/support/query_cases.py) through its search box, and its
type, date and tag controls filter exactly as the typed ``type:`` and ``tag:`` do, inside the search."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.search_panel import SYNTAX_TIP, SearchPanel
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory
from tests.support.query_cases import CASES, indexed_data_dir, judge, stem

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUIRE_CONFIG_DIR", str(tmp_path_factory.mktemp("user-config")))
        return indexed_data_dir(tmp_path_factory.mktemp("syntax-window"))


def _search(qtbot: QtBot, panel: SearchPanel, query: str, mode: str = "hybrid") -> tuple[list[str] | None, str]:
    """Type the query and search: the hits' document names in rank order (None when refused), and the status."""
    panel.mode.setCurrentText(mode)
    panel.query.setText(query)
    before = panel._seq
    panel.run_search()
    if panel._seq == before:  # refused before it ran: the status line says why
        return None, panel.status.text()
    qtbot.waitUntil(lambda: not panel.searching, timeout=WORKER_TIMEOUT_MS)
    status = panel.status.text()
    if " document" not in status:
        return None, status
    return [h.item_name for h in panel.results.hits], status


def test_the_table_of_cases_in_the_search_box(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    assert "Search syntax" in panel.query.toolTip() and panel.query.toolTip() == SYNTAX_TIP
    wrong: dict[str, str] = {}
    for case in CASES:
        names, status = _search(qtbot, panel, case.query, case.mode)
        problem = judge(case, names, status if names is None else None)
        if problem is not None:
            wrong[case.id] = problem
    assert wrong == {}


def test_the_type_and_date_controls_filter_inside_the_search_as_typed_filters_do(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    panel.type_filter.setCurrentText("PDF")
    by_control, _ = _search(qtbot, panel, "harbour")
    panel.type_filter.setCurrentText("Any type")
    typed, _ = _search(qtbot, panel, "harbour type:pdf")
    assert by_control == typed and {stem(n) for n in typed or []} == {"epsilon"}

    panel.type_filter.setCurrentText("Text and Markdown")
    text_and_md, _ = _search(qtbot, panel, "harbour")
    assert {stem(n) for n in text_and_md or []} == {"alpha", "beta", "delta"}
    both, _ = _search(qtbot, panel, "harbour type:pdf")  # the control and the typed filter: both hold
    assert both == []

    panel.type_filter.setCurrentText("Any type")
    panel.date_filter.setCurrentText("Past year")  # every file of the corpus is older
    recent, status = _search(qtbot, panel, "harbour")
    assert recent == [] and status.startswith("0 documents")
    panel.date_filter.setCurrentText("Any date")
    every, _ = _search(qtbot, panel, "harbour")
    assert {stem(n) for n in every or []} == {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}


def test_a_hit_tells_which_notes_link_to_its_document(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    from PySide6.QtCore import Qt

    from app.search_results import SOURCE

    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    names, _ = _search(qtbot, panel, '"tidal silt budget"', "keyword")
    assert names == ["alpha.md"]
    tip = panel.results.data(panel.results.index(0, SOURCE), Qt.ItemDataRole.ToolTipRole)
    assert tip.endswith("\nLinked from: delta.md"), tip


def test_the_mode_box_offers_both_fusions_and_the_search_gets_the_one_chosen(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    modes = [panel.mode.itemText(n) for n in range(panel.mode.count())]
    assert modes[0] == "hybrid" and "hybrid-rrf" in modes  # the fitted fusion is the default
    asked: list[str] = []
    real = panel.search_fn

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["mode"])
        return real(*args, **kwargs)

    panel.search_fn = recording
    scores = {}
    for mode in ("hybrid", "hybrid-rrf"):
        names, _status = _search(qtbot, panel, "harbour dredging silt", mode)
        assert names, mode
        scores[mode] = [round(h.score, 6) for h in panel.results.hits]
    assert asked == ["hybrid", "hybrid-rrf"]
    assert scores["hybrid"] != scores["hybrid-rrf"]  # two fusions, not one under two names


def test_the_tag_control_lists_the_bases_tags_and_filters_as_typed_tag_does(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    from app.tag_filter import ANY_TAG

    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    tags = panel.tag_filter
    qtbot.waitUntil(lambda: tags.count() > 1, timeout=WORKER_TIMEOUT_MS)  # read from the items off the main thread
    listed = [(tags.itemText(n), tags.itemData(n)) for n in range(tags.count())]
    assert listed == [
        (ANY_TAG, None),
        ("baking (1)", "baking"),  # delta's inline #baking
        ("dredging (1)", "dredging"),  # alpha's front matter
        ("project/harbour (1)", "project/harbour"),
    ]

    tags.setCurrentIndex(tags.findData("dredging"))
    by_control, _ = _search(qtbot, panel, "harbour")
    tags.setCurrentIndex(0)
    typed, _ = _search(qtbot, panel, "harbour tag:dredging")
    assert by_control == typed and {stem(n) for n in typed or []} == {"alpha"}

    tags.setCurrentIndex(tags.findData("baking"))  # with a typed tag: either, as two typed tags are
    either, _ = _search(qtbot, panel, "harbour tag:dredging")
    assert {stem(n) for n in either or []} == {"alpha", "delta"}
    baking, _ = _search(qtbot, panel, "harbour type:pdf")  # with a typed type: both hold
    assert baking == []

    with qtbot.waitSignal(tags.filled, timeout=WORKER_TIMEOUT_MS):
        tags.refresh()  # listed again (as when the list is opened): the choice is kept
    assert tags.tag() == "baking" and tags.count() == len(listed)
    tags.setCurrentIndex(0)
    every, _ = _search(qtbot, panel, "harbour")
    assert {stem(n) for n in every or []} == {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}


def test_filters_typed_alone_list_what_they_match_newest_first(
    qtbot: QtBot, open_window: WindowFactory, indexed: Path, tmp_path: Path
) -> None:
    """Typed into the search box (searched when typing stops), ``tag:dredging`` lists the tagged note; the
    window's controls narrow a listing as they narrow a search, and the status says it is a listing."""
    window = open_window(directory=shutil.copytree(indexed, tmp_path / "indexed"))
    panel = window.search_panel
    qtbot.keyClicks(panel.query, "tag:dredging")
    qtbot.waitUntil(lambda: "document" in panel.status.text(), timeout=WORKER_TIMEOUT_MS)
    assert [h.item_name for h in panel.results.hits] == ["alpha.md"]
    assert panel.status.text() == "1 document for “tag:dredging” (filters, newest first)"

    panel.type_filter.setCurrentText("Text and Markdown")
    names, _ = _search(qtbot, panel, "after:2024-01 before:2024-12")
    assert names == ["delta.md", "alpha.md"]  # zeta (mail) and epsilon (PDF) left out by the control
