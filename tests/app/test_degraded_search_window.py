"""The search panel, when meaning search is unavailable (the base's endpoint on 127.0.0.1 stopped), shows the
keyword results with a notice above them saying so — not an error — and hides the notice once a search runs
whole again."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory
from tests.support.degraded import remote_base_data_dir
from tests.support.embedding_server import EmbeddingServer, HashVectors


def test_the_panel_shows_keyword_results_under_a_notice(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    server = EmbeddingServer(HashVectors())
    try:
        remote_base_data_dir(data_dir, server, tmp_path / "docs")
    finally:
        server.close()  # the endpoint is gone before the window opens
    window = open_window()
    panel = window.search_panel
    assert window.ctx.base is not None and window.ctx.base.name == "remote"
    failures: list[BaseException] = []
    window.ctx.fail = failures.append  # type: ignore[method-assign]

    def search(query: str, mode: str) -> None:
        panel.mode.setCurrentText(mode)
        panel.query.setText(query)
        panel.run_search()
        qtbot.waitUntil(lambda: not panel.searching, timeout=WORKER_TIMEOUT_MS)

    search("bread dough", "hybrid")
    assert failures == []
    assert not panel.degraded.isHidden()
    assert panel.degraded.text() == (
        "Meaning search is unavailable: the knowledge base's embedding endpoint did not answer. "
        "Showing keyword results."
    )
    assert [h.item_name for h in panel.results.hits] == ["cooking.txt"]
    assert panel.status.text() == "1 document for “bread dough” (keyword)"
    search("bread dough", "keyword")  # asked for keyword: nothing is missing
    assert panel.degraded.isHidden() and [h.item_name for h in panel.results.hits] == ["cooking.txt"]
