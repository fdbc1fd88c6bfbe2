"""Validating an export file before anything is written: format, integrity, checksum and model stamp."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apsw

from knowledge.errors import GuardRejected, InvalidInput, NotFound
from knowledge.portable import fileformat as ff

log = logging.getLogger(__name__)


Progress = Callable[[str, int, int], None]
PAGE_ROWS = 500
BLOB_PAGE_BYTES = 32 * 1024 * 1024
STAGES = ("runs", "items", "chunks", "blobs", "finish")
EXPORTED_WHILE_ACTIVE = "exported_while_active"


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- validation (writes nothing) ----------------------------------------------------------------


def open_export(path: Path) -> apsw.Connection:
    if not path.is_file():
        raise NotFound(f"{path.name} does not exist or is not a file")
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.Error:
        with open(path, "rb") as f:
            header = f.read(16)
        if header == b"SQLite format 3\x00":  # a database, cut short or overwritten
            raise ImportRefused("damaged", f"{path.name} is damaged (truncated or overwritten); export again") from None
        raise ImportRefused("not_an_export", f"{path.name} is not a Quire base export (not a database)") from None
    return conn


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
        info = ExportInfo(
            path=path,
            checksum=checksum,
            base=json.loads(meta["base"]),
            counts={k: int(v) for k, v in json.loads(meta["counts"]).items()},
            model_id=meta["model_id"],
            dimension=int(meta["dimension"]),
            precision=meta["precision"],
        )
    finally:
        conn.close()
    if check_model:
        _check_model(info)
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
    if spec.dimension != info.dimension:
        raise ImportRefused(
            "model_mismatch",
            f"the base's vectors have {info.dimension} dimensions but this installation's {info.model_id!r} "
            f"makes {spec.dimension}",
        )
