"""A source read, parsed and chunked outside any transaction, with what it was judged on."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.runtime import sanitize_error
from knowledge.folder_runs.ledger import ManifestSource
from knowledge.folder_runs.preview import is_covered
from knowledge.ingest.material import (
    MAX_SOURCE_BYTES,
    BatchStats,
    Prepared,
    Rejected,
    embed_batch,
    prepare_bytes_isolated,
    write_blob_files,
)
from knowledge.library import blobs
from knowledge.library import items as tree
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.sources import SourceRejected
from knowledge.sources.files import read_source

if TYPE_CHECKING:
    from knowledge.ingest.embedding import Encoder
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


@dataclass
class SourceTools:
    """Per-attempt, lazily loaded: the tokenizer's model directory and the document encoder."""

    quire: Quire
    base: Base
    _encoder: Encoder | None = None
    _model_path: str | None = None

    @property
    def model_path(self) -> str:
        if self._model_path is None:
            from knowledge.ingest.models import model_spec

            self._model_path = model_spec(self.base.model_id).path
        return self._model_path

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = self.quire.document_encoder(self.base.model_id, self.base.precision, self.base.embedder)
        return self._encoder


@dataclass
class SourceWork:
    """What was read (and, when worth it, parsed and embedded) outside the source's transaction."""

    ident: tuple[int, ...] | None = None  # the file's stat identity around the read (None: it moved)
    sha: str | None = None
    unavailable: str | None = None
    changed: bool = False
    rejected: str | None = None
    rejected_code: str | None = None  # decides the disposition: skipped (by design) or rejected
    prepared: Prepared | None = None


def file_identity(path: Path) -> tuple[int, ...]:
    """The file's identity for "is it still the bytes we read": device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def prepare_source(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork:
    path = root / source.relative_path
    try:
        before = file_identity(path)
        raw = read_source(path, max_bytes=MAX_SOURCE_BYTES)
        after = file_identity(path)
    except SourceRejected as rejected:
        return SourceWork(unavailable=rejected.reason)
    except OSError:
        return SourceWork(unavailable="the file cannot be read")
    sha = blobs.sha256_bytes(raw)
    if sha != source.content_sha256 or len(raw) != source.size:
        return SourceWork(ident=after, sha=sha, changed=True)
    work = SourceWork(ident=after if before == after else None, sha=sha)
    with tools.quire.db.read() as conn:
        if is_covered(conn, tools.base, sha):
            return work  # nothing to parse: the transaction will settle it already_covered
    item = _placeholder_item(tools.base, path, source.relative_path)
    try:
        parser = tools.quire.parsers.for_this_thread()  # a hang or crash costs this source, not the run
        outcome = prepare_bytes_isolated(tools.base, item, raw, sha, after[3] / 1e9, tools.model_path, parser)
    except Exception as exc:  # a parser bug isolates this source (poison-item isolation), not the run
        work.rejected = f"parse_error: {sanitize_error(exc)}"
        return work
    if isinstance(outcome, Rejected):
        work.rejected, work.rejected_code = f"{outcome.code}: {outcome.message}", outcome.code
        return work
    prepared = outcome
    embed_batch(tools.quire, tools.base, [prepared], tools.encoder, BatchStats())
    write_blob_files(tools.quire.blobs_dir, [prepared])  # owned copies first, recorded in the transaction
    work.prepared = prepared
    return work


def _placeholder_item(base: Base, path: Path, relative: str) -> tree.Item:
    """The item a prepared source will become (its row is only created inside the transaction)."""
    now = time.time()
    return tree.Item(
        id=ItemId(0), base_id=base.id, parent_id=None, root_id=None, type="file", name=path.name,
        source_path=str(path), relative_path=relative, status="processing", error_code=None, error_message=None,
        content_sha256=None, size=None, mtime=None, blob_sha256=None, text_sha256=None, note_text=None, parser=None,
        parser_version=None, chunker_version=None, model_fingerprint=None, chunk_count=0, metadata={},
        generation=0, job_id=None, run_id=None, owner=None, created_at=now, updated_at=now,
    )  # fmt: skip
