"""A watcher's hint is never lost to a reconcile that is already running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.runtime import JobContext
from knowledge import sync
from knowledge.runtime import Quire
from knowledge.sync import job as sync_job
from tests.knowledge.helpers import drain
from tests.support.files import write_tree
from tests.sync.helpers import keyword_hits, synced_folder

FILES = {"keep.txt": "A file that stays, about ibexine.", "gone.txt": "A file about okapibird, soon deleted."}


def test_a_hint_that_arrives_after_a_running_reconciles_last_look_makes_another_reconcile(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder)
    assert keyword_hits(quire, "okapibird") == ["gone.txt"]
    real = sync_job.sync_root
    hinted: list[int] = []

    def reconcile_then_a_late_hint(q: Quire, ctx: JobContext) -> dict[str, Any]:
        result = real(q, ctx)
        if not hinted:
            # The job has taken its last look at dirty_seq and is about to end: the file goes now, and the
            # watcher's hint for it arrives while this job is still running.
            (folder / "gone.txt").unlink()
            sync.request_reconcile(q, root.id)
            hinted.append(ctx.job_id)
        return result

    sync.request_reconcile(quire, root.id)
    monkeypatch.setattr(sync_job, "sync_root", reconcile_then_a_late_hint)
    drain(quire)
    assert hinted, "the reconcile ran"
    assert keyword_hits(quire, "okapibird") == []
    assert keyword_hits(quire, "ibexine") == ["keep.txt"]
