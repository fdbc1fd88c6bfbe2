"""Committing prepared material: owned copies on disk before the transaction, then the material, stamps and
statuses of a batch in the caller's one fenced transaction (the one place material is stamped)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import Connection

from knowledge.ingest.chunking import chunker_version
from knowledge.ingest.material import Prepared
from knowledge.ingest.models import model_stamp
from knowledge.library import blobs, index, tree
from knowledge.library.bases import Base
from knowledge.library.tree import Indexed


def write_blob_files(blobs_dir: Path, prepared: Sequence[Prepared]) -> None:
    """Owned copies go to disk before the transaction that records them (a crash leaves only orphans,
    which the sweep removes)."""
    for p in prepared:
        if p.raw is not None and p.raw_sha is not None:
            blobs.write_file(blobs_dir, p.raw_sha, p.raw)
        blobs.write_file(blobs_dir, p.text_sha, p.text.encode("utf-8"))
        for member in p.members:  # a container's files: their owned copies are what its children read
            blobs.write_file(blobs_dir, blobs.sha256_bytes(member.data), member.data)


def commit_prepared_many(
    conn: Connection, blobs_dir: Path, base: Base, prepared: Sequence[Prepared], now: float, *, new_items: bool = False
) -> None:
    """Write prepared items' material and stamps and mark them completed, in the caller's transaction, with the
    statements of one item (an index batch's write): the one place material is stamped. ``new_items``: created in
    this transaction (a folder run's source), so they have no material to clear."""
    copies = [(p.raw_sha, p.raw, "raw") for p in prepared if p.raw is not None and p.raw_sha is not None]
    blobs.record_many(conn, blobs_dir, copies + [(p.text_sha, p.text.encode("utf-8"), "text") for p in prepared])
    materials = [(p.item.id, p.rows, _vectors(p)) for p in prepared]
    index.write_items_material(conn, base.id, materials, new_items=new_items)
    stamp, chunker = model_stamp(base), chunker_version()
    index.forget_cached(conn, base.id, [row.text_sha256 for p in prepared for row in p.rows], stamp)  # now live
    made = [(p.item.id, _indexed(p, stamp, chunker)) for p in prepared]
    tree.mark_indexed_many(conn, base.id, made, now, new_items=new_items)


def _vectors(p: Prepared) -> np.ndarray:
    assert p.vectors is not None  # embedded before it is committed
    return p.vectors


def _indexed(p: Prepared, stamp: str, chunker: str) -> Indexed:
    size = None if p.raw is None else len(p.raw)
    return Indexed(
        p.raw_sha, size, p.mtime, p.text_sha, p.parser, p.parser_version, chunker, stamp, len(p.rows), p.metadata
    )
