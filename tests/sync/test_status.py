"""``quire sync status`` names each root: base, folder, mode, watcher, last sync and pending changes."""

from __future__ import annotations

import json
from pathlib import Path

from knowledge import sync
from knowledge.lifecycle.operations import PathInput, add_items
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.knowledge.helpers import make_base
from tests.support.files import write_tree
from tests.sync.helpers import drain


def test_sync_status_names_base_folder_mode_watcher_last_sync_and_pending(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    papers = write_tree(tmp_path / "papers", {"a.txt": "About otters."})
    notes = write_tree(tmp_path / "notes", {"b.txt": "About herons."})
    make_base(quire, "work")
    make_base(quire, "home")
    paper_item = add_items(quire, "work", [PathInput(papers)]).created[0]
    note_item = add_items(quire, "home", [PathInput(notes)]).created[0]
    drain(quire)
    sync.enable_sync(quire, "work", paper_item)
    sync.enable_sync(quire, "home", note_item, mode="review")
    drain(quire)
    (notes / "c.txt").write_text("About egrets.")
    with quire.db.read() as conn:
        root = sync.resolve_root(conn, "home", note_item)
    sync.reconcile(quire, root.id, quire.db.write)  # type: ignore[arg-type]

    shown = quire_cli("sync", "status", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 2
    work = next(line for line in lines if str(papers) in line)
    home = next(line for line in lines if str(notes) in line)
    assert "work" in work and "auto" in work and "last synced" in work
    assert "home" in home and "review" in home and "1 pending" in home
    assert all("watcher off" in line for line in lines)  # no worker is watching

    answer = json.loads(quire_cli("--json", "sync", "status", "home", data_dir=data_dir).stdout)
    (only,) = answer["roots"]
    assert only["base"] == {"id": root.base_id, "name": "home"} and only["folder"] == str(notes)
    assert (only["mode"], only["watcher"], only["pending"]) == ("review", "off", 1)
    every = json.loads(quire_cli("--json", "sync", "status", data_dir=data_dir).stdout)["roots"]
    assert [(r["base"]["name"], r["folder"]) for r in every] == [("work", str(papers)), ("home", str(notes))]
    assert every[0]["last_synced_at"] is not None
