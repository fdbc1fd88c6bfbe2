"""Every CLI listing pages: ``--limit`` (default 1000) and ``--after CURSOR``; ``--json`` carries ``next``
(the cursor of the next page, or null on the last one), and following it lists everything exactly once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from knowledge import folder_runs, sync
from knowledge.agents import proposals
from knowledge.lifecycle import operations
from knowledge.principal import Principal
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.folder_runs.helpers import PERSON, doc_text, drain, make_base
from tests.support.files import write_tree

AGENT = Principal.agent("claude")


def listing(data_dir: Path, *args: str) -> dict[str, Any]:
    done = quire_cli("--json", *args, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def follow(data_dir: Path, key: str, ident: Callable[[dict[str, Any]], Any], *args: str) -> list[Any]:
    """Every page of a listing two rows at a time; each page's ``next`` is its last row's cursor."""
    seen: list[Any] = []
    after: str | None = None
    while True:
        page = listing(data_dir, *args, "--limit", "2", *([] if after is None else ["--after", after]))
        rows = page[key]
        assert len(rows) <= 2
        seen += [ident(r) for r in rows]
        if page["next"] is None:
            return seen
        assert len(rows) == 2
        after = str(page["next"])


def test_every_listing_pages_with_limit_and_after(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire)
    long_note = " ".join(f"Sentence {n} about the tides and the moon over the harbour." for n in range(220))
    operations.add_items(quire, "kb", [operations.NoteInput(t) for t in ("one", "two", "three", long_note)])
    for n in range(3):
        folder = write_tree(tmp_path / f"f{n}", {f"r{n}.txt": doc_text(n)})
        folder_runs.start_run(quire, PERSON, "kb", folder, key=f"k{n}")
    drain(quire)

    every_item = listing(data_dir, "items", "kb")
    assert every_item["next"] is None and len(every_item["items"]) > 4  # the default page holds them all
    ids = [i["id"] for i in every_item["items"]]
    assert follow(data_dir, "items", lambda i: i["id"], "items", "kb") == sorted(ids)

    note = next(i for i in every_item["items"] if i["type"] == "note" and i["chunk_count"] > 2)
    chunks = listing(data_dir, "chunks", "kb", str(note["id"]))["chunks"]
    assert follow(data_dir, "chunks", lambda c: c["ordinal"], "chunks", "kb", str(note["id"])) == [
        c["ordinal"] for c in chunks
    ]

    with quire.db.write() as conn:  # made by an older parser: stale
        conn.execute(text("UPDATE items SET parser_version = 'text-0' WHERE type = 'file'"))
    stale = follow(data_dir, "items", lambda i: i["id"], "items", "kb", "--stale")
    assert len(stale) == 3 and stale == sorted(stale)

    runs = follow(data_dir, "runs", lambda r: r["id"], "run", "list", "--base", "kb")
    assert len(runs) == 3 and runs == sorted(runs)
    jobs = follow(data_dir, "jobs", lambda j: j["id"], "jobs")
    assert jobs == sorted(jobs) and len(jobs) == len(set(jobs)) >= 4
    entries = follow(data_dir, "entries", lambda e: e["id"], "audit")
    assert entries == sorted(entries) and len(entries) >= 9


def test_bases_pending_changes_and_proposals_page_too(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    for name in ("kb", "b2", "b3", "b4", "b5"):
        make_base(quire, name)
    bases = follow(data_dir, "bases", lambda b: b["id"], "base", "list")
    assert len(bases) == 5 and bases == sorted(bases)

    folder = write_tree(tmp_path / "f", {"keep.txt": "The kept file."})
    item = operations.add_items(quire, "kb", [operations.PathInput(folder)]).created[0]
    drain(quire)
    root = sync.enable_sync(quire, "kb", item, mode="review")
    drain(quire)
    for n in range(5):
        (folder / f"new{n}.txt").write_text(f"New file {n} about the estuary.")
        os.utime(folder / f"new{n}.txt", (time.time() - 10, time.time() - 10))  # settled, not being written
    assert sync.reconcile(quire, root.id, quire.db.write).pending == 5
    pending = follow(data_dir, "pending", lambda p: p["path"], "sync", "pending", "kb")
    assert sorted(pending) == [f"new{n}.txt" for n in range(5)] and len(set(pending)) == 5
    for n in range(4):  # more synced folders: their status pages too
        more = write_tree(tmp_path / f"s{n}", {"x.txt": f"Synced folder {n}."})
        sync.enable_sync(quire, "kb", operations.add_items(quire, "kb", [operations.PathInput(more)]).created[0])
    synced = follow(data_dir, "roots", lambda r: r["item_id"], "sync", "status")
    assert len(synced) == 5 and synced[0] == item and synced == sorted(synced)

    made = [proposals.propose_note(quire, AGENT, "kb", f"note {n}").id for n in range(5)]
    listed = follow(data_dir, "proposals", lambda p: p["id"], "proposals", "list")
    assert listed == sorted(made, reverse=True)  # newest first, each page older than the one before


def test_a_limit_out_of_range_is_a_usage_error(data_dir: Path) -> None:
    assert quire_cli("items", "kb", "--limit", "0", data_dir=data_dir).returncode == 2
    assert quire_cli("jobs", "--limit", "100001", data_dir=data_dir).returncode == 2
