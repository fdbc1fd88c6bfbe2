"""The four knowledge jobs, their recovery hooks, and the startup repair scans (seed 001).

* ``knowledge.prepare-root`` (abandon): purge an earlier partial expansion, walk the folder, create
  children, schedule leaves.
* ``knowledge.index-documents`` (abandon): read → parse → chunk → embed outside any transaction, then
  one short write transaction.
* ``knowledge.reindex-subtree`` (abandon): skip if anything is deleting (at entry and again in the
  write), clear, reset, reschedule.
* ``knowledge.delete-subtree`` (retry): purge vectors, keyword entries and owned files, then rows; on
  failure the rows stay ``deleting`` and the job is retried.

Abandoned jobs never resume: their hook parks the items they left active as ``failed`` with the code
``indexing_interrupted`` (reindex brings them back). Every write goes through ``ctx.write()`` — fenced on
the job's attempt — and re-reads what it is about to change, so a late or superseded attempt, or an item
that became ``deleting`` or was reset meanwhile (its ``generation`` moved on), is never overwritten.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select, update

from jobs.errors import Superseded
from jobs.queue import JobQueue, JobRecord
from jobs.registry import JobType
from jobs.runtime import JobContext, sanitize_error
from jobs.schema import jobs
from knowledge import blobs, index
from knowledge import items as tree
from knowledge.bases import Base, load_base
from knowledge.chunking import CHUNKER_VERSION
from knowledge.errors import NotFound
from knowledge.material import BatchStats, Prepared, Rejected, embed_batch, prepare_one
from knowledge.models import model_spec
from knowledge.operations import (
    DELETE_SUBTREE,
    INDEX_DOCUMENTS,
    PREPARE_ROOT,
    REINDEX_SUBTREE,
    Changes,
    idempotency_key,
    schedule,
)
from knowledge.runtime import Quire
from knowledge.sources import PARSER_VERSIONS, is_supported
from knowledge.store.schema import ACTIVE_STATUSES, items
from knowledge.walk import Entry, Walk, walk

log = logging.getLogger(__name__)

INTERRUPTED = "indexing_interrupted"
INTERRUPTED_MESSAGE = "indexing was interrupted (the app or worker stopped); reindex to try again"
DELETE_BATCH = 500


def _base_or_none(quire: Quire, base_id: int) -> Base | None:
    try:
        with quire.db.read() as conn:
            return load_base(conn, base_id)
    except NotFound:
        return None


# -- index-documents ---------------------------------------------------------------------------


def index_documents(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base = _base_or_none(quire, ctx.payload["base_id"])
    if base is None:
        return {"skipped": "base deleted"}
    with quire.db.read() as conn:
        loaded = [tree.load_item(conn, i) for i in ctx.payload["item_ids"]]
    todo = [i for i in loaded if i is not None and i.status in ACTIVE_STATUSES]
    if not todo:
        return {"skipped": "nothing active"}
    generations = {i.id: i.generation for i in todo}
    with ctx.write() as conn:
        tree.set_status(conn, [i.id for i in todo], "reading")
    stats = BatchStats()
    try:
        outcomes = _prepare_all(quire, base, todo, ctx)
        prepared = [o for o in outcomes if isinstance(o, Prepared)]
        if prepared:
            with ctx.write() as conn:
                tree.set_status(conn, [p.item.id for p in prepared], "embedding")
            precision = base.precision
            embed_batch(quire, base, prepared, quire.document_encoder(base.model_id, precision), stats)
        _write_blob_files(quire, prepared)
        with ctx.write() as conn:
            written = _commit_outcomes(quire, conn, base, outcomes, generations)
    except Superseded:
        raise
    except Exception as exc:
        _fail_items(ctx, [i.id for i in todo], "index_error", sanitize_error(exc))
        raise
    stats.rejected = sum(1 for o in outcomes if isinstance(o, Rejected))
    return {
        "written": written,
        "embedded": stats.embedded,
        "reused": stats.reused_vectors,
        "copied": stats.copied,
        "rejected": stats.rejected,
    }


def _prepare_all(quire: Quire, base: Base, todo: Sequence[tree.Item], ctx: JobContext) -> list[Prepared | Rejected]:
    model_path = model_spec(base.model_id).path
    outcomes: list[Prepared | Rejected] = []
    for item in todo:
        ctx.check_cancelled()
        try:
            outcomes.append(prepare_one(quire, base, item, model_path))
        except Exception as exc:  # a parser bug isolates this item (poison-item isolation), not the batch
            log.warning("item %s could not be prepared: %s", item.id, exc)
            outcomes.append(Rejected(item, "index_error", sanitize_error(exc)))
    return outcomes


def _write_blob_files(quire: Quire, prepared: Sequence[Prepared]) -> None:
    for p in prepared:
        if p.raw is not None and p.raw_sha is not None:
            blobs.write_file(quire.blobs_dir, p.raw_sha, p.raw)
        blobs.write_file(quire.blobs_dir, p.text_sha, p.text.encode("utf-8"))


def _still_ours(conn: Connection, item_id: int, generation: int) -> bool:
    current = tree.load_item(conn, item_id)
    return current is not None and current.status in ACTIVE_STATUSES and current.generation == generation


def _commit_outcomes(
    quire: Quire, conn: Connection, base: Base, outcomes: Sequence[Prepared | Rejected], generations: dict[int, int]
) -> int:
    written: list[int] = []
    now = time.time()
    for outcome in outcomes:
        item_id = outcome.item.id
        if not _still_ours(conn, item_id, generations[item_id]):
            continue  # deleted, reset or finished by someone else meanwhile: never overwrite newer state
        if isinstance(outcome, Rejected):
            tree.set_status(
                conn, [item_id], "failed", error_code=outcome.code, error_message=outcome.message, reconcile=False
            )
        else:
            _commit_prepared(quire, conn, base, outcome, now)
        written.append(item_id)
    tree.reconcile_above(conn, written)
    return len(written)


def _commit_prepared(quire: Quire, conn: Connection, base: Base, p: Prepared, now: float) -> None:
    assert p.vectors is not None
    if p.raw is not None and p.raw_sha is not None:
        blobs.record(conn, quire.blobs_dir, p.raw_sha, p.raw, "raw")
    blobs.record(conn, quire.blobs_dir, p.text_sha, p.text.encode("utf-8"), "text")
    index.write_item_material(conn, base.id, p.item.id, p.rows, p.vectors)
    conn.execute(
        update(items)
        .where(items.c.id == p.item.id)
        .values(
            status="completed",
            error_code=None,
            error_message=None,
            content_sha256=p.raw_sha,
            size=None if p.raw is None else len(p.raw),
            mtime=p.mtime,
            blob_sha256=p.raw_sha,
            text_sha256=p.text_sha,
            parser=p.parser,
            parser_version=p.parser_version,
            chunker_version=CHUNKER_VERSION,
            model_fingerprint=base.model_fingerprint,
            chunk_count=len(p.rows),
            metadata=json.dumps(p.metadata, sort_keys=True, default=str),
            updated_at=now,
        )
    )


def _fail_items(ctx: JobContext, item_ids: Sequence[int], code: str, message: str) -> None:
    try:
        with ctx.write() as conn:
            active = [
                r.id
                for r in conn.execute(
                    select(items.c.id).where(and_(items.c.id.in_(list(item_ids)), items.c.status.in_(ACTIVE_STATUSES)))
                ).all()
            ]
            tree.set_status(conn, active, "failed", error_code=code, error_message=message)
    except Superseded:
        pass


# -- prepare-root ------------------------------------------------------------------------------


def prepare_root(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    """Expand a folder into child items, keeping what an earlier expansion already got right.

    A first expansion creates every child. A re-expansion (reindex, or a retry after a crash) matches
    the walk against the existing children by relative path: unchanged files (same size and mtime,
    current parser/chunker/model stamps, completed) are kept untouched and never read; changed or
    failed ones are reset (their vectors stashed for reuse) and rescheduled; new ones are created;
    children whose source vanished or is now excluded are purged (material, owned files, rows).
    """
    base_id, root_id = ctx.payload["base_id"], ctx.payload["item_id"]
    with quire.db.read() as conn:
        root = tree.load_item(conn, root_id)
    base = _base_or_none(quire, base_id)
    if root is None or root.status == "deleting" or base is None:
        return {"skipped": "missing or deleting"}
    folder = Path(root.source_path or "")
    found = _walk_or_none(folder, quire.data_dir)
    if found is None:
        with ctx.write() as conn:
            tree.set_status(conn, [root_id], "failed", error_code="unreadable", error_message="folder cannot be read")
        return {"failed": "unreadable"}
    with ctx.write() as conn:
        root = tree.load_item(conn, root_id)
        if root is None or root.status == "deleting":  # delete won the race: no children under it
            return {"skipped": "deleting"}
        plan = _expand(quire, conn, base, root, found)
        conn.execute(update(items).where(items.c.id == root_id).values(status="processing", updated_at=time.time()))
    changes = Changes(base_id)
    try:
        schedule(quire, base, plan.to_schedule, changes, sizes=plan.sizes)
    finally:
        with ctx.write() as conn:
            _reconcile_subtree(conn, root_id)
    return {**plan.counts(), "jobs": len(changes.job_ids)}


def _walk_or_none(folder: Path, data_dir: Path) -> Walk | None:
    if not folder.is_dir():
        return None
    try:
        found = walk(folder, hidden=[data_dir])  # never index Quire's own data directory
    except OSError as exc:
        log.info("cannot walk %s: %s", folder, exc)
        return None
    return None if "." in found.unreadable_dirs else found


_KIND_FAILURES = {
    "link_to_dir": ("symlink_not_followed", "a link to a folder is not followed"),
    "link_outside": ("symlink_not_followed", "a link pointing outside the folder is not followed"),
    "dangling_link": ("unreadable", "file does not exist or cannot be read (broken link)"),
    "special": ("not_regular_file", "not a regular file (device, pipe or socket)"),
}


@dataclass
class _Expansion:
    to_schedule: list[tuple[int, str, tuple[str, str] | None]] = field(default_factory=list)
    sizes: dict[int, int] = field(default_factory=dict)  # bytes of the scheduled files, as walked
    created: int = 0
    kept: int = 0
    reset: int = 0
    purged: int = 0

    def counts(self) -> dict[str, int]:
        return {"created": self.created, "kept": self.kept, "reset": self.reset, "purged": self.purged}


def _failure_for(entry: Entry) -> tuple[str, str] | None:
    failure = _KIND_FAILURES.get(entry.kind)
    if failure is None and not is_supported(entry.path):
        failure = ("unsupported_type", f"unsupported file type {entry.path.suffix.lower() or '(no extension)'}")
    return failure


def _unchanged(old: tree.Item, entry: Entry, base: Base) -> bool:
    """Completed, same size and mtime, and made by today's parser, chunker and model: nothing to redo."""
    return (
        old.status == "completed"
        and entry.mtime is not None
        and old.mtime == entry.mtime
        and old.size == entry.size
        and old.parser_version == PARSER_VERSIONS.get(old.parser or "")
        and old.chunker_version == CHUNKER_VERSION
        and old.model_fingerprint == base.model_fingerprint
    )


def _expand(quire: Quire, conn: Connection, base: Base, root: tree.Item, found: Walk) -> _Expansion:
    existing = {
        i.relative_path: i
        for i in tree.subtree_items(conn, [root.id])
        if i.id != root.id and i.status != "deleting" and i.relative_path is not None
    }
    plan = _Expansion()
    parents: dict[str, int] = {"": root.id}
    seen: set[int] = set()
    excluded_dirs: list[str] = []
    for entry in found.entries:
        if entry.excluded or any(entry.relative.startswith(d + "/") for d in excluded_dirs):
            if entry.kind == "dir":
                excluded_dirs.append(entry.relative)
            continue
        parent_rel = entry.relative.rsplit("/", 1)[0] if "/" in entry.relative else ""
        parent_id = parents.get(parent_rel, root.id)
        old = existing.get(entry.relative)
        if entry.kind == "dir":
            if old is not None and old.is_container:
                seen.add(old.id)
                parents[entry.relative] = old.id
            else:
                parents[entry.relative] = _create_child(conn, root, entry, "directory", parent_id, None)
                plan.created += 1
            continue
        failure = _failure_for(entry)
        if old is not None and not old.is_container:
            seen.add(old.id)
            if failure is None and _unchanged(old, entry, base):
                plan.kept += 1
                continue
            _reset_leaf(conn, base.id, old.id, failure)
            plan.reset += 1
            item_id = old.id
        else:
            item_id = _create_child(conn, root, entry, "file", parent_id, failure)
            plan.created += 1
        if failure is None:
            plan.to_schedule.append((item_id, "file", None))
            if entry.size is not None:
                plan.sizes[item_id] = entry.size
    plan.purged = _purge_children(quire, conn, base.id, [i for i in existing.values() if i.id not in seen])
    return plan


def _create_child(
    conn: Connection, root: tree.Item, entry: Entry, kind: str, parent_id: int, failure: tuple[str, str] | None
) -> int:
    from knowledge.operations import create_item

    return create_item(
        conn,
        root.base_id,
        kind,
        entry.path.name,
        "processing",
        parent_id=parent_id,
        root_id=root.id,
        source_path=str(entry.path),
        relative_path=entry.relative,
        owner=root.owner,
        run_id=root.run_id,
        error=failure,
    )


def _reset_leaf(conn: Connection, base_id: int, item_id: int, failure: tuple[str, str] | None) -> None:
    index.clear_items_material(conn, base_id, [item_id], keep_vectors=True)
    conn.execute(
        update(items)
        .where(items.c.id == item_id)
        .values(
            status="failed" if failure else "processing",
            error_code=failure[0] if failure else None,
            error_message=failure[1] if failure else None,
            chunk_count=0,
            job_id=None,
            generation=items.c.generation + 1,
            updated_at=time.time(),
        )
    )


def _purge_children(quire: Quire, conn: Connection, base_id: int, gone: Sequence[tree.Item]) -> int:
    """Remove children whose source vanished: material, owned files, then rows (leaves first)."""
    if not gone:
        return 0
    shas = blobs.shas_of_items(conn, [i.id for i in gone])
    index.clear_items_material(conn, base_id, [i.id for i in gone if not i.is_container])
    for item in sorted(gone, key=lambda i: i.is_container):
        if item.is_container:
            remaining = conn.execute(select(func.count()).select_from(items).where(items.c.parent_id == item.id))
            if remaining.scalar_one():
                continue  # something still below it (a deleting descendant, or a kept child that moved)
        conn.execute(delete(items).where(items.c.id == item.id))
    blobs.purge_unreferenced(conn, quire.blobs_dir, shas)
    return len(gone)


def _reconcile_subtree(conn: Connection, root_id: int) -> None:
    """Reconcile every container of a fresh expansion, deepest first (empty folders complete)."""
    containers = [i for i in tree.subtree_items(conn, [root_id]) if i.is_container and i.id != root_id]
    containers.sort(key=lambda i: (i.relative_path or "").count("/"), reverse=True)
    for container in containers:
        tree.reconcile_container(conn, container.id)
    tree.reconcile_container(conn, root_id)
    tree.reconcile_above(conn, [root_id])


# -- reindex-subtree ---------------------------------------------------------------------------


def _deleting_or_missing(conn: Connection, root_ids: Sequence[int]) -> bool:
    subtree = tree.subtree_items(conn, root_ids)
    present = {i.id for i in subtree}
    return any(r not in present for r in root_ids) or any(i.status == "deleting" for i in subtree)


def reindex_subtree(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base_id, root_ids = ctx.payload["base_id"], list(ctx.payload["root_ids"])
    with quire.db.read() as conn:
        if _deleting_or_missing(conn, root_ids):  # first check: delete won before we started
            return {"skipped": "deleting"}
    with ctx.write() as conn:
        if _deleting_or_missing(conn, root_ids):  # second check, under the write lock
            return {"skipped": "deleting"}
        roots = _reindex_roots(conn, [r for r in (tree.load_item(conn, i) for i in root_ids) if r is not None])
        accepted = _reset_roots(conn, base_id, roots)
    base = _base_or_none(quire, base_id)
    if base is None:
        return {"skipped": "base deleted"}
    changes = Changes(base_id)
    sizes = {r.id: r.size for r in roots if r.size is not None}
    schedule(quire, base, accepted, changes, sizes=sizes)
    return {"roots": len(accepted), "jobs": len(changes.job_ids)}


def _reindex_roots(conn: Connection, roots: Sequence[tree.Item]) -> list[tree.Item]:
    """A folder run's container holds exactly the run's approved sources: reindex those, never re-walk
    the folder (which would add files nobody approved). Other containers are re-expanded."""
    expanded: list[tree.Item] = []
    for root in roots:
        if root.is_container and root.run_id is not None:
            expanded.extend(i for i in tree.subtree_items(conn, [root.id]) if not i.is_container)
        else:
            expanded.append(root)
    return expanded


def _reset_roots(
    conn: Connection, base_id: int, roots: Sequence[tree.Item]
) -> list[tuple[int, str, tuple[str, str] | None]]:
    leaves = [r.id for r in roots if not r.is_container]
    index.clear_items_material(conn, base_id, leaves, keep_vectors=True)
    now = time.time()
    for root in roots:
        conn.execute(
            update(items)
            .where(items.c.id == root.id)
            .values(
                status="preparing" if root.is_container else "processing",
                error_code=None,
                error_message=None,
                chunk_count=0,
                job_id=None,
                generation=items.c.generation + 1,
                updated_at=now,
            )
        )
    tree.reconcile_above(conn, [r.id for r in roots])
    return [(r.id, r.type, None) for r in roots]


# -- delete-subtree ----------------------------------------------------------------------------


def delete_subtree(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base_id, root_ids = ctx.payload["base_id"], list(ctx.payload["root_ids"])
    with quire.db.read() as conn:
        parents = {
            r.parent_id
            for r in (tree.load_item(conn, i) for i in root_ids)
            if r is not None and r.parent_id is not None
        }
        total = len(tree.subtree_ids(conn, root_ids))
    removed = 0
    while True:
        ctx.check_cancelled()
        with ctx.write() as conn:
            batch = _delete_batch(quire, conn, base_id, root_ids)
        if batch == 0:
            break
        removed += batch
        ctx.progress(min(removed, total), total, "deleting")
    with ctx.write() as conn:
        live_parents = [p for p in parents if p is not None and tree.load_item(conn, p) is not None]
        for parent in live_parents:
            tree.reconcile_container(conn, parent)
        tree.reconcile_above(conn, live_parents)
    return {"removed": removed}


def _delete_batch(quire: Quire, conn: Connection, base_id: int, root_ids: Sequence[int]) -> int:
    """Purge one batch: leaves first (material, owned files, rows), then the containers."""
    subtree = tree.subtree_items(conn, root_ids)
    leaves = [i for i in subtree if not i.is_container][:DELETE_BATCH]
    batch = leaves or [i for i in subtree if i.is_container]
    if not batch:
        return 0
    ids = [i.id for i in batch]
    shas = blobs.shas_of_items(conn, ids)
    index.clear_items_material(conn, base_id, [i.id for i in leaves])
    for start in range(0, len(ids), 500):
        conn.execute(delete(items).where(items.c.id.in_(ids[start : start + 500])))
    blobs.purge_unreferenced(conn, quire.blobs_dir, shas)
    return len(ids)


# -- recovery ----------------------------------------------------------------------------------


def park_interrupted(conn: Connection, item_ids: Sequence[int], job_id: int | None) -> int:
    """Active items of an interrupted job become ``failed`` (indexing_interrupted); reindex retries them."""
    return park_interrupted_many(conn, [(item_ids, job_id)])


def park_interrupted_many(conn: Connection, jobs_items: Sequence[tuple[Sequence[int], int | None]]) -> int:
    """:func:`park_interrupted` for many interrupted jobs at once: one status write, one reconciliation.

    Each entry is (the job's item ids, the job id or None). An item is parked when it is active and no
    other job took it over meanwhile (its ``job_id`` is unset or this job's; folders always).
    """
    claims: dict[int, set[int | None]] = {}
    for item_ids, job_id in jobs_items:
        for item_id in item_ids:
            claims.setdefault(int(item_id), set()).add(job_id)
    ids = sorted(claims)
    parked: list[int] = []
    for start in range(0, len(ids), 500):
        rows = conn.execute(
            select(items.c.id, items.c.job_id, items.c.type).where(
                and_(items.c.id.in_(ids[start : start + 500]), items.c.status.in_(ACTIVE_STATUSES))
            )
        ).all()
        for row in rows:
            jobs_of_item = claims[row.id]
            if None in jobs_of_item or row.job_id is None or row.job_id in jobs_of_item or row.type == "directory":
                parked.append(row.id)
    tree.set_status(conn, parked, "failed", error_code=INTERRUPTED, error_message=INTERRUPTED_MESSAGE)
    return len(parked)


def on_abandon_index(conn: Connection, record: JobRecord) -> None:
    park_interrupted(conn, record.payload.get("item_ids", []), record.id)


def on_abandon_index_batch(conn: Connection, records: Sequence[JobRecord]) -> None:
    park_interrupted_many(conn, [(r.payload.get("item_ids", []), r.id) for r in records])


def on_abandon_prepare(conn: Connection, record: JobRecord) -> None:
    root_id = record.payload["item_id"]
    park_interrupted(conn, tree.subtree_ids(conn, [root_id]), record.id)


def on_abandon_reindex(conn: Connection, record: JobRecord) -> None:
    park_interrupted(conn, tree.subtree_ids(conn, record.payload["root_ids"]), record.id)


def repair_deleting_roots(queue: JobQueue, limit: int) -> int:
    """Re-enqueue cleanup for ``deleting`` roots that have no live delete job (bounded, paginated)."""
    enqueued = 0
    after = 0
    while enqueued < limit:
        with queue.db.write() as conn:
            covered = _roots_with_live_delete(conn)
            parent = items.alias("parent")
            rows = conn.execute(
                select(items.c.id, items.c.base_id)
                .outerjoin(parent, parent.c.id == items.c.parent_id)
                .where(and_(items.c.status == "deleting", items.c.id > after))
                .where(or_(items.c.parent_id.is_(None), parent.c.status != "deleting"))
                .order_by(items.c.id)
                .limit(200)
            ).all()
            if not rows:
                break
            after = rows[-1].id
            for row in rows:
                if row.id in covered or enqueued >= limit:
                    continue
                queue.enqueue(
                    conn,
                    DELETE_SUBTREE,
                    {"base_id": row.base_id, "root_ids": [row.id]},
                    base_id=row.base_id,
                    key=idempotency_key(row.base_id, [row.id], "delete"),
                )
                enqueued += 1
    return enqueued


def _roots_with_live_delete(conn: Connection) -> set[int]:
    rows = conn.execute(
        select(jobs.c.payload).where(and_(jobs.c.type == DELETE_SUBTREE, jobs.c.status.in_(("pending", "running"))))
    ).all()
    covered: set[int] = set()
    for (payload,) in rows:
        covered.update(json.loads(payload).get("root_ids", []))
    return covered


ORPHAN_GRACE_SECONDS = 60.0


def repair_orphan_active_items(queue: JobQueue, limit: int) -> int:
    """Active items with no live job to advance them (e.g. a crash between commit and scheduling) → parked."""
    parked = 0
    cutoff = time.time() - ORPHAN_GRACE_SECONDS
    with queue.db.write() as conn:
        live = select(jobs.c.id).where(jobs.c.status.in_(("pending", "running")))
        rows = conn.execute(
            select(items.c.id)
            .where(
                or_(
                    and_(items.c.type != "directory", items.c.status.in_(ACTIVE_STATUSES)),
                    and_(items.c.type == "directory", items.c.status == "preparing"),
                )
            )
            .where(
                or_(
                    and_(items.c.job_id.is_(None), items.c.updated_at < cutoff),
                    and_(items.c.job_id.is_not(None), items.c.job_id.not_in(live)),
                )
            )
            .limit(limit)
        ).all()
        parked = park_interrupted(conn, [r.id for r in rows], None)
    return parked


def repair_blob_files(quire: Quire) -> Any:
    def scan(queue: JobQueue, limit: int) -> int:
        with queue.db.write() as conn:
            blobs.sweep_orphan_files(conn, quire.blobs_dir, limit)
            index.sweep_vector_cache(conn)
        return 0

    return scan


# -- registration ------------------------------------------------------------------------------


def register(quire: Quire) -> None:
    def bind(fn: Any) -> Any:
        return lambda ctx: fn(quire, ctx)

    quire.registry.register(JobType(PREPARE_ROOT, bind(prepare_root), "abandon", on_abandon=on_abandon_prepare))
    quire.registry.register(
        JobType(
            INDEX_DOCUMENTS,
            bind(index_documents),
            "abandon",
            on_abandon=on_abandon_index,
            on_abandon_batch=on_abandon_index_batch,
        )
    )
    quire.registry.register(JobType(REINDEX_SUBTREE, bind(reindex_subtree), "abandon", on_abandon=on_abandon_reindex))
    quire.registry.register(JobType(DELETE_SUBTREE, bind(delete_subtree), "retry", max_attempts=1000))
    quire.registry.add_repair_scan(repair_deleting_roots)
    quire.registry.add_repair_scan(repair_orphan_active_items)
    quire.registry.add_repair_scan(repair_blob_files(quire))


def interrupted_items(quire: Quire, base_id: int | None = None) -> list[tree.Item]:
    """Items parked by recovery, for the start-up notice and its reindex action."""
    query = select(items).where(and_(items.c.status == "failed", items.c.error_code == INTERRUPTED))
    if base_id is not None:
        query = query.where(items.c.base_id == base_id)
    with quire.db.read() as conn:
        return [tree.Item.from_row(r) for r in conn.execute(query.order_by(items.c.id)).all()]
