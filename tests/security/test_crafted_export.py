"""Crafted ``.quirebase`` exports: a real export, edited with apsw as an attacker would (who also recomputes
the checksum), must never reach outside the data directory, and every refusal has its code and exit 5.

Each test puts a sentinel folder beside the data directory (``tests/support/outside.py``) and checks that
nothing in it was created, changed or deleted, and that none of its bytes were copied in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.ingest.item_bytes import read_item_bytes
from knowledge.ingest.remote import RemoteConfig
from knowledge.library import bases
from knowledge.library.chunk_ids import NEXT_CHUNK_ID
from knowledge.lifecycle import operations
from knowledge.portable import fileformat as ff
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.portable.import_rules import ImportRefused
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.portable.helpers import synthetic_base, table_counts
from tests.support.embedding_server import EmbeddingServer, HashVectors
from tests.support.outside import SECRET, Outside, files_holding

EXIT_REFUSED = 5


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    return Outside(tmp_path / "outside")


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Quire]:
    q = open_quire(tmp_path / "target")
    yield q
    q.close()


def exported(quire: Quire, tmp_path: Path, **kwargs: Any) -> Path:
    synthetic_base(quire, "kb", files=4, chunks_per_file=3, **kwargs)
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    return file


def craft(file: Path, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
    """Edit an export as an attacker would, then recompute its checksum so that it matches again."""
    conn = apsw.Connection(str(file))
    try:
        for statement in statements:
            sql, params = statement if isinstance(statement, tuple) else (statement, ())
            conn.execute(sql, params)
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (ff.content_checksum(conn), ff.CHECKSUM_KEY))
    finally:
        conn.close()


def set_base_setting(file: Path, **changes: Any) -> str:
    conn = apsw.Connection(str(file))
    try:
        base = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'base'").fetchall()[0][0])
    finally:
        conn.close()
    return json.dumps({**base, **changes}, sort_keys=True)


def refused_by_cli(file: Path, target: Path, code: str) -> dict[str, Any]:
    done = quire_cli("--json", "base", "import", str(file), data_dir=target)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == code and error["exit_code"] == EXIT_REFUSED
    assert "Traceback" not in done.stderr
    listed = json.loads(quire_cli("--json", "base", "list", data_dir=target).stdout)
    assert listed["bases"] == []  # nothing left visible
    return dict(error)


def refused_by_api(target: Quire, file: Path, code: str) -> ImportRefused:
    before = table_counts(target)
    with pytest.raises(ImportRefused) as caught:
        import_base(target, file)
    assert caught.value.code == code, str(caught.value)
    assert table_counts(target) == before  # nothing written
    return caught.value


TRAVERSALS = ["../../x", "abc/../../../x", "ab/../../../outside/sentinel.txt", "/etc/passwd", "A" * 64, "0" * 63]


@pytest.mark.parametrize("name", TRAVERSALS)
def test_blob_row_named_like_a_path_is_refused(quire: Quire, tmp_path: Path, outside: Outside, name: str) -> None:
    file = exported(quire, tmp_path)
    craft(
        file,
        (
            "UPDATE items SET blob_sha256 = ? WHERE seq = (SELECT min(seq) FROM items WHERE blob_sha256 IS NOT NULL)",
            (name,),
        ),
        ("UPDATE blobs SET sha256 = ?, data = ? WHERE seq = 1", (name, b"written by an attacker")),
    )
    error = refused_by_cli(file, tmp_path / "target-data", "invalid_blob_name")
    assert "not a content hash" in error["message"]
    outside.assert_untouched()
    assert not (tmp_path / "x").exists() and not (tmp_path / "target-data" / "x").exists()
    assert files_holding(tmp_path / "target-data", b"written by an attacker") == []


def test_item_naming_an_outside_file_as_its_text_is_refused(
    quire: Quire, target: Quire, tmp_path: Path, outside: Outside
) -> None:
    """The read attack: an item whose text 'blob' is a path to someone's file (MCP read, re-export)."""
    file = exported(quire, tmp_path)
    craft(file, ("UPDATE items SET text_sha256 = ? WHERE seq = 2", ("ab/../../../outside/sentinel.txt",)))
    refused_by_api(target, file, "invalid_blob_name")
    outside.assert_untouched()
    assert files_holding(target.data_dir, SECRET) == []


def test_blob_whose_bytes_do_not_hash_to_its_name_is_refused(
    quire: Quire, target: Quire, tmp_path: Path, outside: Outside
) -> None:
    file = exported(quire, tmp_path)
    craft(file, ("UPDATE blobs SET data = ? WHERE seq = 1", (b"not the bytes this name was made from",)))
    refused_by_api(target, file, "blob_mismatch")
    outside.assert_untouched()


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE VIEW v AS SELECT * FROM items",
        "CREATE TRIGGER t AFTER INSERT ON meta BEGIN DELETE FROM items; END",
        "CREATE INDEX extra ON items (name)",
        "CREATE TABLE extra (x)",
        "CREATE TABLE sneaky AS SELECT 1 AS a",
    ],
)
def test_anything_but_the_export_schema_is_refused(
    quire: Quire, tmp_path: Path, outside: Outside, statement: str
) -> None:
    file = exported(quire, tmp_path)
    craft(file, statement)
    error = refused_by_cli(file, tmp_path / "target-data", "unexpected_schema")
    assert "views, triggers and extra or changed tables are never read" in error["message"]
    outside.assert_untouched()


def test_a_changed_table_definition_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    """A column default or generated column could run SQL on read: the table text must be the export's own."""
    file = exported(quire, tmp_path)
    conn = apsw.Connection(str(file))
    conn.execute("ALTER TABLE items ADD COLUMN extra DEFAULT 1")
    conn.close()
    refused_by_api(target, file, "unexpected_schema")


def test_write_ahead_log_header_is_refused_without_creating_files(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = exported(quire, tmp_path)
    conn = apsw.Connection(str(file))
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.close()
    for extra in (f"{file}-wal", f"{file}-shm"):
        Path(extra).unlink(missing_ok=True)
    beside = sorted(p.name for p in tmp_path.iterdir())
    error = refused_by_api(target, file, "not_an_export")
    assert "write-ahead log" in str(error)
    assert sorted(p.name for p in tmp_path.iterdir()) == beside  # no -wal / -shm made beside it


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("UPDATE items SET id = -id, parent_id = -parent_id, root_id = -root_id", "not unique positive integers"),
        ("UPDATE items SET id = 1 WHERE seq <= 2", "not unique positive integers"),
        ("UPDATE items SET id = '7x' WHERE seq = 3", "not unique positive integers"),
        ("UPDATE chunks SET item_id = 999999", "point at no items row"),
        ("UPDATE chunks SET seq = seq + 1000", "not numbered"),
    ],
)
def test_ids_that_export_never_writes_are_refused(
    quire: Quire, target: Quire, tmp_path: Path, statement: str, words: str
) -> None:
    file = exported(quire, tmp_path)
    craft(file, statement)
    error = refused_by_api(target, file, "invalid_ids")
    assert words in str(error)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE items SET type = 'evil' WHERE seq = 3",
        "UPDATE items SET status = 'weird' WHERE seq = 3",
        "UPDATE folder_run_outcomes SET disposition = 'bogus'",
    ],
)
def test_rows_the_database_refuses_leave_nothing_behind(
    quire: Quire, target: Quire, tmp_path: Path, statement: str
) -> None:
    """Values no export holds fail a constraint part-way: the hidden import is removed at once."""
    file = exported(quire, tmp_path)
    craft(file, statement)
    refused_by_api(target, file, "invalid_rows")


def test_huge_ids_cannot_push_the_id_counters(quire: Quire, target: Quire, tmp_path: Path) -> None:
    """Ids are renumbered densely on import: ids near 2^62 in the file move nothing towards 2^63."""
    file = exported(quire, tmp_path)
    big = 2**62 - 10**6
    craft(
        file,
        (
            "UPDATE items SET id = id + ?, parent_id = parent_id + ?, root_id = root_id + ?",
            (big, big, big),
        ),
        ("UPDATE chunks SET id = id + ?, item_id = item_id + ?", (2**63 - 10**6, big)),
        ("UPDATE folder_runs SET container_item_id = container_item_id + ?", (big,)),
        ("UPDATE ingest_batches SET item_id = item_id + ?", (big,)),
        ("UPDATE folder_run_outcomes SET item_id = item_id + ?", (big,)),
    )
    with target.db.read() as conn:
        top_item = int(conn.execute(text("SELECT coalesce(max(id), 0) FROM items")).scalar_one())
    result = import_base(target, file)
    with target.db.read() as conn:
        new_top = int(conn.execute(text("SELECT max(id) FROM items")).scalar_one())
        top_chunk = int(conn.execute(text("SELECT max(id) FROM chunks")).scalar_one())
        next_chunk = int(
            conn.execute(text("SELECT value FROM settings WHERE key = :k"), {"k": NEXT_CHUNK_ID}).scalar_one()
        )
    assert new_top == top_item + result.items
    assert top_chunk == result.chunks and next_chunk == result.chunks + 1
    again = import_base(target, file, name="again")  # and it stays dense, import after import
    with target.db.read() as conn:
        assert int(conn.execute(text("SELECT max(id) FROM items")).scalar_one()) == new_top + again.items


@pytest.mark.parametrize(
    ("vector", "words"),
    [
        (np.full(384, np.nan, dtype=np.float32).tobytes(), "NaN or infinite"),
        (np.full(384, np.inf, dtype=np.float32).tobytes(), "NaN or infinite"),
        (np.ones(383, dtype=np.float32).tobytes(), "not 384 float32 numbers"),
        (np.ones(4096, dtype=np.float32).tobytes(), "not 384 float32 numbers"),
        (b"", "not 384 float32 numbers"),
    ],
)
def test_vectors_must_have_the_dimension_and_be_finite(
    quire: Quire, target: Quire, tmp_path: Path, vector: bytes, words: str
) -> None:
    file = exported(quire, tmp_path)
    craft(file, ("UPDATE chunks SET embedding = ? WHERE seq = 2", (vector,)))
    error = refused_by_api(target, file, "invalid_vector")
    assert words in str(error)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"chunk_size": 9999}, "chunk size 9999"),
        ({"chunk_size": 8}, "chunk size 8"),
        ({"chunk_size": "254"}, "chunk size 254"),
        ({"chunk_overlap": 300}, "chunk overlap"),
        ({"precision": "fp64"}, "precision"),
    ],
)
def test_settings_base_create_would_refuse_are_refused(
    quire: Quire, tmp_path: Path, changes: dict[str, Any], words: str
) -> None:
    file = exported(quire, tmp_path)
    craft(file, ("UPDATE meta SET value = ? WHERE key = 'base'", (set_base_setting(file, **changes),)))
    if "precision" in changes:
        craft(file, ("UPDATE meta SET value = ? WHERE key = 'precision'", (changes["precision"],)))
    error = refused_by_cli(file, tmp_path / "target-data", "invalid_settings")
    assert words in error["message"]


def test_crafted_source_path_is_never_read(quire: Quire, target: Quire, tmp_path: Path, outside: Outside) -> None:
    """Imported paths are someone else's word: reindex reads the owned copy and never walks the folder,
    until a person relocates the base. Each file names a path outside, the first the secret itself (one path
    per file: a second file naming the same one is a second copy, which the import lets go)."""
    file = exported(quire, tmp_path)
    craft(
        file,
        (
            "UPDATE items SET source_path = CASE WHEN id = (SELECT min(id) FROM items WHERE type = 'file') "
            "THEN ? ELSE ? || '-' || id END WHERE type = 'file'",
            (str(outside.secret), str(outside.secret)),
        ),
        ("UPDATE items SET source_path = ? WHERE type = 'directory'", (str(outside.root),)),
    )
    import_base(target, file)
    listed = quire_cli("--json", "items", "kb", data_dir=target.data_dir)
    assert {r["source"] for r in json.loads(listed.stdout)["items"]} == {"original not verified"}
    with target.db.read() as conn:
        rows = conn.execute(text("SELECT id, type FROM items ORDER BY id")).all()
    leaf = operations.get_item(target, "kb", next(r.id for r in rows if r.type == "file"))
    raw, _mtime = read_item_bytes(target, leaf)
    assert SECRET not in raw and b"part" in raw  # the owned copy, not the file the path names
    # the whole base reindexed by a real worker: the folder is not walked, the secret never read
    folder = next(r.id for r in rows if r.type == "directory")
    # folder sync would watch and walk the path: refused until a person vouches for it
    synced = quire_cli("--json", "sync", "on", "kb", str(folder), data_dir=target.data_dir)
    assert synced.returncode == 5, synced.stdout + synced.stderr
    assert "quire base relocate" in json.loads(synced.stdout)["error"]["message"]
    done = quire_cli("--json", "reindex", "kb", str(folder), data_dir=target.data_dir)
    assert done.returncode == 0, done.stderr
    worker = quire_cli("worker", "--until-idle", data_dir=target.data_dir, timeout=600)
    assert worker.returncode == 0, worker.stderr
    items = json.loads(quire_cli("--json", "items", "kb", data_dir=target.data_dir).stdout)["items"]
    assert len(items) == len(rows) and {i["status"] for i in items} == {"completed"}
    assert "folder" not in {i["name"] for i in items} and "other.txt" not in {i["name"] for i in items}
    assert files_holding(target.data_dir, SECRET) == []
    outside.assert_untouched()


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    """An OpenAI-compatible endpoint on 127.0.0.1 that counts what reaches it."""
    server = EmbeddingServer(HashVectors(384))
    yield server
    server.close()


def remote_export(quire: Quire, tmp_path: Path, endpoint_url: str) -> Path:
    synthetic_base(quire, "kb", files=3, chunks_per_file=2)
    config = RemoteConfig(endpoint_url, "remote-model", 384).as_json()
    with quire.db.write() as conn:
        conn.execute(text("UPDATE bases SET embedder = :e WHERE name = 'kb'"), {"e": json.dumps(config)})
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    return file


def test_imported_endpoint_is_held_back_until_a_person_confirms_it(
    quire: Quire, tmp_path: Path, endpoint: EmbeddingServer
) -> None:
    file = remote_export(quire, tmp_path, endpoint.url)
    data_dir = tmp_path / "target-data"
    assert quire_cli("--json", "base", "import", str(file), data_dir=data_dir).returncode == 0
    shown = json.loads(quire_cli("--json", "base", "show", "kb", data_dir=data_dir).stdout)
    assert shown["embedder"]["endpoint"] == endpoint.url and shown["embedder"]["needs_confirming"] is True
    assert "needs confirming" in quire_cli("base", "show", "kb", data_dir=data_dir).stdout
    for args in (("search", "kb", "protein cell"), ("add", "kb", "--note", "hello")):
        done = quire_cli("--json", *args, data_dir=data_dir)
        assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "endpoint_needs_confirming"
        assert "quire base confirm-endpoint kb" in error["message"]
    assert endpoint.behaviour.requests == 0  # never called before a person confirmed it
    agent = quire_cli("--json", "--as-agent", "helper", "base", "confirm-endpoint", "kb", data_dir=data_dir)
    assert agent.returncode == EXIT_REFUSED  # an agent cannot vouch for it
    confirmed = quire_cli("--json", "base", "confirm-endpoint", "kb", data_dir=data_dir)
    assert confirmed.returncode == 0, confirmed.stderr
    assert "needs_confirming" not in json.loads(confirmed.stdout)["embedder"]
    searched = quire_cli("--json", "search", "kb", "protein cell", data_dir=data_dir)
    assert searched.returncode == 0, searched.stderr
    assert endpoint.behaviour.requests >= 1


@pytest.mark.parametrize(
    "url",
    [
        "http://user:sekret@127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1?api_key=sekret",
        "http://127.0.0.1:9/#frag",
        "file:///etc",
    ],
)
def test_endpoint_with_a_secret_or_query_is_refused(quire: Quire, target: Quire, tmp_path: Path, url: str) -> None:
    file = remote_export(quire, tmp_path, "http://127.0.0.1:9/v1")
    embedder = {**RemoteConfig("http://127.0.0.1:9/v1", "remote-model", 384).as_json(), "endpoint": url}
    craft(file, ("UPDATE meta SET value = ? WHERE key = 'base'", (set_base_setting(file, embedder=embedder),)))
    error = refused_by_api(target, file, "endpoint_refused")
    assert "sekret" not in str(error)


def test_a_local_model_base_stays_a_local_model_base(quire: Quire, target: Quire, tmp_path: Path) -> None:
    """The control: an ordinary export imports as before, its endpoint-free settings unchanged."""
    file = exported(quire, tmp_path)
    import_base(target, file)
    base = bases.get_base(target.db, "kb")
    assert base.embedder is None and not base.endpoint_unconfirmed and base.chunk_size == 254
