"""Starting a run: judging order, the idempotency table, one-transaction creation, immutable manifest."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from jobs.errors import EnqueueError
from knowledge import folder_runs
from knowledge.errors import Conflict, Forbidden, NotFound
from knowledge.folder_runs import FOLDER_NOT_FOUND, FolderTooLarge
from knowledge.ingest import walk
from knowledge.library import audit, bases
from knowledge.runtime import Quire
from tests.folder_runs.helpers import (
    AGENT,
    OTHER_PERSON,
    PERSON,
    chmod_unreadable_check,
    drain,
    entries,
    make_base,
    make_docs,
    row_counts,
    rows,
)
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree

# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_docs(tmp_path / "folder", 3)


# -- who and where -----------------------------------------------------------------------------


def test_an_agent_principal_is_forbidden_to_start_and_nothing_is_created(quire: Quire, folder: Path) -> None:
    make_base(quire)
    before = row_counts(quire)
    with pytest.raises(Forbidden):
        folder_runs.start_run(quire, AGENT, "kb", folder, key="k")
    assert row_counts(quire) == before


@pytest.mark.parametrize("destination", ["missing", "failed", "locked"])
def test_the_destination_is_judged_before_the_folder(quire: Quire, tmp_path: Path, destination: str) -> None:
    base = make_base(quire)
    if destination == "failed":
        bases.mark_base_failed(quire.db, base.id, "index cannot be opened")
    elif destination == "locked":
        bases.set_locked(quire.db, base.id, True)
    ref = "no-such-base" if destination == "missing" else "kb"
    unseeable = tmp_path / "does-not-exist"
    before = row_counts(quire)
    with pytest.raises(Conflict) as refused:
        folder_runs.start_run(quire, PERSON, ref, unseeable, key="k")
    assert not isinstance(refused.value, NotFound)
    with pytest.raises(Conflict):
        folder_runs.preview(quire, PERSON, ref, unseeable)
    assert row_counts(quire) == before


def cannot_see_cases(quire: Quire, tmp_path: Path) -> dict[str, Path]:
    a_file = write_tree(tmp_path / "plain", {"file.txt": "not a folder\n"}) / "file.txt"
    unreadable = make_docs(tmp_path / "unreadable", 1)
    os.chmod(unreadable, 0)
    inside_data = make_docs(quire.data_dir / "inside", 1)
    link_into_data = tmp_path / "link-into-data"
    link_into_data.symlink_to(inside_data)
    return {
        "missing": tmp_path / "missing",
        "deleted": make_docs(tmp_path / "deleted", 1),
        "not a directory": a_file,
        "unreadable": unreadable,
        "the data directory": quire.data_dir,
        "inside the data directory": inside_data,
        "a link into the data directory": link_into_data,
    }


def test_every_folder_you_cannot_see_is_the_same_not_found(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    cases = cannot_see_cases(quire, tmp_path)
    shutil.rmtree(cases["deleted"])
    monkeypatch.setattr(walk, "is_readable_dir", chmod_unreadable_check)  # as a non-root user would see it
    answers: set[tuple[type[BaseException], str]] = set()
    before = row_counts(quire)
    for name, path in cases.items():
        with pytest.raises(NotFound) as started:
            folder_runs.start_run(quire, PERSON, "kb", path, key=f"k-{name}")
        with pytest.raises(NotFound) as previewed:
            folder_runs.preview(quire, PERSON, "kb", path)
        answers |= {(type(e.value), str(e.value)) for e in (started, previewed)}
    os.chmod(cases["unreadable"], 0o755)
    assert answers == {(NotFound, FOLDER_NOT_FOUND)}
    assert row_counts(quire) == before


# -- the idempotency table ---------------------------------------------------------------------


def test_created_then_replayed_with_the_same_ids_and_nothing_new(quire: Quire, folder: Path) -> None:
    make_base(quire)
    first = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    after_first = row_counts(quire)
    # the same folder, spelled differently
    again = folder_runs.start_run(quire, PERSON, "kb", str(folder) + "/./", key="key-1")

    assert first.outcome == "created" and again.outcome == "replayed"
    assert (again.run_id, again.job_id) == (first.run_id, first.job_id)
    assert row_counts(quire) == after_first  # a replay creates nothing and records nothing
    assert [e.action for e in entries(quire) if e.action not in audit.PERSON_ACTIONS] == [audit.RUN_CREATED]
    (created,) = [e for e in entries(quire) if e.action == audit.RUN_CREATED]
    assert created.actor == PERSON.label and created.run_id == first.run_id
    assert created.payload["size"] == 3 and created.payload["counts"]["pending"] == 3
    assert "manifest" not in created.payload and "sources" not in created.payload


def test_the_key_names_one_request_anything_else_is_a_conflict(quire: Quire, folder: Path, tmp_path: Path) -> None:
    make_base(quire)
    make_base(quire, "other-kb")
    other_folder = make_docs(tmp_path / "other-folder", 2)
    first = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    after_first = row_counts(quire)
    for principal, base, where in (
        (PERSON, "kb", other_folder),  # a different folder
        (PERSON, "other-kb", folder),  # a different payload (destination)
        (OTHER_PERSON, "kb", folder),  # a different actor: one person's retry never adopts another's run
    ):
        with pytest.raises(Conflict, match="different request"):
            folder_runs.start_run(quire, principal, base, where, key="key-1")
    assert row_counts(quire) == after_first
    # a different key is a different run
    second = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-2")
    assert second.outcome == "created" and second.run_id != first.run_id


@pytest.mark.parametrize("change", ["deleted", "moved out", "excluded"])
def test_a_replay_is_refused_after_a_manifest_source_left_and_the_run_stays_listed(
    quire: Quire, folder: Path, tmp_path: Path, change: str
) -> None:
    make_base(quire)
    first = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    after_first = row_counts(quire)
    victim = folder / "doc001.txt"
    if change == "deleted":
        victim.unlink()
    elif change == "moved out":
        victim.rename(tmp_path / "doc001.txt")
    else:
        (folder / ".quireignore").write_text("doc001.txt\n", encoding="utf-8")

    with pytest.raises(Conflict, match="not replayed"):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")

    assert row_counts(quire) == after_first
    listed = folder_runs.list_runs(quire, folder=folder)
    assert [(r.run.id, r.run.job_id, r.run.status) for r in listed] == [(first.run_id, first.job_id, "pending")]
    assert folder_runs.show_run(quire, first.run_id).summary.run.declared_size == 3


def test_a_replay_is_judged_against_the_folder_as_it_is_now(quire: Quire, folder: Path) -> None:
    make_base(quire)
    folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    folder_runs.set_descendant_cap(quire, 2)
    with pytest.raises(FolderTooLarge):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    shutil.rmtree(folder)
    with pytest.raises(NotFound):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")


def test_a_replay_into_a_locked_base_is_refused_by_the_destination_first(quire: Quire, folder: Path) -> None:
    make_base(quire)
    folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    bases.set_locked(quire.db, "kb", True)
    with pytest.raises(Conflict, match="locked"):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")


def test_a_completed_run_still_replays_its_ids(quire: Quire, folder: Path) -> None:
    make_base(quire)
    first = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    drain(quire)
    assert folder_runs.show_run(quire, first.run_id).summary.run.status == "completed"
    before = row_counts(quire)
    again = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    assert (again.outcome, again.run_id, again.job_id) == ("replayed", first.run_id, first.job_id)
    assert row_counts(quire) == before


# -- creation ----------------------------------------------------------------------------------


def test_ledger_manifest_job_and_entry_commit_together(quire: Quire, folder: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    run = folder_runs.show_run(quire, started.run_id)
    assert run.summary.run.status == "pending" and run.summary.run.job_id == started.job_id
    assert [(s.relative_path, s.size, len(s.sha256), s.disposition) for s in run.sources] == [
        (f"doc{n:03d}.txt", len((folder / f"doc{n:03d}.txt").read_bytes()), 64, "pending") for n in range(3)
    ]
    job = quire.queue.get(started.job_id)
    assert job.type == folder_runs.JOB_TYPE and job.status == "pending"
    assert job.payload == {"run_id": started.run_id, "base_id": run.summary.run.base_id, "approved_by": PERSON.label}
    assert rows(quire, "SELECT DISTINCT approved_by FROM folder_run_sources") == [(PERSON.label,)]


def test_a_failed_enqueue_creates_nothing(quire: Quire, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_base(quire)
    before = row_counts(quire)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise EnqueueError("queue unavailable")

    monkeypatch.setattr(quire.queue, "enqueue", broken)
    with pytest.raises(EnqueueError):
        folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    assert row_counts(quire) == before


@pytest.mark.parametrize("quire", ENGINES, indirect=True)  # the database's guards, on both engines
def test_the_manifest_and_the_runs_identity_are_immutable(quire: Quire, folder: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="key-1")
    for statement in (
        "UPDATE folder_run_sources SET content_sha256 = 'x' WHERE run_id = :r",
        "DELETE FROM folder_run_sources WHERE run_id = :r",
        "INSERT INTO folder_run_sources (run_id, ordinal, relative_path, size, content_sha256, approved_by) "
        "VALUES (:r, 99, 'late.txt', 1, 'x', 'person:ada')",
        "UPDATE folder_runs SET declared_size = 99 WHERE id = :r",
        "UPDATE folder_runs SET folder = '/elsewhere' WHERE id = :r",
        "UPDATE folder_runs SET job_id = job_id + 1 WHERE id = :r",
        "UPDATE folder_runs SET status = 'completed' WHERE id = :r",  # pending → completed skips running
        "UPDATE audit_log SET actor = 'someone else'",
        "DELETE FROM audit_log",
    ):
        with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:
            conn.execute(text(statement), {"r": started.run_id})


def test_an_empty_preview_starts_a_run_that_completes_having_committed_nothing(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    empty = write_tree(tmp_path / "nothing-eligible", {"image.bin": b"\x00\x01"})
    started = folder_runs.start_run(quire, PERSON, "kb", empty, key="key-1")
    assert started.outcome == "created"
    drain(quire)
    run = folder_runs.show_run(quire, started.run_id)
    assert run.summary.run.status == "completed" and run.sources == []
    assert run.summary.counts["committed"] == 0
    assert [e.action for e in entries(quire, started.run_id)] == [
        audit.RUN_CREATED,
        audit.RUN_STARTED,
        audit.RUN_COMPLETED,
    ]
    assert rows(quire, "SELECT count(*) FROM items") == [(0,)]
