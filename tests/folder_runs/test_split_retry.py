"""A run a split started over a folder's own files (the folder itself is over the cap) is retried as the same
files, never refused for the size of the whole folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from knowledge import folder_runs
from knowledge.folder_runs import execute
from knowledge.runtime import Quire
from knowledge.store import apsw_dbapi
from tests.folder_runs.helpers import PERSON, doc_text, drain, make_base, rows
from tests.support.files import write_tree

CAP = 5


def _fail_the_second_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = execute.settle_source_in_tx

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        if len(calls) == 2:  # a busy database once, as a real lock timeout would
            raise sa_exc.OperationalError("COMMIT", {}, apsw_dbapi.OperationalError("database is locked"))
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "settle_source_in_tx", flaky)


def _sources(quire: Quire, run_id: int) -> list[str]:
    return sorted(r[0] for r in rows(quire, "SELECT relative_path FROM folder_run_sources WHERE run_id = :r", r=run_id))


def test_a_failed_run_of_a_folders_own_files_is_retried_as_those_files(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"own{n}.txt": doc_text(n) for n in range(7)}
    files.update({"sub/a.txt": doc_text(10), "sub/b.txt": doc_text(11)})
    top = write_tree(tmp_path / "tree", files)
    base = make_base(quire)
    folder_runs.set_descendant_cap(quire, CAP)
    started = folder_runs.start_split(quire, PERSON, base.id, top)
    _fail_the_second_commit(monkeypatch)
    drain(quire)
    monkeypatch.undo()
    (failed,) = [r[0] for r in rows(quire, "SELECT id FROM folder_runs WHERE status = 'failed'")]
    assert failed in [r.run_id for r in started.runs]
    assert rows(quire, "SELECT folder FROM folder_runs WHERE id = :r", r=failed) == [(str(top),)]  # own files

    retried = folder_runs.retry_run(quire, PERSON, failed)
    assert retried.outcome == "created" and _sources(quire, retried.run_id) == _sources(quire, failed)
    drain(quire)
    assert rows(quire, "SELECT status FROM folder_runs WHERE id = :r", r=retried.run_id) == [("completed",)]
    live = rows(quire, "SELECT count(*) FROM items WHERE type != 'directory' AND status = 'completed'")
    assert live == [(9,)]  # every file of the tree, once
