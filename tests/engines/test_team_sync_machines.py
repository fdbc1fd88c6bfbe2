"""On a team store a synced folder belongs to the machine a person turned sync on at: another machine's worker
never watches or scans it, so a different folder at the same path there leaves the base alone.

Two machines share one real PostgreSQL on loopback, each with its own data directory and ``QUIRE_HOST``."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge import sync
from knowledge.compose import open_team_quire
from knowledge.errors import GuardRejected
from knowledge.runtime import Quire
from knowledge.sync.watcher import SyncWatcher
from tests.knowledge.helpers import drain
from tests.support.files import write_tree
from tests.sync.helpers import keyword_hits, live_paths, synced_folder

pytestmark = pytest.mark.engines

A_FILES = {f"note{n}.txt": f"Machine A's note {n} about the quokkanite survey." for n in range(8)}


def machine(url: str, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Quire:
    monkeypatch.setenv("QUIRE_HOST", name)
    return open_team_quire(url, data_dir=tmp_path / f"data-{name}")


def test_another_machine_never_scans_a_folder_synced_on_the_first(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_tree(tmp_path / "shared-path", A_FILES)
    a = machine(postgres_url, tmp_path, "machine-a", monkeypatch)
    try:
        item_id, root = synced_folder(a, folder)
        assert root.host == "machine-a"
    finally:
        a.close()
    before = live_paths_of(postgres_url, tmp_path, monkeypatch)

    # Machine B has a different folder at the same path: 7 of A's 8 files are absent there, one is private.
    for n in range(1, 8):
        (folder / f"note{n}.txt").unlink()
    (folder / "private.txt").write_text("B's private diary about the wallabine plan.")
    b = machine(postgres_url, tmp_path, "machine-b", monkeypatch)
    try:
        assert SyncWatcher(b)._roots() == []  # B's watcher never watches A's folder
        out = sync.reconcile(b, root.id, b.db.write)  # type: ignore[arg-type]
        assert out.stood_down and "machine-a" in out.stood_down
        sync.request_reconcile(b, root.id)  # a hint (or a forged job) enqueued on B: B's worker runs it, scans nothing
        drain(b)
        assert live_paths(b) == before
        assert keyword_hits(b, "wallabine") == []
        assert len(keyword_hits(b, "quokkanite")) == 8
        with pytest.raises(GuardRejected, match="machine-a"):
            sync.enable_sync(b, "kb", item_id)  # B cannot take A's folder over by turning sync on again
        (status,) = sync.root_statuses(b.db)
        assert status.as_dict()["machine"] == "machine-a" and status.as_dict()["state"] == "off"
    finally:
        b.close()

    a = machine(postgres_url, tmp_path, "machine-a", monkeypatch)  # A itself still keeps it in sync
    try:
        out = sync.reconcile(a, root.id, a.db.write)  # type: ignore[arg-type]
        assert not out.stood_down and out.counts.get("removed") == 7 and out.counts.get("added") == 1
    finally:
        a.close()


def live_paths_of(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    q = machine(url, tmp_path, "reader", monkeypatch)
    try:
        return live_paths(q)
    finally:
        q.close()
