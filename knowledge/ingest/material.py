"""Preparing an item's search material outside any transaction: read → parse → chunk → embed (the bytes come
from ``ingest.item_bytes``; the commit is ``ingest.commit_material``).

Work that can be skipped is skipped (the cheapest model work is none):
1. identical content already indexed in the base (same bytes, same parser, chunker and model) →
   its chunks and vectors are copied, nothing is parsed or embedded;
2. otherwise chunks whose text is already embedded in the base reuse that vector (by text hash);
3. only the remaining texts go to the encoder, in one call for the whole batch of items, so the
   encoder sees full, length-sorted batches instead of one small document at a time.

Nothing here holds a database transaction while parsing or embedding (short read snapshots only).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import and_, select

from knowledge.ingest.chunking import chunk_text, chunker_version, load_tokenizer
from knowledge.ingest.item_bytes import MAX_SOURCE_BYTES, owned_copy, read_item_bytes
from knowledge.ingest.locations import Locator
from knowledge.ingest.models import model_stamp
from knowledge.ingest.nesting import compressed_limits, tree_budget
from knowledge.ingest.parse_worker import ParseFailed, ParseWorker
from knowledge.ingest.slices import encode_missing
from knowledge.library import blobs, index
from knowledge.library.bases import Base
from knowledge.library.index import ChunkRow
from knowledge.library.tree import Item
from knowledge.sources import PARSER_VERSIONS, ParsedDocument, SourceRejected, parse_note
from knowledge.sources.formats import COMPRESSIONS, is_container
from knowledge.sources.model import Member, Refused
from knowledge.sources.nesting import TREE_RATIO_REASON, admit
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.ingest.embedding import Encoder
    from knowledge.runtime import Quire


@dataclass
class Prepared:
    item: Item
    raw: bytes | None
    raw_sha: str | None
    text: str
    text_sha: str
    parser: str
    parser_version: str
    metadata: dict[str, Any]
    rows: list[ChunkRow]
    vectors: np.ndarray | None = None
    copied_from: int | None = None
    mtime: float | None = None
    fresh_texts: int = 0  # how many chunk texts had to be embedded
    members: tuple[Member, ...] = ()  # a container's files: its children (lifecycle/members.py)
    refused: tuple[Refused, ...] = ()


@dataclass
class Rejected:
    item: Item
    code: str
    message: str


@dataclass
class BatchStats:
    copied: int = 0
    reused_vectors: int = 0
    embedded: int = 0
    rejected: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    # wall seconds per stage (read, parse, chunk, encode, write): where a batch's time went. An index job's
    # stages overlap (its encodes run on the encoder's thread), so they may add up to more than its time.
    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0

    def stage_seconds(self) -> dict[str, float]:
        """``seconds_<stage>`` entries for a job's result, rounded to milliseconds."""
        return {f"seconds_{stage}": round(value, 3) for stage, value in self.seconds.items()}


def sha256_text(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _suffix(name: str) -> str:
    """The suffix that picks the parser: ``.md.gz`` for a compressed file (its inner suffix decides)."""
    path = Path(name)
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() + suffix if suffix in COMPRESSIONS else suffix


def find_identical(quire: Quire, base: Base, item: Item, raw_sha: str) -> int | None:
    """A completed item of this base with the same bytes and current parser/chunker/model stamps (never
    for a container: its children are made from its bytes, not copied)."""
    if is_container(item.name):
        return None
    with quire.db.read() as conn:
        rows = conn.execute(
            select(items.c.id, items.c.name, items.c.parser, items.c.parser_version).where(
                and_(
                    items.c.base_id == base.id,
                    items.c.content_sha256 == raw_sha,
                    items.c.status == "completed",
                    items.c.chunker_version == chunker_version(),
                    items.c.model_fingerprint == model_stamp(base),
                    items.c.id != item.id,
                )
            )
        ).all()
    for row in rows:
        if _suffix(row.name) == _suffix(item.name) and PARSER_VERSIONS.get(row.parser or "") == row.parser_version:
            return int(row.id)
    return None


def chunk_document(base: Base, doc: ParsedDocument, model_path: str) -> list[ChunkRow]:
    tokenizer = load_tokenizer(model_path)
    locator = Locator(doc.segments)  # once per document: see knowledge.ingest.locations
    rows = []
    for chunk in chunk_text(doc.text, tokenizer, max_tokens=base.chunk_size, overlap=base.chunk_overlap):
        page, line_start, line_end = locator.locate(chunk.start, chunk.end)
        rows.append(
            ChunkRow(
                ordinal=chunk.ordinal,
                text=chunk.text,
                start=chunk.start,
                end=chunk.end,
                page=page,
                line_start=line_start,
                line_end=line_end,
                token_count=chunk.token_count,
                text_sha256=sha256_text(chunk.text),
            )
        )
    return rows


def prepare_many(
    quire: Quire,
    base: Base,
    todo: Sequence[Item],
    model_path: str,
    parser: ParseWorker,
    stats: BatchStats | None = None,
) -> list[Prepared | Rejected]:
    """Read, parse and chunk a batch (or copy identical material; no embedding yet), with every parse in
    ``parser``'s child process (one request for the batch): a parse that hangs or crashes fails its own
    item (``parse_timeout`` / ``parser_crashed``). ``stats`` (if given) gets the seconds spent reading,
    parsing and chunking."""
    stats = stats or BatchStats()
    with stats.timed("read"):
        outcomes, to_parse = _read_many(quire, base, todo, model_path)
    with stats.timed("parse"):
        # a compressed member unpacks within its file's tree budget
        limits = compressed_limits(quire.db, base.id, [(i, len(raw)) for i, raw, _s, _m in to_parse], MAX_SOURCE_BYTES)
        parsed = parser.parse_many(
            [(i.name, raw, limits.get(i.id, MAX_SOURCE_BYTES), base.ocr_language) for i, raw, _s, _m in to_parse]
        )
    with stats.timed("chunk"):
        for (item, raw, raw_sha, mtime), result in zip(to_parse, parsed, strict=True):
            if isinstance(result, ParseFailed) and result.code == "too_large" and item.id in limits:
                outcomes[item.id] = Rejected(item, "decompression_bomb", TREE_RATIO_REASON)
            elif isinstance(result, ParseFailed):
                outcomes[item.id] = Rejected(item, result.code, result.message)
            else:
                doc = _within_budget(quire, base, item, result, len(raw))
                outcomes[item.id] = chunk_parsed(base, item, doc, raw, raw_sha, mtime, model_path)
    return [outcomes[item.id] for item in todo]


def _within_budget(quire: Quire, base: Base, item: Item, doc: ParsedDocument, size: int) -> ParsedDocument:
    """A container's members within its file's nesting budget as the rows stand now (the commit counts again
    under the write lock), so no owned copy is written for a member that will not be made."""
    if not doc.members and not doc.refused:
        return doc
    with quire.db.read() as conn:
        kept, refused = admit(tree_budget(conn, base.id, item.id, size), doc.members, doc.refused)
    return replace(doc, members=tuple(kept), refused=tuple(refused))


def _read_many(
    quire: Quire, base: Base, todo: Sequence[Item], model_path: str
) -> tuple[dict[int, Prepared | Rejected], list[tuple[Item, bytes, str, float | None]]]:
    """Read each item's bytes: the outcomes settled without a parse (notes, identical copies, unreadable
    sources) and the items left to parse."""
    outcomes: dict[int, Prepared | Rejected] = {}
    to_parse: list[tuple[Item, bytes, str, float | None]] = []
    for item in todo:
        try:
            if item.type == "note":
                doc = parse_note(item.note_text or "", title=item.name)
                outcomes[item.id] = chunk_parsed(base, item, doc, None, None, None, model_path)
                continue
            raw, mtime = read_item_bytes(quire, item)
        except SourceRejected as rejected:
            outcomes[item.id] = Rejected(item, rejected.code, rejected.reason)
            continue
        raw_sha = blobs.sha256_bytes(raw)
        same = find_identical(quire, base, item, raw_sha)
        copied = None if same is None else _copy_material(quire, base, item, same, raw, raw_sha, mtime)
        if copied is not None:
            outcomes[item.id] = copied
        else:  # no twin, or it went away meanwhile: parsed like any other, in the parse process
            to_parse.append((item, raw, raw_sha, mtime))
    return outcomes, to_parse


def prepare_bytes_isolated(
    base: Base, item: Item, raw: bytes, raw_sha: str, mtime: float | None, model_path: str, parser: ParseWorker
) -> Prepared | Rejected:
    """Parse (in ``parser``'s child process) and chunk a source's bytes, already read (folder runs)."""
    result = parser.parse_many([(item.name, raw, MAX_SOURCE_BYTES, base.ocr_language)])[0]
    if isinstance(result, ParseFailed):
        return Rejected(item, result.code, result.message)
    return chunk_parsed(base, item, result, raw, raw_sha, mtime, model_path)


def chunk_parsed(
    base: Base,
    item: Item,
    doc: ParsedDocument,
    raw: bytes | None,
    raw_sha: str | None,
    mtime: float | None,
    model_path: str,
) -> Prepared | Rejected:
    rows = chunk_document(base, doc, model_path)
    if not rows:  # never completed with zero chunks: said out loud as skipped / no_text
        return Rejected(item, "no_text", "no text found: nothing to index after parsing")
    return Prepared(
        item=item,
        raw=raw,
        raw_sha=raw_sha,
        text=doc.text,
        text_sha=sha256_text(doc.text),
        parser=doc.parser,
        parser_version=doc.parser_version,
        metadata=dict(doc.metadata),
        rows=rows,
        mtime=mtime,
        members=doc.members,
        refused=doc.refused,
    )


def _copy_material(
    quire: Quire, base: Base, item: Item, source_id: int, raw: bytes, raw_sha: str, mtime: float | None
) -> Prepared | None:
    """The twin's text, chunks and vectors for ``item``; None if the twin went away meanwhile."""
    with quire.db.read() as conn:
        source = conn.execute(select(items).where(items.c.id == source_id)).first()
        rows, vectors = index.item_vectors(conn, base.id, source_id)
    if source is None or not rows:
        return None
    text_sha = source.text_sha256
    body = owned_copy(quire, text_sha)
    if text_sha and body is None:
        return None  # its text copy is gone: parsed like any other
    text = (body or b"").decode("utf-8")
    return Prepared(
        item=item,
        raw=raw,
        raw_sha=raw_sha,
        text=text,
        text_sha=text_sha or sha256_text(text),
        parser=source.parser,
        parser_version=source.parser_version,
        metadata=json.loads(source.metadata) if source.metadata else {},
        rows=rows,
        vectors=vectors,
        copied_from=source_id,
        mtime=mtime,
    )


def embed_batch(quire: Quire, base: Base, prepared: Sequence[Prepared], encoder: Encoder, stats: BatchStats) -> None:
    """Fill ``vectors`` for every prepared item: reuse by text hash first, one encoder call for the rest."""
    model_stamp(base)  # the weights' hash is computed here, outside any transaction, not in commit_prepared_many
    pending = [p for p in prepared if p.vectors is None]
    stats.copied += sum(1 for p in prepared if p.copied_from is not None)
    if not pending:
        return
    hashes = {row.text_sha256 for p in pending for row in p.rows}
    with quire.db.read() as conn:
        known = index.vectors_for_hashes(conn, base.id, hashes, model_stamp(base))  # only today's model's
    missing: dict[str, str] = {}
    for p in pending:
        for row in p.rows:
            if row.text_sha256 not in known:
                missing.setdefault(row.text_sha256, row.text)
    if missing:  # a big batch in slices, each kept as it is made (ingest.slices)
        known.update(encode_missing(quire, base, encoder, pending, missing, stats))
    stats.embedded += len(missing)
    stats.reused_vectors += sum(len(p.rows) for p in pending) - len(missing)
    for p in pending:
        p.fresh_texts = sum(1 for row in p.rows if row.text_sha256 in missing)
        p.vectors = np.stack([known[row.text_sha256] for row in p.rows]).astype(np.float32)
