"""A container file's children: the files inside an archive or a mailbox (``knowledge.sources.members``)
become child items of the archive item, in the same write transaction that commits the archive's own
material, and their index jobs are enqueued in that transaction too: a worker killed at any point leaves
either the archive uncommitted (its job runs again) or the children created with their jobs, never a child
that nothing will advance.

* **Derived, never edited**: each commit of a container first purges its earlier children (material,
  owned copies, rows), then creates the new ones, so a changed archive (sync), a reindex or a retry
  re-derives them and an old member never outlives its archive's current bytes.
* **No path of their own** (``tree.create_member``): a member's bytes are the owned copy written before the
  transaction (``commit_material.write_blob_files``) and recorded here; it has no ``source_path`` and no
  ``relative_path``, so a folder's re-expansion and sync's scan never take it for a file on disk. Reading it
  reads the copy (``item_bytes.read_item_bytes``).
* **Refused members** (links, devices, bombs, encrypted, over a limit) are children born ``skipped`` or
  ``failed`` with their reason, so the archive says what it did not read.
* **One budget per file added** (``knowledge.sources.nesting``): levels, descendants, bytes and ratio over
  the whole tree below the file, read from the rows in this transaction (``ingest.nesting.tree_budget``), so
  it holds across the jobs that expand the nested containers one by one.
* **The archive follows its children** once it has some (``tree.reconcile_container``): active while a
  member is, ``failed`` (``children_failed``) if one failed, ``completed`` when all are done.
* **Deleting** the archive deletes its subtree (``delete-subtree``, members before the archive row).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection

from jobs.queue import JobQueue
from knowledge.ingest.nesting import Tally, note, tree_budget
from knowledge.library import blobs, index, tree
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.library.tree import Reason
from knowledge.lifecycle.admission import schedule_leaves_in
from knowledge.sources.model import Member, Refused
from knowledge.sources.nesting import admit


def replace_members(
    conn: Connection,
    queue: JobQueue,
    blobs_dir: Path,
    base: Base,
    container_id: int,
    members: Sequence[Member],
    refused: Sequence[Refused],
    tally: Tally | None = None,
) -> int:
    """Inside the container's commit transaction: drop its earlier children, create ``members`` with their
    index jobs and ``refused`` (terminal), and reconcile the container from them; returns the members made.
    ``tally``: the transaction's running totals per file added (``ingest.nesting.tree_budget``)."""
    tally = {} if tally is None else tally
    if purge_members(conn, blobs_dir, base.id, container_id):
        tally.clear()  # rows went: count again
    container = tree.load_item(conn, container_id)
    assert container is not None
    budget = tree_budget(conn, base.id, container_id, container.size or 0, tally)
    members, refused = admit(budget, members, refused)  # the whole tree's budget, counted under the write lock
    sizes: dict[ItemId, int] = {}
    for member in members:
        sha = blobs.sha256_bytes(member.data)
        blobs.record(conn, blobs_dir, sha, member.data, "raw")
        sizes[tree.create_member(conn, container, member.name, sha, None)] = len(member.data)
    for refusal in refused:
        tree.create_member(conn, container, refusal.name, None, Reason(refusal.code, refusal.reason))
    note(tally, budget, len(sizes) + len(refused), sum(sizes.values()))
    schedule_leaves_in(queue, conn, base.id, list(sizes), sizes)
    tree.reconcile_container(conn, container_id)
    return len(sizes)


def purge_members(conn: Connection, blobs_dir: Path, base_id: int, container_id: int) -> int:
    """Remove a container file's children: their search material, owned copies and rows."""
    gone = [i for i in tree.subtree_items(conn, [container_id]) if i.id != container_id]
    if not gone:
        return 0
    ids = [i.id for i in gone]
    shas = blobs.shas_of_items(conn, ids)
    index.clear_items_material(conn, base_id, ids)
    tree.delete_rows(conn, sorted(ids, reverse=True))
    blobs.purge_unreferenced(conn, blobs_dir, shas)
    return len(ids)
