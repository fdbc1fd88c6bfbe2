"""Validating an export file before anything is written: format, integrity, checksum, content and model stamp.

The file is opened as a foreign database (:mod:`knowledge.portable.foreign`: read-only, defensive, capped)
and its schema compared with what an export writes before any row is read; then the content rules of
:mod:`knowledge.portable.import_rules` (the checksum alone proves nothing: an attacker recomputes it)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apsw

from knowledge.errors import InvalidInput, NotFound
from knowledge.portable import fileformat as ff
from knowledge.portable import foreign, import_rules
from knowledge.portable.import_rules import ExportInfo, ImportRefused, check_schema

log = logging.getLogger(__name__)


Progress = Callable[[str, int, int], None]
PAGE_ROWS = 500
BLOB_PAGE_BYTES = 32 * 1024 * 1024
STAGES = ("runs", "items", "chunks", "blobs", "finish")
EXPORTED_WHILE_ACTIVE = "exported_while_active"


@dataclass(frozen=True)
class ImportResult:
    base_id: int
    name: str
    items: int
    chunks: int
    blobs: int
    marked_for_reindex: int
    resumed: bool
    seconds: float
    # a team store's HNSW index built at the end of the import (a large base): its build time, else None
    vector_index_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- validation (writes nothing) ----------------------------------------------------------------


def open_export(path: Path) -> apsw.Connection:
    """The export, opened as a foreign database, its schema checked before any row is read."""
    if not path.is_file():
        raise NotFound(f"{path.name} does not exist or is not a file")
    path = path.resolve()  # the person's choice of file may be a link; nothing inside it is followed
    try:
        conn = foreign.open_database(path)
    except foreign.ForeignFileRefused as exc:
        raise ImportRefused("not_an_export", f"{path.name} is not a Quire base export ({exc.reason})") from None
    except (apsw.Error, OSError):
        raise _damaged(path) from None
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        check_schema(conn, path.name)
    except ImportRefused:
        conn.close()
        raise
    except apsw.Error:
        conn.close()
        raise _damaged(path) from None
    return conn


def _damaged(path: Path) -> ImportRefused:
    return ImportRefused("damaged", f"{path.name} is damaged (truncated or overwritten); export again")


def _meta(conn: apsw.Connection, name: str) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    except apsw.CorruptError:
        raise ImportRefused("damaged", f"{name} is damaged (truncated or overwritten); export the base again") from None
    except apsw.Error:
        raise ImportRefused("not_an_export", f"{name} is not a Quire base export") from None


def validate_export(path: Path, *, check_model: bool = True) -> ExportInfo:
    """Check an export file thoroughly; raise :class:`ImportRefused` with a specific code if it is unusable."""
    path = Path(path)
    conn = open_export(path)
    try:
        return check_export(conn, path, check_model=check_model)
    finally:
        conn.close()


def check_export(conn: apsw.Connection, path: Path, *, check_model: bool = True) -> ExportInfo:
    """Everything :func:`validate_export` checks, on an export already opened with :func:`open_export`."""
    info = _read_info(conn, path)
    import_rules.check_settings(info)
    if check_model:
        _check_model(info)
    import_rules.check_rows(conn, info)
    return info


def _read_info(conn: apsw.Connection, path: Path) -> ExportInfo:
    meta = _meta(conn, path.name)
    if meta.get("format") != ff.FORMAT_NAME:
        raise ImportRefused("not_an_export", f"{path.name} is not a Quire base export")
    try:
        version = int(meta.get("format_version", ""))
    except ValueError:
        raise ImportRefused("damaged", f"{path.name} has no readable format version") from None
    if version > ff.FORMAT_VERSION:
        raise ImportRefused(
            "newer_format",
            f"{path.name} was written by a newer Quire (export format {version}; this one reads up to "
            f"{ff.FORMAT_VERSION}); update Quire to import it",
        )
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        checksum = ff.content_checksum(conn)
    except apsw.Error:
        raise ImportRefused("damaged", f"{path.name} is damaged (truncated or overwritten); export again") from None
    if problems != ["ok"]:
        raise ImportRefused("damaged", f"{path.name} is damaged ({problems[0][:120]}); export the base again")
    if checksum != meta.get(ff.CHECKSUM_KEY):
        raise ImportRefused(
            "checksum_mismatch",
            f"{path.name} was changed after it was exported (its content checksum does not match); "
            "export the base again",
        )
    try:
        info = ExportInfo(
            path=path,
            checksum=checksum,
            base=dict(json.loads(meta["base"])),
            counts={str(k): int(v) for k, v in dict(json.loads(meta["counts"])).items()},
            model_id=meta["model_id"],
            dimension=int(meta["dimension"]),
            precision=meta["precision"],
        )
    except (KeyError, TypeError, ValueError):
        raise ImportRefused("damaged", f"{path.name} has unreadable settings; export the base again") from None
    return info


def _check_model(info: ExportInfo) -> None:
    """The model stamp must name a model this installation has, of the same dimension (never loaded here)."""
    from knowledge.ingest import openvino_backend
    from knowledge.ingest.models import model_spec

    try:
        spec = model_spec(info.model_id)
    except (InvalidInput, ImportError, OSError):
        raise ImportRefused(
            "model_missing",
            f"the base was made with the embedding model {info.model_id!r}, which this installation does not "
            "have; its vectors cannot be searched here",
        ) from None
    if info.backend == "openvino" and not openvino_backend.available():
        raise ImportRefused(
            "model_missing",
            "the base's vectors were made by the OpenVINO backend, which this installation does not have "
            "(pip install openvino); its vectors cannot be searched here",
        )
    if info.base.get("embedder") is None and spec.dimension != info.dimension:  # a remote model has its own
        raise ImportRefused(
            "model_mismatch",
            f"the base's vectors have {info.dimension} dimensions but this installation's {info.model_id!r} "
            f"makes {spec.dimension}",
        )
