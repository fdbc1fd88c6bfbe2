"""A source read, parsed and chunked outside any transaction, with what it was judged on.

:func:`read_source_work` stops before embedding so a group of sources can share one encoder call
(:mod:`knowledge.folder_runs.group`); :func:`prepare_source` is the group of one a changed source is
read again with.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    prepare_bytes_isolated,
    write_blob_files,
)
from knowledge.ingest.narrowing import embed_narrowed
from knowledge.library import blobs, tree
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.sources import SourceRejected
from knowledge.sources.files import read_source

if TYPE_CHECKING:
    from knowledge.folder_runs.deaths import Flight
    from knowledge.ingest.embedding import Encoder
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


@dataclass
class SourceTools:
    """Per-attempt, lazily loaded: the tokenizer's model directory and the document encoder; the sources a
    group prepared ahead (each taken once, by its source's first round); and the attempt's in-flight marks."""

    quire: Quire
    base: Base
    flight: Flight | None = None
    ready: dict[int, SourceWork | None] = field(default_factory=dict)  # by source id; None: not visible
    _encoder: Encoder | None = None
    _model_path: str | None = None

    @property
    def model_path(self) -> str:
        if self._model_path is None:
            from knowledge.ingest.models import model_spec

            self._model_path = model_spec(self.base.model_id).tokenizer_path
        return self._model_path

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = self.quire.document_encoder(self.base)
        return self._encoder


@dataclass
class SourceWork:
    """What was read (and, when worth it, parsed, chunked and embedded) outside the source's transaction."""

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
    """Read, parse, chunk and embed one source on its own (a source read again after it changed)."""
    work = read_source_work(tools, root, source)
    finish_works(tools, [work])
    return work


def read_source_work(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork:
    """Read, fingerprint, parse and chunk one source; its vectors are left to :func:`finish_works`."""
    path = root / source.relative_path
    try:
        before = file_identity(path)
        raw = read_source(path, max_bytes=MAX_SOURCE_BYTES, root=root)  # never a link out of the run's folder
        after = file_identity(path)
    except SourceRejected as rejected:
        return SourceWork(unavailable=rejected.reason)
    except OSError:
        return SourceWork(unavailable="the file cannot be read")
    sha = blobs.sha256_bytes(raw)
    if sha != source.content_sha256 or len(raw) != source.size:
        return SourceWork(ident=after, sha=sha, changed=True)
    work = SourceWork(ident=after if before == after else None, sha=sha)
    if _covered(tools, source, sha):
        return work  # nothing to parse: the transaction will settle it already_covered
    item = _placeholder_item(tools.base, path, source)
    try:
        parser = tools.quire.parsers.for_this_thread()  # a hang or crash costs this source, not the run
        outcome = prepare_bytes_isolated(tools.base, item, raw, sha, after[3] / 1e9, tools.model_path, parser)
    except Exception as exc:  # a parser bug isolates this source (poison-item isolation), not the run
        work.rejected = f"parse_error: {sanitize_error(exc)}"
        return work
    if isinstance(outcome, Rejected):
        work.rejected, work.rejected_code = f"{outcome.code}: {outcome.message}", outcome.code
        return work
    work.prepared = outcome
    return work


def _covered(tools: SourceTools, source: ManifestSource, sha: str) -> bool:
    """Whether the base holds these bytes already; in a run, the same transaction marks the source the one
    in flight (parsing and chunking come next), so the mark costs no round trip of its own."""
    if tools.flight is None:
        with tools.quire.db.read() as conn:
            return is_covered(conn, tools.base, sha)
    with tools.flight.ctx.write() as conn:
        tools.flight.now(conn, [source.id])
        return is_covered(conn, tools.base, sha)


def finish_works(tools: SourceTools, works: Sequence[SourceWork | None]) -> BatchStats:
    """Vectors for every prepared work in ONE encoder call (reused by text hash first), then the owned
    copies on disk. An embedding failure is narrowed to its culprit sources (the index job's bisection),
    which become ``rejected`` (``embedding_error``, or ``embedding_rejected`` for a text a remote endpoint
    refused); their neighbours keep their vectors. An unavailable endpoint is raised: the run faults."""
    stats = BatchStats()
    prepared = [w.prepared for w in works if w is not None and w.prepared is not None]
    if not prepared:
        return stats
    if tools.flight is not None and len(prepared) > 1:  # one alone is marked already, by its coverage check
        tools.flight.move([-p.item.id for p in prepared])  # placeholder ids are the sources' ids, negated
    culprits = embed_narrowed(tools.quire, tools.base, prepared, tools.encoder, stats)
    for work in works:
        if work is not None and work.prepared is not None and work.prepared.item.id in culprits:
            culprit = culprits[work.prepared.item.id]
            work.rejected, work.rejected_code, work.prepared = f"{culprit.code}: {culprit.message}", culprit.code, None
    # owned copies first, recorded in the source's transaction (a crash leaves orphans the sweep removes)
    write_blob_files(tools.quire.blobs_dir, [p for p in prepared if p.item.id not in culprits])
    return stats


def _placeholder_item(base: Base, path: Path, source: ManifestSource) -> tree.Item:
    """The item a prepared source will become (its row is only created inside the transaction). Its id is
    the source's, negated: never a row, but distinct within a group, so a culprit names its own source."""
    now = time.time()
    return tree.Item(
        id=ItemId(-source.id), base_id=base.id, parent_id=None, root_id=None, type="file", name=path.name,
        source_path=str(path), relative_path=source.relative_path, status="processing", error_code=None,
        error_message=None, content_sha256=None, size=None, mtime=None, blob_sha256=None, text_sha256=None,
        note_text=None, parser=None, parser_version=None, chunker_version=None, model_fingerprint=None,
        chunk_count=0, metadata={}, generation=0, job_id=None, run_id=None, owner=None, created_at=now,
        updated_at=now,
    )  # fmt: skip
