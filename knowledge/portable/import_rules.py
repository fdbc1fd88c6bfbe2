"""What an export file must look like before a row of it is applied; every check only reads.

The checksum proves nothing against an attacker (they recompute it), so an import checks the content
itself: exactly the schema an export writes (no views, triggers, extra tables or indexes), settings a
``base create`` would accept, a remote endpoint with no user-info or query string, ids that are positive
unique integers whose references resolve (items parents-first), owned-copy names that are hashes of
their own bytes, and vectors of the base's dimension with finite components. Each refusal is an
:class:`ImportRefused` with its own code (CLI exit 5).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from knowledge.errors import GuardRejected, InvalidInput
from knowledge.library import blobs
from knowledge.library.bases import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, encoding_refusal
from knowledge.portable import fileformat as ff

MAX_ID = 2**62  # ids are renumbered on import; this only keeps arithmetic on them far from overflow
MAX_DIMENSION = 8192


class ImportRefused(GuardRejected):
    """The file cannot be imported here; ``code`` says why (exit code 5)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ExportInfo:
    path: Path
    checksum: str
    base: dict[str, Any]
    counts: dict[str, int]
    model_id: str
    dimension: int
    precision: str

    @property
    def backend(self) -> str:
        """What ran the model (exports from before backends existed: torch)."""
        return str(self.base.get("backend") or "torch")


def expected_schema() -> set[tuple[str, str, str, str | None]]:
    """(type, name, table, sql) of every schema object an export file has — made by the export's own DDL."""
    conn = apsw.Connection(":memory:")
    try:
        conn.execute(ff.META_CREATE)
        for table in ff.ROW_TABLES:
            conn.execute(table.create_sql())
        return _schema(conn)
    finally:
        conn.close()


def _schema(conn: apsw.Connection) -> set[tuple[str, str, str, str | None]]:
    return {
        (str(t), str(n), str(tbl), None if sql is None else str(sql))
        for t, n, tbl, sql in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema")
    }


def schema_of(conn: apsw.Connection, name: str) -> set[tuple[str, str, str, str | None]]:
    """(type, name, table, sql) of every schema object of a foreign database, read before any of its rows."""
    try:
        return _schema(conn)
    except apsw.Error:
        raise ImportRefused("damaged", f"{name} is damaged (its schema cannot be read)") from None


def schema_detail(found: set[tuple[str, str, str, str | None]], expected: set[tuple[str, str, str, str | None]]) -> str:
    """The objects (a view, a trigger, a changed table…) a refusal names, briefly."""
    extra = sorted(f"{t} {n}" for t, n, _tbl, _sql in found - expected)
    return f" ({', '.join(extra[:3])[:120]})" if extra else ""


def check_schema(conn: apsw.Connection, name: str) -> None:
    """Before any row is read: the file has exactly what an export writes."""
    found = schema_of(conn, name)
    if found != expected_schema():
        detail = schema_detail(found, expected_schema())
        raise ImportRefused(
            "unexpected_schema",
            f"{name} is not laid out as a Quire export writes it{detail}: views, triggers and extra or changed "
            "tables are never read; export the base again",
        )


# -- settings ------------------------------------------------------------------------------------


def check_settings(info: ExportInfo) -> None:
    """The base's settings: what ``base create`` accepts (chunking, precision, backend, dimension)."""
    base, name = info.base, info.path.name

    def refuse(what: str) -> ImportRefused:
        return ImportRefused("invalid_settings", f"{name} holds settings Quire never makes ({what}); not imported")

    size, overlap = base.get("chunk_size"), base.get("chunk_overlap")
    if not isinstance(size, int) or not MIN_CHUNK_SIZE <= size <= MAX_CHUNK_SIZE:
        raise refuse(f"chunk size {str(size)[:20]}; it must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}")
    if not isinstance(overlap, int) or not 0 <= overlap < size:
        raise refuse("a chunk overlap outside 0 .. chunk size")
    if encoding_refusal(info.model_id, info.precision, info.backend, remote=base.get("embedder") is not None):
        raise refuse("an unknown precision or backend")
    if not 0 < info.dimension <= MAX_DIMENSION:
        raise refuse(f"a dimension of {info.dimension}")
    if not isinstance(base.get("name"), str):
        raise refuse("a base without a name")
    embedder = base.get("embedder")
    if embedder is not None:
        check_endpoint_config(embedder, name, info.dimension)


def check_endpoint_config(embedder: Any, name: str, dimension: int) -> None:
    """A remote embedder travels as configuration only; one that carries a secret (user-info in the URL)
    or a query string, or that does not parse, is refused (``name``: the file it came in)."""
    from knowledge.ingest.remote import RemoteConfig
    from knowledge.ingest.remote_http import endpoint_problem

    try:
        config = RemoteConfig.from_json(embedder)
        config.settings.validate()
    except (InvalidInput, TypeError, ValueError, KeyError, AttributeError):
        raise ImportRefused("invalid_settings", f"{name} holds a remote embedder Quire cannot read") from None
    problem = endpoint_problem(config.endpoint, sends_key=config.api_key_env is not None)
    if problem:  # the same rule as base create and every request (remote_http), phrased once there
        raise ImportRefused("endpoint_refused", f"{name} names a remote embedder Quire refuses: {problem}")
    if config.dimension != dimension:
        raise ImportRefused("invalid_settings", f"{name} holds a remote embedder of another dimension than its base")
    key = config.api_key_env
    if key is not None and not (isinstance(key, str) and key.replace("_", "").isalnum()):
        raise ImportRefused("invalid_settings", f"{name} names an API key variable that is not a variable name")


# -- rows ----------------------------------------------------------------------------------------


def _one(conn: apsw.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchall()[0]


def refuse_ids(name: str, what: str) -> ImportRefused:
    return ImportRefused("invalid_ids", f"{name} has {what}; Quire never writes that, so it is refused")


def check_ids(conn: apsw.Connection, table: str, name: str) -> None:
    rows, distinct, bad = _one(
        conn,
        f"SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE typeof(id) != 'integer' OR id <= 0 "
        f"OR id >= {MAX_ID}) FROM {table}",
    )
    if bad or rows != distinct:
        raise refuse_ids(name, f"{table} ids that are not unique positive integers")


def _check_seq(conn: apsw.Connection, table: str, name: str) -> None:
    rows, low, high = _one(conn, f"SELECT count(*), min(seq), max(seq) FROM {table}")
    if rows and (low != 1 or high != rows):
        raise refuse_ids(name, f"{table} rows that are not numbered 1..{rows}")


def _dangling(conn: apsw.Connection, table: str, column: str, target: str, name: str) -> None:
    found = _one(
        conn,
        f'SELECT count(*) FROM {table} WHERE "{column}" IS NOT NULL AND "{column}" NOT IN (SELECT id FROM {target})',
    )[0]
    if found:
        raise refuse_ids(name, f"{table}.{column} values that point at no {target} row")


def check_references(conn: apsw.Connection, name: str) -> None:
    """Ids positive, unique and integer; every reference resolves inside the file; parents come first."""
    for table in ("items", "folder_runs", "folder_run_sources", "ingest_batches", "folder_run_outcomes"):
        check_ids(conn, table, name)
    _check_seq(conn, "chunks", name)  # chunk ids are renumbered by their order in the file
    for table, column, target in (
        ("items", "parent_id", "items"),
        ("items", "root_id", "items"),
        ("chunks", "item_id", "items"),
        ("folder_runs", "container_item_id", "items"),
        ("folder_run_sources", "run_id", "folder_runs"),
        ("ingest_batches", "run_id", "folder_runs"),
        ("ingest_batches", "source_id", "folder_run_sources"),
        ("ingest_batches", "item_id", "items"),
        ("folder_run_outcomes", "run_id", "folder_runs"),
        ("folder_run_outcomes", "source_id", "folder_run_sources"),
        ("folder_run_outcomes", "batch_id", "ingest_batches"),
        ("folder_run_outcomes", "item_id", "items"),
    ):
        _dangling(conn, table, column, target, name)
    if _one(conn, "SELECT count(*) FROM chunks WHERE item_id IS NULL")[0]:
        raise refuse_ids(name, "chunks that belong to no item")
    late = _one(conn, "SELECT count(*) FROM items c JOIN items p ON p.id = c.parent_id WHERE p.seq >= c.seq")[0]
    if late:
        raise refuse_ids(name, "items listed before their parent folder")


def check_blob_names(conn: apsw.Connection, name: str) -> None:
    """Every owned-copy name an item carries is NULL or a hash (it becomes a file name)."""
    sql = (
        "SELECT blob_sha256 FROM items WHERE blob_sha256 IS NOT NULL UNION "
        "SELECT text_sha256 FROM items WHERE text_sha256 IS NOT NULL"
    )
    for (sha,) in conn.execute(sql):
        if not blobs.is_blob_name(sha):
            raise ImportRefused(
                "invalid_blob_name",
                f"{name} names an owned copy {repr(sha)[:40]}, which is not a content hash; refused",
            )


def blob_problem(sha: Any, kind: Any, data: Any) -> str | None:
    """Why a blob row must not be written (None when it is sound): a hash name of exactly its bytes."""
    if not blobs.is_blob_name(sha):
        return f"an owned copy named {repr(sha)[:40]}, which is not a content hash"
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != sha:
        return f"an owned copy {sha[:12]}… whose bytes do not hash to its name"
    if kind not in ("raw", "text"):
        return f"an owned copy {sha[:12]}… of an unknown kind"
    return None


def check_blobs(conn: apsw.Connection, name: str) -> None:
    for sha, kind, data in conn.execute("SELECT sha256, kind, data FROM blobs"):
        if (problem := blob_problem(sha, kind, data)) is not None:
            code = "invalid_blob_name" if not blobs.is_blob_name(sha) else "blob_mismatch"
            raise ImportRefused(code, f"{name} holds {problem}; not imported")


def vector_problem(embedding: Any, dimension: int, dtype: type[np.floating[Any]] = np.float32) -> str | None:
    """Why a chunk's vector (float32, or the float16 copy) must not be written (None when it is sound)."""
    width = np.dtype(dtype).itemsize
    if not isinstance(embedding, bytes) or len(embedding) != width * dimension:
        return f"a vector that is not {dimension} {np.dtype(dtype).name} numbers"
    if not np.isfinite(np.frombuffer(embedding, dtype=dtype)).all():
        return "a vector with a NaN or infinite component"
    return None


def check_chunks(conn: apsw.Connection, info: ExportInfo) -> None:
    for embedding, text in conn.execute("SELECT embedding, text FROM chunks"):
        problem = vector_problem(embedding, info.dimension) or (
            None if isinstance(text, str) else "a chunk with no text"
        )
        if problem is not None:
            raise ImportRefused("invalid_vector", f"{info.path.name} holds {problem}; not imported")


def check_rows(conn: apsw.Connection, info: ExportInfo) -> None:
    check_references(conn, info.path.name)
    check_blob_names(conn, info.path.name)
    check_chunks(conn, info)
    check_blobs(conn, info.path.name)
