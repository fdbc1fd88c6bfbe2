"""Sources reach the workers: on a team store a file travels as its owned copy, uploaded by the machine that has
it before its job is enqueued, so a worker on another machine indexes the copy and never opens the path.

* A person adds a folder and a file from their machine (``QUIRE_HOST=laptop``): ``quire add`` walks the folder
  itself (the walk is pinned to that host) and stores every file's bytes in the store; then the person's files
  vanish altogether, and a worker on another machine (``QUIRE_HOST=server``) still indexes every one.
* A job pinned to one host is never claimed by another's worker, and a copy whose bytes do not hash to their
  name is refused for its item.

Real PostgreSQL on loopback, real ``quire`` processes; no sleeps.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.compose import open_team_quire
from knowledge.ingest import item_bytes
from knowledge.library import tree
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import INDEX_DOCUMENTS, PREPARE_ROOT, PathInput
from knowledge.runtime import Quire
from knowledge.sources import SourceRejected
from knowledge.store.postgres import PostgresDatabase
from tests.engines.test_team_cli import answered, run, secret_of
from tests.knowledge.helpers import drain, make_base

pytestmark = pytest.mark.engines

TEXTS = {
    "notes/anvil.md": "A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.\n",
    "notes/saffron.md": "Saffron is the dried stigma of the crocus flower, used in paella.\n",
    "notes/deep/quartz.txt": "Quartz crystals oscillate at a steady frequency inside wristwatches.\n",
    "lone.md": "A lighthouse keeper trims the wick before the fog rolls over the harbour.\n",
}


def write_home(home: Path) -> Path:
    for relative, body in TEXTS.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(body)
    return home


def rows(db: PostgresDatabase, sql: str, **params: Any) -> list[Any]:
    with db.read() as conn:
        return list(conn.execute(text(sql), params).all())


@pytest.mark.model
def test_a_worker_on_another_machine_indexes_files_the_person_no_longer_has(postgres_url: str, tmp_path: Path) -> None:
    secret = secret_of(postgres_url)
    home = write_home(tmp_path / "home")
    laptop = {"QUIRE_STORE": postgres_url, "QUIRE_HOST": "laptop"}
    server = {"QUIRE_STORE": postgres_url, "QUIRE_HOST": "server"}
    answered(run("store", "init", data_dir=tmp_path / "laptop", env=laptop), secret)
    answered(run("base", "create", "kb", "--precision", "fp32", data_dir=tmp_path / "laptop", env=laptop), secret)
    added = run("add", "kb", str(home / "notes"), str(home / "lone.md"), data_dir=tmp_path / "laptop", env=laptop)
    answered(added, secret)

    db = PostgresDatabase(postgres_url)
    try:
        # the walk ran on the laptop, inside `quire add`; the index jobs wait for any machine
        walks = rows(db, "SELECT host, status FROM jobs WHERE type = :t", t=PREPARE_ROOT)
        assert [(w.host, w.status) for w in walks] == [("laptop", "completed")]
        waiting = rows(db, "SELECT host, status FROM jobs WHERE type = :t", t=INDEX_DOCUMENTS)
        assert waiting and {(w.host, w.status) for w in waiting} == {(None, "pending")}
        files = rows(
            db,
            "SELECT i.source_path, c.data FROM items i JOIN blob_contents c ON c.sha256 = i.blob_sha256 "
            "WHERE i.type = 'file'",
        )
        assert {Path(f.source_path).relative_to(home).as_posix(): bytes(f.data).decode() for f in files} == TEXTS

        home.rename(tmp_path / "gone")  # the person's files are nowhere now: only their copies can be read
        (tmp_path / "gone" / "notes" / "anvil.md").write_text("changed after the upload: never read\n")
        done = answered(run("worker", "--until-idle", data_dir=tmp_path / "server", env=server), secret)
        assert done["jobs_finished"] == len(waiting)

        settled = rows(db, "SELECT name, status, error_code FROM items WHERE type = 'file' ORDER BY name")
        assert [(i.name, i.status, i.error_code) for i in settled] == [
            (name, "completed", None) for name in ("anvil.md", "lone.md", "quartz.txt", "saffron.md")
        ]
        jobs = rows(db, "SELECT j.type, j.attempt, w.host FROM jobs j JOIN worker_sessions w ON w.id = j.enqueued_by")
        assert {(j.attempt, j.host) for j in jobs} == {(1, "laptop")}, jobs  # scheduled once, where the files were
    finally:
        db.dispose()
    for word, name in (("horseshoes", "anvil.md"), ("wristwatches", "quartz.txt"), ("lighthouse", "lone.md")):
        hits = answered(run("search", "kb", word, "--mode", "keyword", data_dir=tmp_path / "laptop", env=laptop))
        assert [h["item_name"] for h in hits["hits"]][:1] == [name], (word, hits)


@pytest.fixture
def laptop(postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Quire]:
    monkeypatch.setenv("QUIRE_HOST", "laptop")
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "laptop")
    yield quire
    quire.close()


def test_a_job_pinned_to_one_machine_is_never_claimed_by_another(
    laptop: Quire, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(laptop)
    folder = write_home(tmp_path / "home") / "notes"
    operations.add_items(laptop, "kb", [PathInput(folder)])
    monkeypatch.setenv("QUIRE_HOST", "server")
    server = open_team_quire(postgres_url, data_dir=tmp_path / "server")
    try:
        assert server.make_worker(poll_interval=0.05).run(until_idle=True, timeout=60) == 0
        with server.db.read() as conn:
            (walk,) = conn.execute(text("SELECT host, status, attempt FROM jobs")).all()
        assert tuple(walk) == ("laptop", "pending", 0)  # the folder is the laptop's: nobody else walks it

        assert laptop.run_pinned_here(timeout=60) == 1  # the laptop walks it and uploads the files
        with server.db.read() as conn:
            jobs = conn.execute(text("SELECT type, host, status FROM jobs ORDER BY id")).all()
            leaves = [tree.Item.from_row(r) for r in conn.execute(text("SELECT * FROM items WHERE type = 'file'"))]
        assert [tuple(j) for j in jobs] == [(PREPARE_ROOT, "laptop", "completed"), (INDEX_DOCUMENTS, None, "pending")]
        assert len(leaves) == 3 and all(i.blob_sha256 for i in leaves)

        victim = next(i for i in leaves if i.name == "anvil.md")
        data, _mtime = item_bytes.read_item_bytes(server, victim)  # the copy, fetched from the store
        assert data == TEXTS["notes/anvil.md"].encode()
        other = next(i for i in leaves if i.name == "saffron.md")
        with server.db.write() as conn:  # another team member's write: bytes that are not what their name says
            conn.execute(
                text("UPDATE blob_contents SET data = :d WHERE sha256 = :s"), {"d": b"forged", "s": other.blob_sha256}
            )
        with pytest.raises(SourceRejected, match="does not match its name"):
            item_bytes.read_item_bytes(server, other)
        assert not (tmp_path / "server" / "blobs" / other.blob_sha256[:2] / other.blob_sha256[2:]).exists()
    finally:
        server.close()


@pytest.mark.model
def test_sync_on_the_machine_with_the_folder_uploads_what_changed(laptop: Quire, tmp_path: Path) -> None:
    from knowledge import sync

    make_base(laptop)
    folder = write_home(tmp_path / "home") / "notes"
    root_id = operations.add_items(laptop, "kb", [PathInput(folder)]).created[0]
    drain(laptop)  # indexed (here, by the laptop's own worker), so the scan can tell an edit
    root = sync.enable_sync(laptop, "kb", root_id)
    with laptop.db.read() as conn:
        (reconcile,) = conn.execute(text("SELECT host FROM jobs WHERE type = :t"), {"t": sync.SYNC_ROOT}).all()
        before = {r.name: r.blob_sha256 for r in conn.execute(text("SELECT name, blob_sha256 FROM items"))}
    assert reconcile.host == "laptop"  # the scan of the folder stays on the machine that has it

    edited, added = folder / "anvil.md", folder / "deep" / "new.md"
    edited.write_text("The farrier now shapes aluminium racing plates on the anvil instead.\n")
    added.write_text("A new note about barnacles clinging to the pier.\n")
    for path in (edited, added):  # settled files (older than the quiet period), not half-written ones
        os.utime(path, (time.time() - 60, time.time() - 60))
    outcome = sync.reconcile(laptop, root.id, laptop.db.write)  # type: ignore[arg-type]
    assert outcome.counts.get("changed") == 1 and outcome.counts.get("added") == 1, outcome.counts

    with laptop.db.read() as conn:
        copies = {
            r.name: bytes(r.data)
            for r in conn.execute(
                text("SELECT i.name, c.data FROM items i JOIN blob_contents c ON c.sha256 = i.blob_sha256")
            )
        }
        old = conn.execute(text("SELECT count(*) FROM items WHERE blob_sha256 = :s"), {"s": before["anvil.md"]})
        pending = "SELECT host FROM jobs WHERE type = :t AND status = 'pending'"
        waiting = [r.host for r in conn.execute(text(pending), {"t": INDEX_DOCUMENTS})]
    assert copies["anvil.md"] == edited.read_bytes() and copies["new.md"] == added.read_bytes()
    assert old.scalar() == 0  # the worker will read the edit, not the earlier copy
    assert waiting == [None]  # one index job for the two, for any machine
