"""A team store's sources reach its workers as owned copies uploaded before their jobs are enqueued.

On a data directory the worker that indexes a file runs on the machine that has it and reads its path. On a
team store a worker may run on any machine, so the machine that schedules a file (the person's ``quire add``,
its folders' walks, a reindex it asked for, a sync of its folder — jobs pinned to that host, ``jobs.host``)
reads the file first, outside any transaction, and the transaction that enqueues the file's index job also
stores those bytes (``blobs.upload``, content-addressed: a copy already there is not sent again) and points
the item at them (``tree.record_upload``). The job and its copy commit together or not at all, so no worker
ever meets a job whose copy is missing, and no upload is left behind without the item that names it (a copy
the item named before is purged in the same transaction when nothing else names it).

A file that cannot be read here is settled at once with the reason the index job would have given
(``too_large`` skipped, ``unreadable`` failed, …): there is nothing for a worker to read.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from knowledge import preferences
from knowledge.ingest.item_bytes import read_original
from knowledge.library import blobs, tree
from knowledge.library.ids import ItemId
from knowledge.library.tree import FileStat, Reason
from knowledge.sources import SourceRejected
from knowledge.sources.files import read_source

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Upload:
    """One file as its machine read it: its bytes and their hash, or why it could not be read."""

    item_id: ItemId
    sha: str | None = None
    data: bytes | None = None
    stat: FileStat | None = None
    refused: Reason | None = None

    def for_item(self, item_id: int) -> Upload:
        return dataclasses.replace(self, item_id=ItemId(item_id))


def shares_sources(quire: Quire) -> bool:
    """Whether this store's workers may run on other machines (a team store): sources travel as uploads."""
    return quire.db.dialect_name == "postgresql"


def read_uploads(quire: Quire, item_ids: Sequence[int]) -> dict[ItemId, Upload]:
    """Outside any transaction: read the files these leaves stand for (nothing on a data directory)."""
    if not shares_sources(quire) or not item_ids:
        return {}
    with quire.db.read() as conn:
        leaves = [tree.load_item(conn, i) for i in item_ids]
    found: dict[ItemId, Upload] = {}
    for item in leaves:
        if item is None or item.type != "file" or item.source_path is None or item.source_unverified:
            continue  # notes carry their text; members and imported files read the copy they have
        found[item.id] = _read(item.id, lambda item=item: read_original(quire, item))  # type: ignore[misc]
    return found


def read_files(quire: Quire, folder: Path, files: Mapping[str, Path]) -> dict[str, Upload]:
    """Outside any transaction: read files found under ``folder`` (a sync scan's), keyed as given; the
    upload's item is filled in when its row exists (:meth:`Upload.for_item`). Nothing on a data directory."""
    if not shares_sources(quire) or not files:
        return {}
    with quire.db.read() as conn:
        limit = preferences.max_file_bytes(conn)
    found: dict[str, Upload] = {}
    for key, path in files.items():
        found[key] = _read(ItemId(0), lambda path=path: _stat_and_read(path, folder, limit))  # type: ignore[misc]
    return found


def _stat_and_read(path: Path, folder: Path, limit: int) -> tuple[bytes, float | None]:
    try:
        mtime: float | None = os.stat(path).st_mtime  # before the read, as item_bytes.read_original does
    except OSError:
        mtime = None
    return read_source(path, max_bytes=limit, root=folder), mtime


def _read(item_id: ItemId, reader: Callable[[], tuple[bytes, float | None]]) -> Upload:
    try:
        data, mtime = reader()
    except SourceRejected as rejected:
        return Upload(item_id, refused=Reason(rejected.code, rejected.reason))
    return Upload(item_id, blobs.sha256_bytes(data), data, FileStat(len(data), mtime))


def record_uploads(quire: Quire, conn: Connection, uploads: Mapping[int, Upload]) -> dict[int, str]:
    """In the transaction that enqueues their jobs: store the copies and point the items at them. Returns the
    items settled instead, with their status (unreadable here: their reason recorded, no job for them)."""
    settled: dict[int, str] = {}
    replaced: list[str] = []
    for upload in uploads.values():
        if upload.refused is not None:
            status = tree.terminal_status_for(upload.refused.code)
            tree.set_status(
                conn, [upload.item_id], status, error_code=upload.refused.code, error_message=upload.refused.message
            )
            settled[upload.item_id] = status
            continue
        assert upload.sha is not None and upload.data is not None and upload.stat is not None
        blobs.upload(conn, upload.sha, upload.data)
        before = tree.record_upload(conn, upload.item_id, upload.sha, upload.stat)
        if before is not None:
            replaced.append(before)
    if replaced:
        blobs.purge_unreferenced(conn, quire.blobs_dir, replaced)
    return settled
