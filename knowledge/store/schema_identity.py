"""One live file item per source path in a base, held by the schema (migration 0033_items_live_file_source).

``items_live_root_source`` (migration 0010) keys the roots ``add`` makes by ``source_key``; a folder's
children, a folder run's items and a synced folder's files carry only ``source_path``. This partial unique
index keys every live file by it: ``(base_id, source_path)`` among ``type = 'file'`` rows with a path that
are not ``deleting``. ``source_path`` is the key the code already matches files by
(``identity.find_live_file``, ``identity.duplicate_sources``): the canonical path of a root, or a path under a
canonical folder for what its walk, a run or sync found. Outside it, by design: notes and archive members
(no ``source_path``: a member's bytes are its owned copy), folders (a folder run's container and the
folder a walk made for the same directory may both stand), and rows being deleted (a re-add while the
old copy's cleanup runs). A second live item for a file is refused by the database on both engines;
``store.database`` answers that refusal as a ``Conflict`` naming the rule, never a raw ``IntegrityError``.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, text

LIVE_FILE_SOURCE_INDEX = "items_live_file_source"

LIVE_FILE_SOURCE_DDL = (
    f"CREATE UNIQUE INDEX IF NOT EXISTS {LIVE_FILE_SOURCE_INDEX} ON items (base_id, source_path) "
    "WHERE type = 'file' AND source_path IS NOT NULL AND status != 'deleting'"
)

# Frozen: the live file items a base held twice or more for one source path, all but the one that stays
# (completed first, then the last updated, then the newest), with everything below them (an archive's
# members), so their subtrees go whole.
_SECOND_COPIES = """
WITH RECURSIVE ranked AS (
    SELECT id, row_number() OVER (
        PARTITION BY base_id, source_path
        ORDER BY CASE WHEN status = 'completed' THEN 0 ELSE 1 END, updated_at DESC, id DESC
    ) AS place
    FROM items
    WHERE type = 'file' AND source_path IS NOT NULL AND status != 'deleting'
),
doomed (id) AS (
    SELECT id FROM ranked WHERE place > 1
    UNION
    SELECT items.id FROM items JOIN doomed ON items.parent_id = doomed.id
)
SELECT id FROM doomed ORDER BY id
"""


def one_live_file_per_source(conn: Connection) -> None:
    """Resolve the duplicates a base already holds, then create the unique index (alike on both engines).

    A user's database may hold two live file items for one source (the orders folder runs got wrong before
    the code kept one: ``run D/sub`` then ``add D``, ``run D`` twice over an edited file, …). Nothing is lost
    and the choice is deterministic: per ``(base_id, source_path)`` the item that stays is a ``completed``
    one if any (it has searchable material), among those the last updated (its material is the latest read
    of the file: the copy an edit left stale is the older one), then the highest id. Every other copy, with
    its subtree (an archive's members), is marked ``deleting``: the normal delete path then takes it — the
    repair scan ``recovery.repair_deleting_roots`` enqueues the cleanup for every ``deleting`` item whose
    parent is live (the same path a crash between marking and enqueueing takes), which removes the rows,
    material and owned copies and reconciles the folders above. The item that stays keeps its place; if its
    file changed since it was read, the next add, run or sync of it reads it again (``identity.is_stale``).
    Marking ``deleting`` takes the copies out of the index's predicate, so the index is then created."""
    doomed = [int(r[0]) for r in conn.execute(text(_SECOND_COPIES)).all()]
    now = time.time()
    for start in range(0, len(doomed), 500):
        conn.execute(
            text("UPDATE items SET status = 'deleting', updated_at = :t WHERE id = :i"),
            [{"t": now, "i": i} for i in doomed[start : start + 500]],
        )
    conn.exec_driver_sql(LIVE_FILE_SOURCE_DDL)
