"""Moving in: ``quire store migrate DIR URL`` copies a data directory's bases into a team store, vectors and owned
copies included and nothing embedded again; ``base export``/``import`` carry a base from either engine to the
other and back. Real PostgreSQL on loopback; the imports run with an encoder that raises if it is ever built.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.compose import open_quire, open_team_quire
from knowledge.library import bases, index
from knowledge.portable import move_in
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.runtime import Quire
from tests.engines.test_team_cli import answered, run, secret_of
from tests.portable.helpers import synthetic_base

pytestmark = pytest.mark.engines


def never_encode(*_args: object) -> object:
    raise AssertionError("moving a base in must never build an encoder (its vectors travel with it)")


def content(quire: Quire, name: str) -> dict[str, Any]:
    """A base as either engine holds it: items by path, each chunk's text, place and exact float32 vector."""
    base = bases.get_base(quire.db, name)
    with quire.db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT id, type, name, source_path, relative_path, status, chunk_count, blob_sha256, text_sha256 "
                "FROM items WHERE base_id = :b ORDER BY source_path, name"
            ),
            {"b": base.id},
        ).all()
        found: dict[str, Any] = {}
        for r in rows:
            chunks, vectors = index.item_vectors(conn, base.id, r.id)
            found[f"{r.source_path}|{r.name}"] = (
                tuple(r[1:]),
                [(c.ordinal, c.text, c.start, c.end, c.text_sha256) for c in chunks],
                np.asarray(vectors, dtype=np.float32).tobytes(),
            )
        runs = conn.execute(text("SELECT count(*) FROM folder_runs WHERE base_id = :b"), {"b": base.id}).scalar()
        entries = conn.execute(text("SELECT count(*) FROM audit_log WHERE base_id = :b"), {"b": base.id}).scalar()
    copies = {row[0][6]: row[0][6] and bytes_of(quire, row[0][6]) for row in found.values() if row[0][6]}
    return {"items": found, "runs": runs, "audit": entries, "copies": copies}


def bytes_of(quire: Quire, sha: str) -> bytes | None:
    from knowledge.library import blobs

    return blobs.read_owned(quire.db, quire.blobs_dir, sha)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Quire]:
    quire = open_quire(tmp_path / "desktop")
    synthetic_base(quire, "papers", files=12, chunks_per_file=4, seed=1)
    synthetic_base(quire, "notes", files=5, chunks_per_file=2, seed=2)
    yield quire
    quire.close()


@pytest.fixture
def team(postgres_url: str, tmp_path: Path) -> Iterator[Quire]:
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "team")
    quire.encoder_factory = never_encode
    yield quire
    quire.close()


def test_move_in_copies_every_base_with_its_vectors_once(local: Quire, team: Quire) -> None:
    moved = move_in(local, team)
    assert [(m.name, m.outcome, m.items, m.chunks) for m in moved] == [
        ("notes", "copied", 6, 10),
        ("papers", "copied", 13, 48),
    ]
    for name in ("papers", "notes"):
        copied = content(team, name)
        assert copied == content(local, name)
        assert len(copied["copies"]) > 0 and all(copied["copies"].values())  # owned copies travelled too
    with team.db.read() as conn:  # the copies live in the store, for workers on every machine
        stored = conn.execute(text("SELECT count(*) FROM blob_contents")).scalar()
    assert stored == conn_count(local, "SELECT count(*) FROM blobs")

    again = move_in(local, team)  # a second run (or one after an interruption) copies only what is missing
    assert [(m.name, m.outcome) for m in again] == [("notes", "present"), ("papers", "present")]
    assert len(bases.list_bases(team.db)) == 2


def conn_count(quire: Quire, sql: str) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_export_from_a_team_store_and_import_into_a_directory(local: Quire, team: Quire, tmp_path: Path) -> None:
    export_base(local, "papers", tmp_path / "papers.quirebase")
    import_base(team, tmp_path / "papers.quirebase")  # SQLite -> PostgreSQL
    export_base(team, "papers", tmp_path / "back.quirebase")  # PostgreSQL -> file
    home = open_quire(tmp_path / "home")
    try:
        home.encoder_factory = never_encode
        import_base(home, tmp_path / "back.quirebase")  # -> SQLite again
        assert content(home, "papers") == content(local, "papers") == content(team, "papers")
    finally:
        home.close()


def test_quire_store_migrate_from_the_command_line(local: Quire, postgres_url: str, tmp_path: Path) -> None:
    secret = secret_of(postgres_url)
    desktop = local.data_dir
    local.close()  # the command opens the directory itself
    answered(run("store", "init", postgres_url, data_dir=tmp_path / "laptop"), secret)
    first = answered(run("store", "migrate", str(desktop), postgres_url, data_dir=tmp_path / "laptop"), secret)
    assert [(b["name"], b["outcome"]) for b in first["bases"]] == [("notes", "copied"), ("papers", "copied")]
    again = answered(run("store", "migrate", str(desktop), postgres_url, data_dir=tmp_path / "laptop"), secret)
    assert {b["outcome"] for b in again["bases"]} == {"present"}
    listed = answered(run("--store", postgres_url, "base", "list", data_dir=tmp_path / "laptop"), secret)
    assert sorted(b["name"] for b in listed["bases"]) == ["notes", "papers"]
    not_a_dir = run("store", "migrate", str(tmp_path / "nowhere"), postgres_url, data_dir=tmp_path / "laptop")
    assert "not a Quire data directory" in answered(not_a_dir, secret, code=2)["error"]["message"]
