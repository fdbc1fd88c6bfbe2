"""Quarantine counts worker deaths, not claims (``items.deaths``): only recovery of an interrupted index job
raises the count, the item's commit and every reset clear it, and two deaths in flight quarantine the item.

One test kills real worker processes (SIGKILL) around a file that was indexed twice before it turned
poisonous; the others write what a killed worker leaves (``helpers.die_in_flight``) and run the recovery
that is really registered, as a new start would (``helpers.recover_as_a_new_start``).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import text

from jobs.errors import HandBack
from jobs.registry import JobType
from knowledge import sync
from knowledge.lifecycle import QUARANTINED, operations
from knowledge.lifecycle.operations import INDEX_DOCUMENTS, PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import REPO, python_proc, wait_until
from tests.knowledge.helpers import (
    die_in_flight,
    drain,
    integrity_ok,
    item_state,
    make_base,
    recover_as_a_new_start,
)
from tests.support.bad_parsers import cli_argv
from tests.support.bad_parsers import run_cli as bad_cli
from tests.support.files import write_tree

MARKED = {
    "QUIRE_PARSE_TIMEOUT": "600",  # the hanging parse stays in flight until the kill
    "PYTHONPATH": str(REPO),
}


def _row(quire: Quire, name: str) -> tuple[str, int, str | None]:
    with quire.db.read() as conn:
        row = conn.execute(text("SELECT status, deaths, error_code FROM items WHERE name = :n"), {"n": name}).one()
    return (str(row.status), int(row.deaths), row.error_code)


def _kill_when(quire: Quire, data_dir: Path, wanted: tuple[str, int, str | None]) -> None:
    """Start a worker, wait until ``a.marked`` is in flight as ``wanted`` (or settled: fail fast), SIGKILL it."""
    worker = python_proc(*cli_argv("worker", data_dir=data_dir)[1:])
    try:
        wait_until(lambda: _row(quire, "a.marked") == wanted or _row(quire, "a.marked")[0] == "failed", timeout=180)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.communicate(timeout=30)
    assert worker.returncode == -signal.SIGKILL
    assert _row(quire, "a.marked") == wanted  # not quarantined before its second death


def test_a_file_indexed_twice_is_quarantined_only_after_two_real_deaths(
    quire: Quire,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bad_parsers_here: None,
) -> None:
    for key, value in MARKED.items():
        monkeypatch.setenv(key, value)
    make_base(quire)
    folder = write_tree(tmp_path / "D", {"a.marked": "Otters hold hands while sleeping.", "b.txt": "Herons wade."})
    operations.add_items(quire, "kb", [PathInput(folder)])
    for edit in ("Otters hold hands while they sleep in kelp.", "Otters now HANG the parse."):
        assert bad_cli("worker", "--until-idle", data_dir=data_dir, timeout=600).returncode == 0
        assert _row(quire, "a.marked") == ("completed", 0, None)  # a successful claim counts nothing
        (folder / "a.marked").write_text(edit)
        operations.add_items(quire, "kb", [PathInput(folder)])  # the folder is re-walked: a.marked is reset

    _kill_when(quire, data_dir, ("reading", 0, None))  # first death: in flight, nothing counted yet
    _kill_when(quire, data_dir, ("reading", 1, None))  # recovery counted one death and tried it alone again
    last = bad_cli("worker", "--until-idle", data_dir=data_dir, timeout=600)
    assert last.returncode == 0, last.stderr

    assert _row(quire, "a.marked") == ("failed", 2, QUARANTINED)
    stuck = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}["a.marked"]
    assert stuck.error_message == "the worker stopped twice while indexing this file"
    assert _row(quire, "b.txt")[0] == "completed"
    assert len(search(quire, "kb", "herons", mode="keyword")) == 1
    assert integrity_ok(quire)


def _one_file(quire: Quire, tmp_path: Path, body: str = "Walruses bask on the ice floe.") -> tuple[int, Path]:
    make_base(quire)
    path = tmp_path / "w.txt"
    path.write_text(body)
    return operations.add_items(quire, "kb", [PathInput(path)]).created[0], path


def test_one_death_requeues_alone_and_the_commit_clears_the_count(quire: Quire, tmp_path: Path) -> None:
    item_id, _path = _one_file(quire, tmp_path)
    job = item_state(quire, item_id)[3]
    assert job is not None
    die_in_flight(quire, job, [item_id])
    recover_as_a_new_start(quire)
    status, code, deaths, requeued = item_state(quire, item_id)
    assert (status, code, deaths) == ("processing", None, 1) and requeued not in (None, job)
    drain(quire)
    assert item_state(quire, item_id)[:3] == ("completed", None, 0)  # the worker survived it: count cleared


def test_an_item_not_yet_started_counts_no_death(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    files = write_tree(tmp_path / "two", {"x.txt": "Puffins nest in burrows.", "y.txt": "Gannets dive deep."})
    changes = operations.add_items(quire, "kb", [PathInput(files / "x.txt"), PathInput(files / "y.txt")])
    x, y = changes.created
    job = item_state(quire, x)[3]
    assert job is not None and item_state(quire, y)[3] == job  # one batch
    die_in_flight(quire, job, [x])  # the batch died while only x was being read
    recover_as_a_new_start(quire)
    assert item_state(quire, x)[:3] == ("processing", None, 1)
    assert item_state(quire, y)[:3] == ("processing", None, 0)
    assert item_state(quire, x)[3] != item_state(quire, y)[3]  # the one in flight goes back alone


def test_two_deaths_quarantine_even_after_a_commit_in_between_cleared_the_first(quire: Quire, tmp_path: Path) -> None:
    item_id, path = _one_file(quire, tmp_path)
    die_in_flight(quire, item_state(quire, item_id)[3] or 0, [item_id])
    recover_as_a_new_start(quire)
    drain(quire)  # committed: the first death no longer counts
    path.write_text("Walruses bask on the ice floe and dive for clams.")
    assert operations.add_items(quire, "kb", [PathInput(path)]).outcomes[0].refreshed
    _run_all_but_indexing(quire)
    for expected in (("processing", None, 1), ("failed", QUARANTINED, 2)):
        die_in_flight(quire, item_state(quire, item_id)[3] or 0, [item_id])
        recover_as_a_new_start(quire)
        assert item_state(quire, item_id)[:3] == expected


def _run_all_but_indexing(quire: Quire) -> None:
    """Run the queue with index-documents held back (handed back for an hour, its attempt not consumed):
    the resets happen, the items wait ``processing`` for their index job."""
    registered = quire.registry.get(INDEX_DOCUMENTS)

    def hold(ctx: object) -> None:
        raise HandBack("held by the test", delay_seconds=3600)

    quire.registry.register(JobType(INDEX_DOCUMENTS, hold, "abandon", on_abandon=registered.on_abandon))
    try:
        drain(quire)
    finally:
        quire.registry.register(registered)


def _quarantine(quire: Quire, item_id: int) -> None:
    """What two deaths in flight leave: the item failed, quarantined, with its count at two."""
    with quire.db.write() as conn:
        conn.execute(
            text("UPDATE items SET status = 'failed', error_code = :c, deaths = 2, job_id = NULL WHERE id = :i"),
            {"c": QUARANTINED, "i": item_id},
        )


def _aged(path: Path, text_: str) -> None:
    path.write_text(text_)
    st = os.stat(path)
    os.utime(path, (st.st_atime - 10, st.st_mtime - 10))  # older than the sync quiet period


def _reset_by_reindex(quire: Quire, item_id: int, path: Path, folder: Path) -> None:
    operations.reindex_items(quire, "kb", [item_id])


def _reset_by_readding_the_folder(quire: Quire, item_id: int, path: Path, folder: Path) -> None:
    _aged(path, "Walruses bask on the ice floe; the text changed.")
    operations.add_items(quire, "kb", [PathInput(folder)])  # prepare-root resets the changed leaf


def _reset_by_sync(quire: Quire, item_id: int, path: Path, folder: Path) -> None:
    root_item = operations.list_items(quire, "kb")[0].id
    root = sync.enable_sync(quire, "kb", root_item)
    _aged(path, "Walruses bask on the ice floe; the synced text changed.")
    outcome = sync.reconcile(quire, root.id, quire.db.write)
    assert outcome.counts.get("changed") == 1, outcome.counts


@pytest.mark.parametrize("reset", [_reset_by_reindex, _reset_by_readding_the_folder, _reset_by_sync])
def test_every_reset_gives_a_quarantined_file_a_fresh_count(quire: Quire, tmp_path: Path, reset: object) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "F", {"w.txt": "Walruses bask on the ice floe.", "z.txt": "Zebras graze."})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    item_id = next(i.id for i in operations.list_items(quire, "kb", flat=True) if i.name == "w.txt")
    _quarantine(quire, item_id)
    reset(quire, item_id, folder / "w.txt", folder)  # type: ignore[operator]
    _run_all_but_indexing(quire)
    status, code, deaths, job = item_state(quire, item_id)
    assert (status, code, deaths) == ("processing", None, 0) and job is not None
    die_in_flight(quire, job, [item_id])  # one death after the reset: tried again, not quarantined
    recover_as_a_new_start(quire)
    assert item_state(quire, item_id)[:3] == ("processing", None, 1)
    drain(quire)
    assert item_state(quire, item_id)[:3] == ("completed", None, 0)
