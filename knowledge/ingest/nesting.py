"""The nesting budget of a container item, read from the stored tree (``knowledge.sources.nesting``).

Each expansion of a container runs in its own job, so nothing is carried from job to job but the rows: the
container's level is its number of member steps up to the file added (the first ancestor with a path of
its own: members have none, ``tree.create_member``), and what the tree already holds is the items below
that file and their owned copies' sizes. Read before the members' copies are written (a snapshot) and again
inside the commit that creates them, where the store's one write lock makes the count exact even when
sibling containers of one file are expanded by jobs at the same time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlalchemy import Connection, text

from knowledge.library.tree import Item
from knowledge.sources import archive
from knowledge.sources.formats import COMPRESSIONS, suffix_of
from knowledge.sources.nesting import TreeBudget
from knowledge.store.database import Database

_UP = text(
    "WITH RECURSIVE up(id, parent_id, source_path, type, size, depth) AS ("
    " SELECT id, parent_id, source_path, type, size, 0 FROM items WHERE id = :id"
    " UNION ALL SELECT i.id, i.parent_id, i.source_path, i.type, i.size, up.depth + 1"
    " FROM items i JOIN up ON i.id = up.parent_id WHERE up.source_path IS NULL AND up.depth < 64)"
    " SELECT id, source_path, type, size FROM up ORDER BY depth"
)
# the file added's members, all levels, the container being expanded counted but not its members (re-derived)
_BELOW = text(
    "WITH RECURSIVE down(id, sha, text_sha, name) AS ("
    " SELECT id, blob_sha256, text_sha256, name FROM items WHERE base_id = :base AND parent_id = :top"
    " UNION ALL SELECT i.id, i.blob_sha256, i.text_sha256, i.name FROM items i JOIN down ON i.parent_id = down.id"
    " WHERE i.base_id = :base AND down.id != :skip)"
    " SELECT count(*), coalesce(sum(b.size), 0) + coalesce(sum(t.size), 0) FROM down"
    " LEFT JOIN blobs b ON b.sha256 = down.sha"
    " LEFT JOIN blobs t ON t.sha256 = down.text_sha AND (lower(down.name) LIKE '%.gz'"
    " OR lower(down.name) LIKE '%.bz2' OR lower(down.name) LIKE '%.xz')"
)  # a compressed member's bytes are what it unpacked to as well: its text copy's size


Tally = dict[int, tuple[int, int]]  # per file added (its item id): (items, bytes) below it, in one transaction


def tree_budget(conn: Connection, base_id: int, item_id: int, own_size: int, tally: Tally | None = None) -> TreeBudget:
    """The budget seen from the container ``item_id`` (its earlier members not counted: they are replaced).
    ``own_size`` is its bytes as just read, the file added's size when it is that file. ``tally`` (one
    transaction's, after the container's earlier members are gone) spares a recount for the sibling
    containers of one file committed together: :func:`note` adds what each one made."""
    chain = conn.execute(_UP, {"id": item_id}).all()
    depth = 0
    for row in chain[1:]:
        if row.type != "file":  # a folder: the member below it was a file added after all
            break
        depth += 1
        if row.source_path is not None:
            break
    if depth == 0:
        return TreeBudget(0, 0, 0, own_size)
    top = chain[depth]
    known = None if tally is None else tally.get(top.id)
    if known is None:
        count, size = conn.execute(_BELOW, {"base": base_id, "top": top.id, "skip": item_id}).one()
        known = (int(count), int(size))
        if tally is not None:
            tally[top.id] = known
    return TreeBudget(depth, known[0], known[1], int(top.size or 0), top=int(top.id))


def note(tally: Tally, budget: TreeBudget, items: int, size: int) -> None:
    """The container committed ``items`` rows of ``size`` bytes below its file added."""
    key = budget.top if budget.depth else None
    if key is not None:
        count, total = tally.get(key, (0, 0))
        tally[key] = (count + items, total + size)
    else:  # the file added itself: its members are the whole tree
        tally.clear()


def compressed_limits(db: Database, base_id: int, todo: Sequence[tuple[Item, int]], default: int) -> dict[int, int]:
    """The unpacked size each compressed member of ``todo`` (item, its packed size) may reach, where the
    tree's budget makes it less than ``default``: what is left of the tree's ratio and bytes, shared among
    the batch's compressed members of one file in proportion to their sizes (they are parsed together,
    before any of them is counted)."""
    tally: Tally = {}
    found: list[tuple[int, int, TreeBudget]] = []
    candidates = [
        (item, size) for item, size in todo if item.source_path is None and suffix_of(item.name) in COMPRESSIONS
    ]
    if not candidates:
        return {}
    with db.read() as conn:
        for item, size in candidates:
            budget = tree_budget(conn, base_id, item.id, size, tally)
            if budget.depth:
                found.append((item.id, size, budget))
    packed: Counter[int] = Counter()
    for _id, size, budget in found:
        packed[budget.top] += size
    limits: dict[int, int] = {}
    for item_id, size, b in found:
        room = min(max(archive.RATIO_FLOOR, archive.MAX_RATIO * b.packed), archive.MAX_UNPACKED_BYTES) - b.expanded
        limit = max(room * size // max(packed[b.top], 1), 0)  # shared in proportion to their packed sizes
        if limit < default:
            limits[item_id] = limit
    return limits
