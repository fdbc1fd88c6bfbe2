"""Export and import without a model: a faithful round trip, refusals that write nothing, relocation.

The tests parametrized over ENGINES export from and import into a data directory, or team stores (the
source and the target each a database of their own on the loopback server); the rest are about what only a
data directory has (its vector file, the CLI on it, SQLite's own schema, salvage).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from sqlalchemy import text

from knowledge.compose import open_quire, open_team_quire
from knowledge.errors import Conflict, NotFound
from knowledge.library import bases, blobs
from knowledge.library.index import vectors_version
from knowledge.library.vector_file import VectorFiles
from knowledge.portable import fileformat as ff
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.portable.import_check import validate_export
from knowledge.portable.import_rules import ImportRefused
from knowledge.portable.relocate import NOT_VERIFIED
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.portable.helpers import base_content, synthetic_base, table_counts
from tests.support.engine_fixtures import ENGINES, engine_quire, on_team_store

# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)


@pytest.fixture
def target(request: pytest.FixtureRequest, quire: Quire, tmp_path: Path) -> Iterator[Quire]:
    """Another store on the source's engine: a data directory, or another database on the same server."""
    if on_team_store(quire):
        url = request.getfixturevalue("postgres_server").create_database(f"quire_target_{uuid.uuid4().hex[:12]}")
        q = open_team_quire(url, data_dir=tmp_path / "elsewhere")
    else:
        q = open_quire(tmp_path / "elsewhere")
    yield q
    q.close()


def _no_encoder(*_args: object) -> object:
    raise AssertionError("the encoder must not be built during an import")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_round_trip_keeps_everything(quire: Quire, target: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=15, chunks_per_file=5)
    file = tmp_path / "kb.quirebase"
    seen: list[tuple[str, int, int]] = []
    result = export_base(quire, "kb", file, progress=lambda s, d, t: seen.append((s, d, t)))
    assert (result.items, result.chunks, result.blobs, result.folder_runs) == (16, 75, 15, 1)
    assert result.active_items == 0
    assert {s for s, _d, _t in seen} >= {"items", "chunks", "check"}
    target.encoder_factory = _no_encoder
    imported = import_base(target, file)
    assert (imported.name, imported.items, imported.chunks, imported.resumed) == ("kb", 16, 75, False)
    assert base_content(target, "kb") == base_content(quire, "kb")
    for sha in (r[7] for r in base_content(target, "kb")["items"] if r[7]):
        copied = blobs.read_owned(target.db, target.blobs_dir, sha)
        assert copied is not None and copied == blobs.read_owned(quire.db, quire.blobs_dir, sha)
    # the same file imported again beside it, under another name: ids never collide, the ledger keys neither
    again = import_base(target, file, name="kb copy")
    assert again.base_id != imported.base_id
    assert base_content(target, "kb copy")["chunks"] == base_content(quire, "kb")["chunks"]
    with pytest.raises(Conflict, match="already exists"):
        import_base(target, file)


def test_an_import_builds_the_bases_vector_file(quire: Quire, target: Quire, tmp_path: Path) -> None:
    """Built when the import finishes, not by its first search (on a large base that is minutes)."""
    from tests.knowledge.test_vector_file import assert_matches_rows, key_of

    synthetic_base(quire, "kb", files=15, chunks_per_file=5)
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    imported = import_base(target, file)
    base = bases.get_base(target.db, "kb")
    files = VectorFiles(target.db)
    mapped = files.peek(key_of(base))
    assert mapped is not None and mapped.header.count == imported.chunks == 75
    with target.db.read() as conn:
        assert mapped.version == vectors_version(conn, base.id)
    assert_matches_rows(target, base, mapped, exact=True)


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_export_refuses_to_overwrite(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=2, chunks_per_file=2)
    file = tmp_path / "kb.quirebase"
    file.write_bytes(b"precious")
    with pytest.raises(Conflict):
        export_base(quire, "kb", file)
    assert file.read_bytes() == b"precious"


def _exported(quire: Quire, tmp_path: Path, **kwargs: object) -> Path:
    synthetic_base(quire, "kb", files=6, chunks_per_file=3, **kwargs)  # type: ignore[arg-type]
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    return file


def _assert_refused(target: Quire, file: Path, code: str, words: str) -> None:
    before = table_counts(target)
    with pytest.raises(ImportRefused, match=words) as caught:
        import_base(target, file)
    assert caught.value.code == code
    assert table_counts(target) == before  # nothing written


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_tampered_file_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    conn = apsw.Connection(str(file))
    conn.execute("UPDATE chunks SET text = 'changed by someone' WHERE seq = 3")
    conn.close()
    _assert_refused(target, file, "checksum_mismatch", "changed after it was exported")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_truncated_file_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    size = file.stat().st_size
    with open(file, "r+b") as f:
        f.truncate(size // 2)
    _assert_refused(target, file, "damaged", "damaged")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_overwritten_bytes_are_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    data = bytearray(file.read_bytes())
    for n in range(len(data) // 2, len(data) // 2 + 4096):  # one page of noise in the middle
        data[n] = (data[n] * 31 + 7) % 256
    file.write_bytes(bytes(data))
    before = table_counts(target)
    with pytest.raises(ImportRefused) as caught:
        import_base(target, file)
    assert caught.value.code in ("damaged", "checksum_mismatch")
    assert table_counts(target) == before


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_newer_format_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    conn = apsw.Connection(str(file))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(ff.FORMAT_VERSION + 1),))
    conn.close()
    _assert_refused(target, file, "newer_format", "newer Quire")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_missing_model_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path, model_id="e5-small-v2")
    _assert_refused(target, file, "model_missing", "'e5-small-v2', which this installation does not have")


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_not_an_export_is_refused(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("just text\n" * 100)
    _assert_refused(target, file, "not_an_export", "not a Quire base export")


def test_cli_refusal_has_exit_code_and_reason(quire: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path, model_id="e5-small-v2")
    other = tmp_path / "other"
    done = quire_cli("--json", "base", "import", str(file), data_dir=other)
    assert done.returncode == 5, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "model_missing"
    listed = quire_cli("--json", "base", "list", data_dir=other)
    assert json.loads(listed.stdout)["bases"] == []


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_validate_reports_counts(quire: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    info = validate_export(file)
    assert (info.counts["items"], info.counts["chunks"], info.model_id) == (7, 18, "all-MiniLM-L6-v2")


def test_not_on_this_machine_and_relocate(quire: Quire, target: Quire, tmp_path: Path) -> None:
    old_root = tmp_path / "was-here"
    file = _exported(quire, tmp_path, source_root=old_root)
    import_base(target, file)
    listed = quire_cli("--json", "items", "kb", data_dir=target.data_dir)
    rows = json.loads(listed.stdout)["items"]
    assert {r["source"] for r in rows} == {NOT_VERIFIED}  # imported paths are someone else's word
    new_root = tmp_path / "moved"
    new_root.mkdir()
    for r in rows:
        if r["relative_path"]:
            (new_root / r["relative_path"]).write_text("here now")
    moved = quire_cli("--json", "base", "relocate", "kb", str(old_root), str(new_root), data_dir=target.data_dir)
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["relocated"] == len(rows)
    rows = json.loads(quire_cli("--json", "items", "kb", data_dir=target.data_dir).stdout)["items"]
    assert {r["source"] for r in rows} == {"present"}
    assert all(r["source_path"].startswith(str(new_root)) for r in rows)
    assert os.path.isdir(rows[0]["source_path"]) or os.path.isfile(rows[0]["source_path"])


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_a_base_being_imported_is_invisible(quire: Quire, target: Quire, tmp_path: Path) -> None:
    file = _exported(quire, tmp_path)
    peeks: list[list[str]] = []

    def peek(stage: str, _done: int, _total: int) -> None:
        if stage in ("items", "chunks", "blobs"):
            peeks.append([b.name for b in bases.list_bases(target.db)])
            with pytest.raises(NotFound):
                bases.get_base(target.db, "kb")

    import_base(target, file, progress=peek)
    assert peeks and all(p == [] for p in peeks)
    assert [b.name for b in bases.list_bases(target.db)] == ["kb"]


def test_base_imports_table_mirrors_its_ddl(quire: Quire) -> None:
    from sqlalchemy import text

    from knowledge.store.schema_portable import base_imports

    with quire.db.read() as conn:
        columns = [r[1] for r in conn.execute(text("PRAGMA table_info(base_imports)")).all()]
    assert columns == [c.name for c in base_imports.columns]


def test_link_rows_come_with_an_import_and_a_salvage(quire: Quire, target: Quire, tmp_path: Path) -> None:
    """``item_links`` is derived from the items' metadata: an import writes the rows with its items and a
    salvage re-derives them (it does not copy the table), so backlinks answer the same in either copy."""
    from knowledge.library.links import backlinks, record_links
    from knowledge.portable.salvage import salvage

    synthetic_base(quire, "kb", files=3, chunks_per_file=1)
    fields = {"links": "doc001.txt | Nowhere"}
    with quire.db.write() as conn:  # what the Markdown reader would have stored for a note
        note = conn.execute(text("SELECT id FROM items WHERE name = 'doc000.txt'")).scalar_one()
        conn.execute(text("UPDATE items SET metadata = :m WHERE id = :i"), {"m": json.dumps(fields), "i": note})
        record_links(conn, note, fields)

    def linked(q: Quire) -> list[str]:
        base = bases.get_base(q.db, "kb")
        with q.db.read() as conn:
            doc = conn.execute(
                text("SELECT id FROM items WHERE base_id = :b AND name = 'doc001.txt'"), {"b": base.id}
            ).scalar_one()
            return [link.name for link in backlinks(conn, base.id, [doc])[doc]]

    assert linked(quire) == ["doc000.txt"]
    file = tmp_path / "kb.quirebase"
    export_base(quire, "kb", file)
    import_base(target, file)
    assert linked(target) == ["doc000.txt"]
    salvage(quire.data_dir, tmp_path / "salvaged")
    salvaged = open_quire(tmp_path / "salvaged")
    try:
        assert linked(salvaged) == ["doc000.txt"]
    finally:
        salvaged.close()
