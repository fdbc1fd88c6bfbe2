"""No module of the product over 450 lines: past that a module holds more than one subject, and is cut along
its seams (see docs/ARCHITECTURE.md for each room's modules).

``OVER_FOR_NOW`` lists the modules still over, each with why. A listed module that gets under the limit
must leave the list, so it only ever shrinks.
"""

from __future__ import annotations

from tests.conftest import REPO

MAX_LINES = 450

OVER_FOR_NOW: dict[str, str] = {
    "knowledge/search/query.py": "the keyword index and vector search are being reworked in it this session",
    "knowledge/library/vector_file.py": "the vector file is being reworked this session",
    "knowledge/sync/reconcile.py": "sync on the team store is built in it this session; to cut: claim / apply / review",
    "knowledge/lifecycle/operations.py": "to cut: adding items apart from the delete/reindex operations",
    "jobs/runtime.py": "the team store's workers are being built in it this session",
    "app/search_panel.py": "to cut: the result list model apart from the panel",
    "app/item_model.py": "to cut: the lazy tree model apart from its row texts",
    "app/window.py": "to cut: the tabs' wiring apart from the window's start and close",
    "app/cli/commands_knowledge.py": "to cut: item commands apart from base commands",
}


def _line_counts() -> dict[str, int]:
    return {
        path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
        for package in ("knowledge", "jobs", "app")
        for path in (REPO / package).rglob("*.py")
    }


def test_no_module_is_over_the_limit() -> None:
    over = {name: n for name, n in _line_counts().items() if n > MAX_LINES and name not in OVER_FOR_NOW}
    assert over == {}, f"over {MAX_LINES} lines: cut it along its seams"


def test_a_module_back_under_the_limit_leaves_the_list() -> None:
    counts = _line_counts()
    back = sorted(name for name in OVER_FOR_NOW if counts.get(name, 0) <= MAX_LINES)
    assert back == [], "under the limit (or gone): remove it from OVER_FOR_NOW"
