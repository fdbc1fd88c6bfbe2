"""Reading an item's bytes for indexing: the original where it is, else the base's own copy.

Apart from parsing, chunking and committing (``ingest.material``, ``ingest.commit_material``): what a file may
be read as, from where, and under which limits is decided here only. A file found in a folder is read only
inside that folder; an imported item's path is someone else's word, so only its owned copy is read; on a team
store a worker reads the copy a person's machine uploaded, never a path.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from knowledge import preferences
from knowledge.library import blobs
from knowledge.library.tree import Item
from knowledge.sources import SourceRejected
from knowledge.sources.files import read_source

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_SOURCE_BYTES = 50 * 1024 * 1024


def read_item_bytes(quire: Quire, item: Item) -> tuple[bytes, float | None]:
    """The original if it is still readable, else the base's own copy (reindex never depends on it).

    A file found in a folder is read only inside that folder: one turned into a link pointing out of it
    since the walk is ``skipped`` (``symlink_not_followed``), its target never read, and the old copy is
    not used in its place (the walk would not list it either).

    On a team store the worker may be on any machine, so a file is read from the copy its person's machine
    uploaded before the job was enqueued (``lifecycle.uploads``), never from its path."""
    if item.source_path is None:  # a container's member: its owned copy is all there is
        if (copy := owned_copy(quire, item.blob_sha256)) is not None:
            return copy, None
        raise SourceRejected("unreadable", "the base's own copy of this file inside its archive is missing")
    if quire.db.dialect_name == "postgresql":
        if (copy := owned_copy(quire, item.blob_sha256)) is not None:
            return copy, item.mtime
        raise SourceRejected(
            "unreadable", "no copy of this file reached the team store; add it again from the machine that has it"
        )
    if item.source_unverified:  # imported: its path is someone else's word, so only the owned copy is read
        if (copy := owned_copy(quire, item.blob_sha256)) is not None:
            return copy, None
        raise SourceRejected(
            "unreadable",
            "it came in an imported base without its own copy and its original's location is not verified; "
            "relocate the base (quire base relocate) to read the original",
        )
    try:
        return read_original(quire, item)
    except SourceRejected as rejected:
        if rejected.code == "symlink_not_followed":
            raise
        if (copy := owned_copy(quire, item.blob_sha256)) is not None:
            return copy, None
        raise


def read_original(quire: Quire, item: Item) -> tuple[bytes, float | None]:
    """The file at the item's path, on this machine, under the size limit; raises ``SourceRejected``."""
    try:
        # stat before reading: if the file changes after this, its mtime moves on and the next
        # re-expansion reads it again, never the other way round
        mtime: float | None = os.stat(item.source_path or "").st_mtime
    except OSError:
        mtime = None
    with quire.db.read() as conn:
        limit = preferences.max_file_bytes(conn)  # Preferences: at most MAX_SOURCE_BYTES
    return read_source(Path(item.source_path or ""), max_bytes=limit, root=item_folder(item)), mtime


def owned_copy(quire: Quire, sha: str | None) -> bytes | None:
    """The base's own copy named ``sha`` (this machine's file, or a team store's row), or ``None``; a team
    store's copy whose bytes are not what its name says fails the item that wanted it, never the job."""
    try:
        return None if not sha else blobs.read_owned(quire.db, quire.blobs_dir, sha)
    except blobs.TamperedBlob as tampered:
        raise SourceRejected("unreadable", str(tampered)) from None


def item_folder(item: Item) -> Path | None:
    """The folder an item was found in by a walk (its root folder), or None for a file a person named
    directly. Items below a folder keep ``source_path == folder / relative_path``."""
    if item.source_path is None or not item.relative_path or item.root_id in (None, item.id):
        return None
    source, relative = Path(item.source_path), PurePosixPath(item.relative_path)
    depth = len(relative.parts)
    if len(source.parts) <= depth or PurePosixPath(*source.parts[-depth:]) != relative:
        return source.parent  # not the usual shape: at least never leave the file's own folder
    return source.parents[depth - 1]
