"""A source read, parsed and chunked outside any transaction, with what it was judged on.

The work is done a group of sources at a time (:mod:`knowledge.folder_runs.group`), in stages that each
cost one round trip for the whole group: :func:`read_source_work` reads and fingerprints one source (no
database, no parse), :func:`parse_works` asks the base once which of the group's bytes it holds already
and sends the rest to the parse process in one request, :func:`chunk_work` chunks one parsed source, and
:func:`embed_works` embeds the group's chunks in one encoder call (on the encoder's thread).
:func:`prepare_source` is the group of one a changed source is read again with.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import ControlFlow
from jobs.runtime import sanitize_error
from knowledge.folder_runs.ledger import ManifestSource
from knowledge.folder_runs.preview import covered_shas
from knowledge.ingest.commit_material import write_blob_files
from knowledge.ingest.item_bytes import MAX_SOURCE_BYTES
from knowledge.ingest.material import BatchStats, Prepared, Rejected, chunk_parsed
from knowledge.ingest.narrowing import embed_narrowed
from knowledge.ingest.parse_worker import ParseFailed, ParseRequest, ParseResult, ParseWorker
from knowledge.ingest.pipeline import ENCODE_STAGE
from knowledge.library import blobs, tree
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.sources import ParsedDocument, SourceRejected
from knowledge.sources.files import read_source

if TYPE_CHECKING:
    from knowledge.folder_runs.deaths import Flight
    from knowledge.ingest.embedding import Encoder
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


@dataclass
class SourceTools:
    """Per-attempt, lazily loaded: the tokenizer's model directory and the document encoder; the sources a
    group prepared ahead (each taken once, by its source's first round); the sources read and parsed for a
    group that closed before chunking them (the next group's first, taken once); and the attempt's
    in-flight marks."""

    quire: Quire
    base: Base
    flight: Flight | None = None
    ready: dict[int, SourceWork | None] = field(default_factory=dict)  # by source id; None: not visible
    ahead: dict[int, SourceWork] = field(default_factory=dict)  # by source id: parsed, not yet chunked
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
    raw: bytes | None = None  # read and still to parse (None once covered, parsed or judged)
    parsed: ParsedDocument | None = None  # parsed and still to chunk
    item: tree.Item | None = None  # the placeholder the prepared material is made for
    mtime: float | None = None

    @property
    def to_parse(self) -> bool:
        return self.raw is not None and self.parsed is None and self.rejected is None

    def reject(self, code: str, message: str) -> None:
        self.rejected, self.rejected_code, self.raw, self.parsed = f"{code}: {message}", code, None, None


def file_identity(path: Path) -> tuple[int, ...]:
    """The file's identity for "is it still the bytes we read": device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def prepare_source(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork:
    """Read, parse, chunk and embed one source on its own (a source read again after it changed), marked in
    flight from its read on."""
    work = read_source_work(tools, root, source)
    if tools.flight is not None:
        tools.flight.move([source.id])
    parse_works(tools, [(source, work)])
    if chunk_work(tools, work):
        ENCODE_STAGE.submit(embed_works, tools, [work]).result()  # the process's encodes queue there, in order
    write_owned_copies(tools, [work])
    return work


def read_source_work(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork:
    """Read and fingerprint one source; parsing, chunking and vectors are left to the group's later stages."""
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
    item = _placeholder_item(tools.base, path, source)
    return SourceWork(ident=after if before == after else None, sha=sha, raw=raw, item=item, mtime=after[3] / 1e9)


def parse_works(tools: SourceTools, pairs: Sequence[tuple[ManifestSource, SourceWork]]) -> None:
    """Parse the works still to parse in ONE request to this thread's parse process, except those whose bytes
    the base holds already (one read for all: their transaction settles them ``already_covered``). A hang or a
    crash costs its own source (``parse_timeout`` / ``parser_crashed``); a parse that is slow marks its
    source in flight, so a worker stopped during it counts that source's death and no other's."""
    todo = [(source, work) for source, work in pairs if work.to_parse]
    if not todo:
        return
    with tools.quire.db.read() as conn:
        covered = covered_shas(conn, tools.base, {w.sha for _s, w in todo if w.sha is not None})
    for _source, work in todo:
        if work.sha in covered:
            work.raw = None  # nothing to parse: the transaction will settle it already_covered
    todo = [(source, work) for source, work in todo if work.raw is not None]
    if not todo:
        return

    def waiting(index: int) -> None:
        if tools.flight is not None:
            tools.flight.move([todo[index][0].id])

    parser = tools.quire.parsers.for_this_thread()
    requests = [
        (w.item.name if w.item else "", w.raw or b"", MAX_SOURCE_BYTES, tools.base.ocr_language) for _s, w in todo
    ]
    try:
        results = parser.parse_many(requests, waiting)
    except ControlFlow:
        raise
    except Exception:  # a parser bug (e.g. undeclared metadata): found again one source at a time, below
        log.warning("a group's parse request failed; parsing its sources one by one", exc_info=True)
        results = [_parse_alone(parser, request, functools.partial(waiting, n)) for n, request in enumerate(requests)]
    for (_source, work), result in zip(todo, results, strict=True):
        if isinstance(result, ParseFailed):
            work.reject(result.code, result.message)
        else:
            work.parsed = result


def _parse_alone(parser: ParseWorker, request: ParseRequest, waiting: Callable[[], None]) -> ParseResult:
    """One source's parse; a parser bug isolates this source (poison-item isolation), not the run."""
    try:
        return parser.parse_many([request], lambda _index: waiting())[0]
    except ControlFlow:
        raise
    except Exception as exc:
        return ParseFailed("parse_error", sanitize_error(exc))


def chunk_work(tools: SourceTools, work: SourceWork | None) -> int:
    """Chunk a parsed work into its prepared material; the number of chunks it brings (0: nothing to embed)."""
    if work is None or work.parsed is None or work.item is None:
        return 0
    doc, work.parsed = work.parsed, None
    try:
        outcome = chunk_parsed(tools.base, work.item, doc, work.raw, work.sha, work.mtime, tools.model_path)
    except Exception as exc:  # a chunking bug isolates this source (poison-item isolation), not the run
        work.reject("parse_error", sanitize_error(exc))
        return 0
    work.raw = None  # the prepared material holds the bytes from here on
    if isinstance(outcome, Rejected):
        work.reject(outcome.code, outcome.message)
        return 0
    work.prepared = outcome
    return len(outcome.rows)


def embed_works(tools: SourceTools, works: Sequence[SourceWork | None]) -> BatchStats:
    """Vectors for every prepared work in ONE encoder call (reused by text hash first). An embedding failure
    is narrowed to its culprit sources (the index job's bisection), which become ``rejected``
    (``embedding_error``, or ``embedding_rejected`` for a text a remote endpoint refused); their neighbours
    keep their vectors. An unavailable endpoint is raised: the run faults. This runs on the encoder's thread:
    its only writes are a big group's vector slices to the cache (``ingest.slices``), never a run's rows."""
    stats = BatchStats()
    prepared = [w.prepared for w in works if w is not None and w.prepared is not None]
    if not prepared:
        return stats
    culprits = embed_narrowed(tools.quire, tools.base, prepared, tools.encoder, stats)
    for work in works:
        if work is not None and work.prepared is not None and work.prepared.item.id in culprits:
            culprit = culprits[work.prepared.item.id]
            work.rejected, work.rejected_code, work.prepared = f"{culprit.code}: {culprit.message}", culprit.code, None
    return stats


def write_owned_copies(tools: SourceTools, works: Sequence[SourceWork | None]) -> None:
    """Owned copies on disk before the transactions that record them (a crash leaves orphans the sweep
    removes)."""
    write_blob_files(tools.quire.blobs_dir, [w.prepared for w in works if w is not None and w.prepared is not None])


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
