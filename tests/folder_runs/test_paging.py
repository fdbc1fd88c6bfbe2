"""A run read for a live view in bounded pieces: its summary without sources, its sources a page at a time
(keyset by ordinal), and the outcomes filed after a cursor (keyset by outcome id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge import folder_runs
from knowledge.errors import InvalidInput
from knowledge.runtime import Quire
from tests.folder_runs.helpers import PERSON, drain, make_base, make_docs


def test_pages_and_outcomes_since_a_cursor_are_bounded_and_complete(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    run_id = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 5), key="k").run_id

    first = folder_runs.sources_page(quire, run_id, limit=2)
    assert [s.ordinal for s in first.sources] == [0, 1] and first.cursor == 0
    assert {s.disposition for s in first.sources} == {"pending"}
    rest = folder_runs.sources_page(quire, run_id, after_ordinal=first.sources[-1].ordinal, limit=10)
    assert [s.ordinal for s in rest.sources] == [2, 3, 4]
    assert folder_runs.settled_since(quire, run_id, after_id=first.cursor) == []

    drain(quire)
    summary = folder_runs.run_summary(quire, run_id)
    assert summary == folder_runs.show_run(quire, run_id).summary and summary.run.status == "completed"
    head = folder_runs.settled_since(quire, run_id, after_id=first.cursor, limit=3)
    tail = folder_runs.settled_since(quire, run_id, after_id=head[-1].outcome_id, limit=3)
    settled = head + tail
    assert len(head) == 3 and len(tail) == 2
    assert sorted(s.source.ordinal for s in settled) == [0, 1, 2, 3, 4]
    assert {s.source.disposition for s in settled} == {"committed"}
    assert [s.outcome_id for s in settled] == sorted(s.outcome_id for s in settled)
    assert folder_runs.sources_page(quire, run_id).cursor == settled[-1].outcome_id
    assert folder_runs.settled_since(quire, run_id, after_id=settled[-1].outcome_id) == []
    with pytest.raises(InvalidInput):
        folder_runs.sources_page(quire, run_id, limit=0)
