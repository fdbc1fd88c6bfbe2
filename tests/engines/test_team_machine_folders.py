"""On a team store a machine reads only folders a person on it asked for: a job row pinned to its host name is
any team member's word, so it never makes the machine walk, index or upload a folder nobody there added.

Three machines share one real PostgreSQL on loopback, each with its own data directory: ``bob`` has a private
folder; ``mallory`` (a member with write rights) claims to be bob (``QUIRE_HOST=bob``) and adds bob's folder,
starts a run over it and re-points a synced root at bob — each leaves a job only bob's worker may claim."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import sync
from knowledge.compose import open_team_quire
from knowledge.folder_runs import Principal, start_run
from knowledge.lifecycle import PathInput, add_items
from knowledge.runtime import Quire
from knowledge.store.machine_folders import FILE_NAME, NOT_ADDED_HERE
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree
from tests.sync.helpers import keyword_hits, synced_folder

pytestmark = pytest.mark.engines

PRIVATE = {"diary.txt": "Bob's private diary about the numbatine plan.", "sub/tax.txt": "Bob's numbatine tax."}


def machine(url: str, tmp_path: Path, host: str, data: str, monkeypatch: pytest.MonkeyPatch) -> Quire:
    monkeypatch.setenv("QUIRE_HOST", host)
    return open_team_quire(url, data_dir=tmp_path / f"data-{data}")


def scalar(quire: Quire, sql: str) -> object:
    with quire.db.read() as conn:
        return conn.execute(text(sql)).scalar()


def test_a_job_pinned_to_a_machine_never_reads_a_folder_no_person_there_added(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = write_tree(tmp_path / "bob-private", PRIVATE)
    mallory = machine(postgres_url, tmp_path, "bob", "mallory", monkeypatch)  # claims to be bob
    try:
        make_base(mallory)
        (folder_id,) = add_items(mallory, "kb", [PathInput(private)]).created  # a prepare-root pinned to "bob"
        run = start_run(mallory, Principal.person("mallory"), "kb", private / "sub")  # a folder run pinned to "bob"
    finally:
        mallory.close()

    bob = machine(postgres_url, tmp_path, "bob", "bob", monkeypatch)  # bob's own worker, bob's own data directory
    try:
        drain(bob)
        assert keyword_hits(bob, "numbatine") == []  # nothing of bob's folder was read, indexed or uploaded
        assert scalar(bob, f"SELECT count(*) FROM items WHERE parent_id = {folder_id}") == 0
        assert scalar(bob, "SELECT count(*) FROM blob_contents") == 0
        with bob.db.read() as conn:
            status, error = conn.execute(
                text("SELECT status, error FROM folder_runs WHERE id = :r"), {"r": run.run_id}
            ).one()
        assert status == "failed" and NOT_ADDED_HERE in error
        record = tmp_path / "data-bob" / FILE_NAME
        assert not record.exists()  # mallory's claim recorded the folder in mallory's directory only
        assert str(private) in (tmp_path / "data-mallory" / FILE_NAME).read_text()

        # bob himself adds his folder: recorded in his own data directory (owner-only), then read and indexed
        add_items(bob, "kb", [PathInput(private)])
        drain(bob)
        assert keyword_hits(bob, "numbatine") == ["diary.txt", "sub/tax.txt"]
        assert stat.S_IMODE(os.stat(record).st_mode) == 0o600
        assert str(private) in record.read_text()
    finally:
        bob.close()


def test_a_synced_root_re_pointed_at_another_machine_is_not_scanned_there(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_tree(tmp_path / "alice-notes", {"a.txt": "Alice's note about the dibblerite survey."})
    alice = machine(postgres_url, tmp_path, "alice", "alice", monkeypatch)
    try:
        _item_id, root = synced_folder(alice, folder)
        with alice.db.write() as conn:  # a writer re-points the root at bob, where the path is bob's own folder
            conn.execute(text("UPDATE sync_roots SET host = 'bob' WHERE id = :r"), {"r": root.id})
    finally:
        alice.close()
    (folder / "a.txt").unlink()
    (folder / "bob.txt").write_text("Bob's own note about the quendaite budget.")
    bob = machine(postgres_url, tmp_path, "bob", "bob", monkeypatch)
    try:
        out = sync.reconcile(bob, root.id, bob.db.write)  # type: ignore[arg-type]
        assert out.stood_down and NOT_ADDED_HERE in out.stood_down
        assert keyword_hits(bob, "quendaite") == [] and keyword_hits(bob, "dibblerite") == ["a.txt"]
    finally:
        bob.close()
