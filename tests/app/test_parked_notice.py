"""The start-up notice about items recovery parked (``indexing_interrupted``) reads counts, and its Reindex
action reads the parked items a bounded page at a time: a data directory with very many of them is never
loaded whole, and the notice still says how many there are.

Crafted input: more parked items than one page (the page made small here), in two bases.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot
from sqlalchemy import select

from app import startup
from jobs.schema import jobs
from knowledge.compose import open_quire
from knowledge.lifecycle import operations, recovery
from knowledge.lifecycle.scheduling import REINDEX_SUBTREE
from knowledge.runtime import Quire
from tests.app.conftest import WindowFactory, create_base
from tests.knowledge.helpers import make_base

PAGE = 3  # parked items read at most this many at a time here


@pytest.fixture
def page_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each read of parked items returns (the knowledge function the app calls), with a small page."""
    monkeypatch.setattr(recovery, "INTERRUPTED_PAGE", PAGE)
    returned: list[int] = []
    real = startup.interrupted_items

    def counted(*args: Any, **kwargs: Any) -> list[Any]:
        rows = real(*args, **kwargs)
        returned.append(len(rows))
        return rows

    monkeypatch.setattr(startup, "interrupted_items", counted)
    return returned


def _park(quire: Quire, base_id: int, count: int) -> list[int]:
    """``count`` notes, parked as recovery parks the items of an interrupted job."""
    created = operations.add_items(quire, base_id, [operations.NoteInput(f"note {n}") for n in range(count)]).created
    with quire.db.write() as conn:
        assert recovery.park_interrupted(conn, created, None) == count
    return created


def _reindexing(quire: Quire) -> list[int]:
    """The items the reindex jobs were asked to reindex, in the order asked (the jobs run in a worker)."""
    with quire.db.read() as conn:
        rows = conn.execute(select(jobs.c.payload).where(jobs.c.type == REINDEX_SUBTREE).order_by(jobs.c.id))
        return [i for r in rows for i in json.loads(r.payload)["root_ids"]]


def test_the_counts_cover_every_parked_item_and_each_read_is_one_page(quire: Quire, page_reads: list[int]) -> None:
    first, second = make_base(quire, "first"), make_base(quire, "second")
    parked_ids = _park(quire, first.id, 2 * PAGE + 1) + _park(quire, second.id, 2)

    parked = startup.parked_items(quire)
    assert {base_id: len(p) for base_id, p in parked.items()} == {first.id: 2 * PAGE + 1, second.id: 2}

    with ThreadPoolExecutor(1) as pool:  # off the main thread, as the window runs it
        outcome = pool.submit(startup.reindex_parked, quire, parked).result()
    assert page_reads and max(page_reads) <= PAGE, page_reads
    assert outcome.refused == {}
    assert _reindexing(quire) == parked_ids  # every one, the first base's in three pages
    assert [len(c.job_ids) for c in outcome.changes] == [1, 1, 1, 1]


def test_the_window_says_how_many_were_parked_and_reindexes_them_all(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, page_reads: list[int]
) -> None:
    bases = [create_base(data_dir, "first"), create_base(data_dir, "second")]
    quire = open_quire(data_dir)
    try:
        parked_ids = [i for base, n in zip(bases, (2 * PAGE + 1, 2), strict=True) for i in _park(quire, base.id, n)]
    finally:
        quire.close()

    window = open_window()
    assert window.startup_result is not None and window.startup_result.parked_count == 2 * PAGE + 3
    text = window.recovery_notice.text()
    assert f"{2 * PAGE + 3} items were interrupted" in text and "'first', 'second'" in text
    assert page_reads == []  # the notice read counts only

    button = window.recovery_notice.button("Reindex them")
    assert button is not None
    button.click()
    said = f"Reindexing {2 * PAGE + 3} interrupted items"
    qtbot.waitUntil(lambda: said in window.recovery_notice.text(), timeout=30_000)
    assert max(page_reads) <= PAGE, page_reads
    check = open_quire(data_dir)
    try:
        assert _reindexing(check) == parked_ids
    finally:
        check.close()
