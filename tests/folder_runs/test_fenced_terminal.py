"""A run's terminal transition is fenced: an attempt that a newer one took the run from (a worker presumed dead
that was only slow) cannot complete, fail or cancel the run; the newer attempt owns its one terminal entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knowledge import folder_runs
from knowledge.folder_runs import execute, ledger
from knowledge.library import audit
from knowledge.runtime import Quire
from tests.folder_runs.helpers import PERSON, drain, entries, make_base, make_docs, scalar


def test_an_attempt_that_lost_the_run_cannot_complete_it(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "docs", 3), key="fence")
    real_end = execute._complete
    stood_down: list[str] = []

    def taken_over_then_end(ctx: Any, run: Any) -> Any:
        # a newer attempt enters meanwhile, as a takeover does: it files its own `started` and owns the run
        with quire.db.write() as conn:
            ledger.transition(
                conn, run.id, run.base_id, audit.RUN_STARTED, audit.SYSTEM_ACTOR, {"resumed": True},
                attempt=ctx.attempt + 1, values={"owner_attempt": ctx.attempt + 1},
            )  # fmt: skip
        try:
            return real_end(ctx, run)
        except Exception as exc:
            stood_down.append(type(exc).__name__)
            raise

    monkeypatch.setattr(execute, "_complete", taken_over_then_end)
    drain(quire)
    assert stood_down == ["Superseded"]
    assert scalar(quire, "SELECT status FROM folder_runs WHERE id = :r", r=started.run_id) == "running"
    terminal = {audit.RUN_COMPLETED, audit.RUN_FAILED, audit.RUN_CANCELLED}
    assert [e for e in entries(quire, started.run_id) if e.action in terminal] == []
