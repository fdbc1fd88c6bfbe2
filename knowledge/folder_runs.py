"""Folder runs: previewed, idempotent, fenced, audited, revertible bulk ingest of one local folder.

Seed ``000_…`` is the rulebook and SPEC §4 its desktop translation. The contract, in order of use:

Preview and start (the caller's thread)
* :func:`preview` walks the folder through :mod:`knowledge.walk` (the same visibility rules adding a
  folder uses), refusing — never truncating — a folder with more descendants than the cap setting
  (200 by default), and says for every file whether it is eligible and, if not, why.
* :func:`start_run` judges in a fixed order: the principal (an agent is forbidden), the destination
  (a missing, failed or locked base is a conflict, judged *before* the folder is looked at), the folder
  (absent, not a directory, unreadable, or inside the app's data directory all answer the one same
  "folder not found"), then the preview is re-run. The ledger row, its immutable manifest (path, size,
  content fingerprint), the queued job and the ``ingest.folder_run.created`` entry commit in **one**
  transaction. An idempotency key names at most one run: the same folder, payload and actor replay
  the original run and job ids (judged against the folder as it is now: a manifest source that was
  removed, moved out or excluded refuses the replay); anything else is a conflict.

Execution (``knowledge.folder-run``, recovery ``retry``: a dead worker's claim is handed back by
startup recovery or the stale-claim lease and the next attempt resumes the run)
* Every write goes through ``ctx.write()`` (fenced on the queue attempt) *and* is fenced on the run's
  own stamp, ``folder_runs.owner_attempt``: entering a pending run stamps the attempt, a newer attempt
  resuming a running run takes it over (each entering attempt files one ``started`` entry), an older
  one stands down without writing.
* One source per transaction. Reading, parsing, chunking and embedding happen outside any transaction;
  inside it the source is re-judged (the walk's rules along its path, still the bytes that were read,
  coverage by the base), everything is written (item, chunks, vectors, keyword entries, owned-copy
  records, ingest batch, outcome, ``ingest.batch.committed``), and immediately before commit the run is
  checked to be still ``running`` and still owned by this attempt — SQLite's write lock, taken by
  ``BEGIN IMMEDIATE`` for the whole transaction, is the run's row lock. Otherwise the whole source
  rolls back; only its *read* entries (the walk meeting a folder it could not read) are filed again in a
  separate transaction, because the read happened either way.
* A source settles once (unique outcome per source): ``committed`` or a skip —
  ``source_unavailable``, ``outside_run_root``, ``excluded``, ``already_covered`` — or ``rejected``
  (unparseable: terminal, with a sanitized reason). A re-walk reports what earlier attempts committed as
  ``already_committed`` and writes nothing for it. A fault (database error, invariant violation,
  authorization failure, malformed payload) settles the run ``failed``.
* Exactly one terminal entry: the terminal transition is guarded on the stamp, its counts are read from
  the ledger in that same transaction, and a run that is already terminal is left alone — a replayed job
  of a terminal run writes nothing at all.
* Attribution: transitions name the ``system``; the base's ingest-agent identity owns and authors the
  items (a missing or disabled identity hands the job back to the queue without consuming the attempt);
  the person appears only as ``approved_by`` (manifest rows, job payload, the ``created`` entry).

Revert: :func:`revert_run` marks everything a completed run committed ``deleting``, enqueues its
``delete-subtree`` cleanup, moves the run to ``reverted`` and files ``ingest.folder_run.reverted`` — one
transaction. A failed run is not revertible; it is retried as a new run, which skips what is covered.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection, and_, func, insert, or_, select, update
from sqlalchemy import exc as sa_exc

from jobs.errors import ControlFlow, HandBack, Superseded
from jobs.queue import JobQueue
from jobs.registry import JobType
from jobs.runtime import JobContext, sanitize_error
from jobs.schema import LIVE_STATUSES, jobs
from knowledge import audit, blobs
from knowledge import items as tree
from knowledge import walk as walking
from knowledge.agents.principal import Principal as Principal  # re-exported: callers import it from here too
from knowledge.agents.principal import require_person
from knowledge.bases import Base, load_base, resolve_base
from knowledge.chunking import CHUNKER_VERSION
from knowledge.errors import Conflict, GuardRejected, InvalidInput, KnowledgeError, NotFound
from knowledge.material import MAX_SOURCE_BYTES, BatchStats, Prepared, chunk_document, embed_batch, sha256_text
from knowledge.operations import DELETE_SUBTREE, create_item, idempotency_key
from knowledge.sources import PARSER_VERSIONS, SourceRejected, is_supported, parse_bytes
from knowledge.sources.files import read_source
from knowledge.store.schema import identities, items, settings
from knowledge.store.schema_runs import (
    DISPOSITIONS,
    TERMINAL_RUN_STATUSES,
    folder_run_outcomes,
    folder_run_sources,
    folder_runs,
    ingest_batches,
)
from knowledge.walk import EXCLUDED, OUTSIDE_ROOT, UNAVAILABLE, VISIBLE, CapExceeded, Entry, judge_path, walk

if TYPE_CHECKING:
    from knowledge.embedding import Encoder
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)

JOB_TYPE = "knowledge.folder-run"
CAP_SETTING = "folder_runs.max_descendants"
DEFAULT_CAP = 200
FOLDER_NOT_FOUND = "folder not found"
MAX_ROUNDS = 3  # a source that changes under us this many times in a row is settled unavailable
JOB_MAX_ATTEMPTS = 1000  # crashes cost time, never the run: recovery keeps handing it back

COMMITTED = "committed"
ALREADY_COMMITTED = "already_committed"  # reported by a re-walk, never stored (the source settled once)

_LINK_REASONS = {
    "link_to_dir": "a link to a folder is not followed",
    "link_outside": "a link pointing outside the folder is not followed",
    "dangling_link": "a broken link",
    "special": "not a regular file (device, pipe or socket)",
}


class FolderTooLarge(GuardRejected):
    """The walk reached more descendants than the cap: the folder is refused, never truncated."""

    code = "folder_too_large"


class RunFault(KnowledgeError):
    """Something a folder run cannot continue past (invariant, authorization, malformed payload)."""

    code = "run_fault"


class _Stale(Exception):
    """The source changed between being read and its transaction: roll back and read it again."""


# -- principals --------------------------------------------------------------------------------


def _require_person(principal: Principal, action: str) -> None:
    # the principal is a typed value (knowledge.agents.principal); an agent acting in the context counts too
    require_person(f"{action} a folder run", principal)


# -- settings ----------------------------------------------------------------------------------


def descendant_cap(conn: Connection) -> int:
    """The most files and folders a run's folder may have (setting ``folder_runs.max_descendants``)."""
    row = conn.execute(select(settings.c.value).where(settings.c.key == CAP_SETTING)).first()
    if row is None:
        return DEFAULT_CAP
    try:
        return max(0, int(row.value))
    except ValueError:
        return DEFAULT_CAP


def set_descendant_cap(quire: Quire, cap: int) -> None:
    require_person("change the folder-run cap")
    if cap < 0:
        raise InvalidInput("the cap must be zero or more")
    with quire.db.write() as conn:
        conn.execute(settings.delete().where(settings.c.key == CAP_SETTING))
        conn.execute(insert(settings).values(key=CAP_SETTING, value=str(int(cap))))


# -- judging the destination and the folder ----------------------------------------------------


def _judge_destination(conn: Connection, base_ref: str | int) -> Base:
    """A base that is ``ok`` and not locked; anything else is a conflict (judged before the folder)."""
    try:
        base = resolve_base(conn, base_ref)
    except NotFound:
        raise Conflict(f"the destination {base_ref!r} is not a knowledge base (none has that name or id)") from None
    if base.status != "ok":
        raise Conflict(f"the destination {base.name!r} is failed; a folder run needs a working knowledge base")
    if base.locked:
        raise Conflict(f"the destination {base.name!r} is locked (read-only); unlock it to add a folder")
    return base


def _inside(path: Path, container: Path) -> bool:
    return path == container or container in path.parents


def visible_folder(quire: Quire, folder: str | os.PathLike[str]) -> Path:
    """The folder's resolved path, or ``NotFound`` — the same answer for every way of not seeing it."""
    try:
        real = Path(os.path.realpath(os.path.abspath(os.fspath(folder))))
        info = os.stat(real)
    except (OSError, ValueError):
        raise NotFound(FOLDER_NOT_FOUND) from None
    data_dir = Path(os.path.realpath(quire.data_dir))
    if not stat.S_ISDIR(info.st_mode) or not walking.is_readable_dir(real) or _inside(real, data_dir):
        raise NotFound(FOLDER_NOT_FOUND) from None
    return real


# -- preview -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreviewEntry:
    relative: str
    kind: str  # file | dir | link | special
    size: int | None
    sha256: str | None
    reason: str | None  # why it is not eligible (None when it is)

    @property
    def eligible(self) -> bool:
        return self.reason is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.relative,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "eligible": self.eligible,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Preview:
    base_id: int
    base_name: str
    folder: str
    cap: int
    walked: int
    eligible: list[PreviewEntry]
    ineligible: list[PreviewEntry]
    unreadable_folders: list[str]
    visible_files: frozenset[str] = field(default_factory=frozenset, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": {"id": self.base_id, "name": self.base_name},
            "folder": self.folder,
            "cap": self.cap,
            "walked": self.walked,
            "eligible": [e.as_dict() for e in self.eligible],
            "ineligible": [e.as_dict() for e in self.ineligible],
            "unreadable_folders": self.unreadable_folders,
            "eligible_bytes": sum(e.size or 0 for e in self.eligible),
        }


def preview(quire: Quire, principal: Principal, base_ref: str | int, folder: str | os.PathLike[str]) -> Preview:
    """What a run over ``folder`` would ingest now (any principal may preview; nothing is written)."""
    del principal  # previewing is a read; agents may do it too
    with quire.db.read() as conn:
        base = _judge_destination(conn, base_ref)
        cap = descendant_cap(conn)
    root = visible_folder(quire, folder)
    return _build_preview(quire, base, root, cap)


def _build_preview(quire: Quire, base: Base, root: Path, cap: int) -> Preview:
    try:
        found = walk(root, cap=cap, hidden=[quire.data_dir])
    except CapExceeded:
        raise FolderTooLarge(
            f"the folder has more than {cap} files and folders; a run covers a whole folder, so split it "
            "and start a run per sub-folder"
        ) from None
    if "." in found.unreadable_dirs:
        raise NotFound(FOLDER_NOT_FOUND)
    eligible: list[PreviewEntry] = []
    ineligible: list[PreviewEntry] = []
    visible: set[str] = set()
    for entry in found.entries:
        judged = _judge_entry(root, entry)
        if judged is None:
            continue
        if entry.kind == "file" and entry.excluded is None:
            visible.add(entry.relative)
        (eligible if judged.eligible else ineligible).append(judged)
    covered = _covered_shas(quire, base, {e.sha256 for e in eligible if e.sha256})
    still: list[PreviewEntry] = []
    for candidate in eligible:
        if candidate.sha256 in covered:
            ineligible.append(_with_reason(candidate, "already in the knowledge base (same content)"))
        else:
            still.append(candidate)
    ineligible.sort(key=lambda e: e.relative)
    return Preview(
        base_id=base.id,
        base_name=base.name,
        folder=str(root),
        cap=cap,
        walked=found.walked,
        eligible=still,
        ineligible=ineligible,
        unreadable_folders=sorted(d for d in found.unreadable_dirs if d != "."),
        visible_files=frozenset(visible),
    )


def _with_reason(entry: PreviewEntry, reason: str) -> PreviewEntry:
    return PreviewEntry(entry.relative, entry.kind, entry.size, entry.sha256, reason)


def _judge_entry(root: Path, entry: Entry) -> PreviewEntry | None:
    """Eligibility of one walked entry; None for folders that are simply walked through."""
    if entry.kind == "dir":
        return None if entry.excluded is None else PreviewEntry(entry.relative, "dir", None, None, entry.excluded)
    if entry.kind in _LINK_REASONS:
        kind = "special" if entry.kind == "special" else "link"
        return PreviewEntry(entry.relative, kind, None, None, _LINK_REASONS[entry.kind])
    if entry.excluded is not None:
        return PreviewEntry(entry.relative, "file", entry.size, None, entry.excluded)
    if not is_supported(entry.path):
        suffix = entry.path.suffix.lower() or "(no extension)"
        return PreviewEntry(entry.relative, "file", entry.size, None, f"unsupported file type {suffix}")
    if entry.size is not None and entry.size > MAX_SOURCE_BYTES:
        limit = MAX_SOURCE_BYTES // (1024 * 1024)
        return PreviewEntry(entry.relative, "file", entry.size, None, f"larger than the {limit} MB a source may have")
    try:
        raw = read_source(root / entry.relative, max_bytes=MAX_SOURCE_BYTES)
    except SourceRejected as rejected:
        return PreviewEntry(entry.relative, "file", entry.size, None, rejected.reason)
    return PreviewEntry(entry.relative, "file", len(raw), blobs.sha256_bytes(raw), None)


def _covered_query(base: Base, shas: Sequence[str]) -> Any:
    """Completed, visible items of the base with these bytes, indexed with the current stamps."""
    parser_stamp = or_(*(and_(items.c.parser == p, items.c.parser_version == v) for p, v in PARSER_VERSIONS.items()))
    return select(items.c.content_sha256).where(
        and_(
            items.c.base_id == base.id,
            items.c.content_sha256.in_(list(shas)),
            items.c.status == "completed",
            items.c.chunker_version == CHUNKER_VERSION,
            items.c.model_fingerprint == base.model_fingerprint,
            parser_stamp,
        )
    )


def _covered_shas(quire: Quire, base: Base, shas: set[str]) -> set[str]:
    found: set[str] = set()
    ordered = sorted(shas)
    with quire.db.read() as conn:
        for start in range(0, len(ordered), 500):
            found.update(r[0] for r in conn.execute(_covered_query(base, ordered[start : start + 500])).all())
    return found


def _is_covered(conn: Connection, base: Base, sha: str) -> bool:
    return conn.execute(_covered_query(base, [sha]).limit(1)).first() is not None


# -- start -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartResult:
    outcome: Literal["created", "replayed"]
    run_id: int
    job_id: int
    key: str

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "run_id": self.run_id, "job_id": self.job_id, "key": self.key}


def request_fingerprint(base_id: int, folder: str, actor: str) -> str:
    """What makes two requests "the same": folder, payload (the destination) and actor."""
    body = {"v": 1, "folder": folder, "payload": {"base_id": base_id}, "actor": actor}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def start_run(
    quire: Quire,
    principal: Principal,
    base_ref: str | int,
    folder: str | os.PathLike[str],
    *,
    key: str | None = None,
    proposed_by: str | None = None,
) -> StartResult:
    """Create (or replay) a run over ``folder`` into ``base_ref``; see the module docstring for the order.

    ``proposed_by`` names the agent whose proposal the person approved (kept in the created entry)."""
    _require_person(principal, "start")
    if key is not None and not (1 <= len(key.strip()) <= 200):
        raise InvalidInput("an idempotency key is 1 to 200 characters")
    key = key.strip() if key is not None else f"run-{uuid.uuid4().hex}"
    with quire.db.read() as conn:
        base = _judge_destination(conn, base_ref)
        cap = descendant_cap(conn)
    root = visible_folder(quire, folder)
    plan = _build_preview(quire, base, root, cap)
    fingerprint = request_fingerprint(base.id, str(root), principal.label)
    with quire.db.write() as conn:
        base = _judge_destination(conn, base.id)  # re-judged under the write lock
        existing = conn.execute(select(folder_runs).where(folder_runs.c.idempotency_key == key)).first()
        if existing is not None:
            return _replay(conn, existing, fingerprint, plan, key)
        return _create(quire, conn, base, plan, principal, key, fingerprint, proposed_by)


def _replay(conn: Connection, row: Any, fingerprint: str, plan: Preview, key: str) -> StartResult:
    if row.request_fingerprint != fingerprint:
        raise Conflict(f"the idempotency key {key!r} already names a different request; choose another key")
    query = select(folder_run_sources.c.relative_path).where(folder_run_sources.c.run_id == row.id)
    manifest = [r[0] for r in conn.execute(query).all()]
    gone = [rel for rel in manifest if rel not in plan.visible_files]
    if gone:
        raise Conflict(
            f"{len(gone)} of the sources this request covered were removed, moved out or excluded since it was "
            "made, so it is not replayed; the run is on the folder's run listing"
        )
    return StartResult("replayed", int(row.id), int(row.job_id), key)


def _create(
    quire: Quire,
    conn: Connection,
    base: Base,
    plan: Preview,
    principal: Principal,
    key: str,
    fingerprint: str,
    proposed_by: str | None = None,
) -> StartResult:
    now = time.time()
    pk = conn.execute(
        insert(folder_runs).values(
            base_id=base.id,
            folder=plan.folder,
            idempotency_key=key,
            request_fingerprint=fingerprint,
            approved_by=principal.label,
            status="pending",
            declared_size=len(plan.eligible),
            walked=plan.walked,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    assert pk is not None
    run_id = int(pk[0])
    for ordinal, entry in enumerate(plan.eligible):
        assert entry.sha256 is not None and entry.size is not None
        conn.execute(
            insert(folder_run_sources).values(
                run_id=run_id,
                ordinal=ordinal,
                relative_path=entry.relative,
                size=entry.size,
                content_sha256=entry.sha256,
                approved_by=principal.label,
            )
        )
    job = quire.queue.enqueue(
        conn,
        JOB_TYPE,
        {"run_id": run_id, "base_id": base.id, "approved_by": principal.label},
        base_id=base.id,
        key=f"knowledge:folder-run:{run_id}",
    )
    conn.execute(update(folder_runs).where(folder_runs.c.id == run_id).values(job_id=job.job_id))
    audit.append(
        conn,
        audit.RUN_CREATED,
        principal.label,
        base_id=base.id,
        run_id=run_id,
        payload={
            **_size_and_counts(conn, run_id, len(plan.eligible)),
            "walked": plan.walked,
            "unreadable_folders": len(plan.unreadable_folders),
            **({"proposed_by": proposed_by} if proposed_by else {}),
        },
    )
    return StartResult("created", run_id, job.job_id, key)


# -- the ledger --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    id: int
    base_id: int
    folder: str
    idempotency_key: str
    approved_by: str
    status: str
    job_id: int | None
    owner_attempt: int | None
    declared_size: int
    walked: int
    container_item_id: int | None
    error: str | None
    reverted_by: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    reverted_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


def _load_run(conn: Connection, run_id: int) -> RunRecord | None:
    row = conn.execute(select(folder_runs).where(folder_runs.c.id == run_id)).first()
    return None if row is None else RunRecord.from_row(row)


def _counts(conn: Connection, run_id: int, size: int) -> dict[str, int]:
    rows = conn.execute(
        select(folder_run_outcomes.c.disposition, func.count())
        .where(folder_run_outcomes.c.run_id == run_id)
        .group_by(folder_run_outcomes.c.disposition)
    ).all()
    counts = {d: 0 for d in DISPOSITIONS}
    counts.update({r[0]: int(r[1]) for r in rows})
    settled = sum(counts.values())
    counts["skipped"] = settled - counts[COMMITTED] - counts["rejected"]
    counts["settled"] = settled
    counts["pending"] = size - settled
    return counts


def _size_and_counts(conn: Connection, run_id: int, size: int) -> dict[str, Any]:
    """What every audit entry carries about its run: how big it is and how its sources came out."""
    return {"size": size, "counts": _counts(conn, run_id, size)}


@dataclass(frozen=True)
class _Source:
    id: int
    ordinal: int
    relative_path: str
    size: int
    content_sha256: str


def _manifest(conn: Connection, run_id: int) -> list[_Source]:
    rows = conn.execute(
        select(
            folder_run_sources.c.id,
            folder_run_sources.c.ordinal,
            folder_run_sources.c.relative_path,
            folder_run_sources.c.size,
            folder_run_sources.c.content_sha256,
        )
        .where(folder_run_sources.c.run_id == run_id)
        .order_by(folder_run_sources.c.ordinal)
    ).all()
    return [_Source(*r) for r in rows]


def _settled(conn: Connection, run_id: int) -> dict[int, str]:
    rows = conn.execute(
        select(folder_run_outcomes.c.source_id, folder_run_outcomes.c.disposition).where(
            folder_run_outcomes.c.run_id == run_id
        )
    ).all()
    return {int(r[0]): str(r[1]) for r in rows}


def _fence(conn: Connection, run_id: int, attempt: int) -> RunRecord:
    """Inside the write transaction: the run is still running and still owned by this attempt."""
    run = _load_run(conn, run_id)
    if run is None or run.status != "running" or run.owner_attempt != attempt:
        raise Superseded(f"folder run {run_id}: attempt {attempt} no longer owns the run")
    return run


# -- execution ---------------------------------------------------------------------------------


def execute_run(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    """The ``knowledge.folder-run`` handler (see the module docstring for the contract)."""
    run_id = ctx.payload.get("run_id")
    if type(run_id) is not int:
        log.warning("folder-run job %s has no run id in its payload; refused", ctx.job_id)
        return {"refused": "malformed job payload"}
    with quire.db.read() as conn:
        run = _load_run(conn, run_id)
    if run is None:
        return {"run_id": run_id, "skipped": "the run no longer exists"}
    if run.job_id != ctx.job_id:
        log.warning("job %s is not the job bound to folder run %s; refused", ctx.job_id, run_id)
        return {"run_id": run_id, "refused": "this job is not bound to the run"}
    if run.status in TERMINAL_RUN_STATUSES:
        return {"run_id": run_id, "status": run.status}  # a replay of a terminal run writes nothing
    agent = _ingest_agent(quire, run.base_id)
    entered = _enter(quire, ctx, run)
    if entered is None:
        return {"run_id": run_id, "status": "terminal"}
    try:
        fault = _payload_fault(ctx.payload, entered)
        if fault is not None:
            raise RunFault(fault)
        tally = _process(quire, ctx, entered, agent)
        counts = _complete(quire, ctx, entered)
    except ControlFlow:
        raise
    except Exception as exc:
        log.warning("folder run %s attempt %s failed: %s", run_id, ctx.attempt, _fault_reason(exc))
        counts = _fail(quire, ctx, entered, exc)
        return {"run_id": run_id, "status": "failed", "counts": counts}
    return {"run_id": run_id, "status": "completed", "counts": counts, "this_attempt": dict(tally)}


def _payload_fault(payload: dict[str, Any], run: RunRecord) -> str | None:
    if payload.get("base_id") != run.base_id:
        return "malformed job payload: it names another knowledge base"
    if payload.get("approved_by") != run.approved_by:
        return "authorization failure: the job does not carry the run's approval"
    return None


def _ingest_agent(quire: Quire, base_id: int, conn: Connection | None = None) -> str:
    """The base's enabled ingest-agent identity, or ``HandBack``: nothing is written under no one's name."""

    def find(c: Connection) -> str | None:
        row = c.execute(
            select(identities.c.name)
            .where(
                and_(identities.c.base_id == base_id, identities.c.kind == "ingest_agent", identities.c.disabled == 0)
            )
            .order_by(identities.c.id)
            .limit(1)
        ).first()
        return None if row is None else str(row.name)

    if conn is not None:
        name = find(conn)
    else:
        with quire.db.read() as c:
            name = find(c)
    if name is None:
        raise HandBack("the knowledge base's ingest agent identity is missing or disabled; the run waits for it")
    return name


def _enter(quire: Quire, ctx: JobContext, run: RunRecord) -> RunRecord | None:
    """Stamp this attempt as the run's owner (pending → running, or take over); None if it is terminal."""
    with ctx.write() as conn:
        current = _load_run(conn, run.id)
        if current is None or current.status in TERMINAL_RUN_STATUSES:
            return None
        if current.status == "running" and current.owner_attempt is not None:
            if current.owner_attempt > ctx.attempt:
                raise Superseded(f"folder run {run.id} is owned by a newer attempt; attempt {ctx.attempt} stands down")
            if current.owner_attempt == ctx.attempt:
                return current  # this attempt was handed back earlier and resumes (not a new entry)
        now = time.time()
        conn.execute(
            update(folder_runs)
            .where(folder_runs.c.id == run.id)
            .values(
                status="running",
                owner_attempt=ctx.attempt,
                started_at=func.coalesce(folder_runs.c.started_at, now),
                updated_at=now,
            )
        )
        audit.append(
            conn,
            audit.RUN_STARTED,
            audit.SYSTEM_ACTOR,
            base_id=current.base_id,
            run_id=run.id,
            attempt=ctx.attempt,
            payload={**_size_and_counts(conn, run.id, current.declared_size), "resumed": current.status == "running"},
        )
        return _load_run(conn, run.id)


@dataclass
class _Tools:
    """Per-attempt, lazily loaded: the tokenizer's model directory and the document encoder."""

    quire: Quire
    base: Base
    _encoder: Encoder | None = None
    _model_path: str | None = None

    @property
    def model_path(self) -> str:
        if self._model_path is None:
            from knowledge.models import model_spec

            self._model_path = model_spec(self.base.model_id).path
        return self._model_path

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = self.quire.document_encoder(self.base.model_id, self.base.precision)
        return self._encoder


def _process(quire: Quire, ctx: JobContext, run: RunRecord, agent: str) -> Counter[str]:
    """Walk the manifest from the start; settle every source that is not settled yet, one per transaction."""
    with quire.db.read() as conn:
        base = load_base(conn, run.base_id)
        sources = _manifest(conn, run.id)
        settled = _settled(conn, run.id)
    if len(sources) != run.declared_size:
        raise RunFault("invariant violation: the manifest does not have the run's declared size")
    tools = _Tools(quire, base)
    tally: Counter[str] = Counter()
    done = len(settled)
    ctx.progress(done, run.declared_size, "ingesting")
    for source in sources:
        if source.id in settled:
            tally[ALREADY_COMMITTED if settled[source.id] == COMMITTED else "settled_before"] += 1
            continue
        ctx.check_cancelled()
        tally[_settle_source(ctx, run, tools, source, agent)] += 1
        done += 1
        ctx.progress(done, run.declared_size, "ingesting")
    return tally


@dataclass
class _Work:
    """What was read (and, when worth it, parsed and embedded) outside the source's transaction."""

    ident: tuple[int, ...] | None = None  # the file's stat identity around the read (None: it moved)
    sha: str | None = None
    unavailable: str | None = None
    changed: bool = False
    rejected: str | None = None
    prepared: Prepared | None = None


def _ident(path: Path) -> tuple[int, ...]:
    """The file's identity for "is it still the bytes we read": device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settle_source(ctx: JobContext, run: RunRecord, tools: _Tools, source: _Source, agent: str) -> str:
    """Prepare outside, then settle in one fenced transaction; re-file read entries if it rolls back."""
    quire = tools.quire
    root = Path(run.folder)
    for round_no in range(MAX_ROUNDS):
        pre = judge_path(root, source.relative_path, hidden=[quire.data_dir])
        work = _prepare(tools, root, source) if pre.verdict == VISIBLE else None
        reads: list[audit.PendingEntry] = []
        try:
            with ctx.write() as conn:
                disposition = _settle_in_tx(
                    conn, ctx, run, tools, source, agent, work, reads, last_round=round_no == MAX_ROUNDS - 1
                )
                _fence(conn, run.id, ctx.attempt)  # immediately before commit, under the write lock
            return disposition
        except _Stale:
            _refile(quire, reads)
        except BaseException:
            _refile(quire, reads)
            raise
    raise RunFault("invariant violation: a source was neither settled nor retried")  # pragma: no cover


def _refile(quire: Quire, reads: Sequence[audit.PendingEntry]) -> None:
    try:
        audit.append_reads(quire.db, reads)
    except Exception:  # the original failure matters more; the read is logged at least
        log.exception("could not file %d read audit entries again", len(reads))


def _prepare(tools: _Tools, root: Path, source: _Source) -> _Work:
    path = root / source.relative_path
    try:
        before = _ident(path)
        raw = read_source(path, max_bytes=MAX_SOURCE_BYTES)
        after = _ident(path)
    except SourceRejected as rejected:
        return _Work(unavailable=rejected.reason)
    except OSError:
        return _Work(unavailable="the file cannot be read")
    sha = blobs.sha256_bytes(raw)
    if sha != source.content_sha256 or len(raw) != source.size:
        return _Work(ident=after, sha=sha, changed=True)
    work = _Work(ident=after if before == after else None, sha=sha)
    with tools.quire.db.read() as conn:
        if _is_covered(conn, tools.base, sha):
            return work  # nothing to parse: the transaction will settle it already_covered
    try:
        doc = parse_bytes(raw, name=path.name, max_bytes=MAX_SOURCE_BYTES)
        rows = chunk_document(tools.base, doc, tools.model_path)
    except SourceRejected as rejected:
        work.rejected = f"{rejected.code}: {rejected.reason}"
        return work
    except Exception as exc:  # a parser bug isolates this source (poison-item isolation), not the run
        work.rejected = f"parse_error: {sanitize_error(exc)}"
        return work
    if not rows:
        work.rejected = "no_text: no text could be extracted"
        return work
    prepared = Prepared(
        item=_placeholder_item(tools.base, path, source.relative_path),
        raw=raw,
        raw_sha=sha,
        text=doc.text,
        text_sha=sha256_text(doc.text),
        parser=doc.parser,
        parser_version=doc.parser_version,
        metadata=dict(doc.metadata),
        rows=rows,
        mtime=after[3] / 1e9,
    )
    embed_batch(tools.quire, tools.base, [prepared], tools.encoder, BatchStats())
    blobs.write_file(tools.quire.blobs_dir, sha, raw)  # owned copies first, recorded in the transaction
    blobs.write_file(tools.quire.blobs_dir, prepared.text_sha, doc.text.encode("utf-8"))
    work.prepared = prepared
    return work


def _placeholder_item(base: Base, path: Path, relative: str) -> tree.Item:
    """The item a prepared source will become (its row is only created inside the transaction)."""
    now = time.time()
    return tree.Item(
        id=0, base_id=base.id, parent_id=None, root_id=None, type="file", name=path.name,
        source_path=str(path), relative_path=relative, status="processing", error_code=None, error_message=None,
        content_sha256=None, size=None, mtime=None, blob_sha256=None, text_sha256=None, note_text=None, parser=None,
        parser_version=None, chunker_version=None, model_fingerprint=None, chunk_count=0, metadata={},
        generation=0, job_id=None, run_id=None, owner=None, created_at=now, updated_at=now,
    )  # fmt: skip


def _settle_in_tx(
    conn: Connection,
    ctx: JobContext,
    run: RunRecord,
    tools: _Tools,
    source: _Source,
    agent: str,
    work: _Work | None,
    reads: list[audit.PendingEntry],
    *,
    last_round: bool,
) -> str:
    """Re-judge the source under the write lock and write its outcome (the caller fences and commits)."""
    root = Path(run.folder)
    judged = judge_path(root, source.relative_path, hidden=[tools.quire.data_dir])
    if judged.unreadable_dirs:
        reads.append(
            audit.append(
                conn,
                audit.WALK_UNREADABLE,
                audit.SYSTEM_ACTOR,
                base_id=run.base_id,
                run_id=run.id,
                attempt=ctx.attempt,
                payload={**_size_and_counts(conn, run.id, run.declared_size), "folders": len(judged.unreadable_dirs)},
            )
        )
    skip = {OUTSIDE_ROOT: "outside_run_root", UNAVAILABLE: "source_unavailable", EXCLUDED: "excluded"}
    if judged.verdict in skip:
        return _record(conn, ctx, run, source, skip[judged.verdict], judged.reason)
    stale = work is None or work.ident is None
    if work is not None and work.unavailable is not None:
        return _record(conn, ctx, run, source, "source_unavailable", work.unavailable)
    if work is not None and work.changed:
        return _record(conn, ctx, run, source, "source_unavailable", "its content changed since the preview")
    if not stale and work is not None:
        try:
            stale = _ident(root / source.relative_path) != work.ident
        except OSError:
            stale = True
    if stale:
        if last_round:
            return _record(conn, ctx, run, source, "source_unavailable", "it kept changing while it was read")
        raise _Stale
    assert work is not None and work.sha is not None
    if _is_covered(conn, tools.base, work.sha):
        return _record(conn, ctx, run, source, "already_covered", "the knowledge base already has the same content")
    if work.rejected is not None:
        return _record(conn, ctx, run, source, "rejected", work.rejected)
    if work.prepared is None:  # it was covered when read and no longer is: read it again
        if last_round:
            return _record(conn, ctx, run, source, "source_unavailable", "it kept changing while it was read")
        raise _Stale
    _ingest_agent(tools.quire, run.base_id, conn)  # still there and enabled, judged under the lock
    return _commit_source(conn, ctx, run, tools, source, agent, work.prepared)


def _record(
    conn: Connection,
    ctx: JobContext,
    run: RunRecord,
    source: _Source,
    disposition: str,
    reason: str | None,
    *,
    item_id: int | None = None,
    batch_id: int | None = None,
) -> str:
    conn.execute(
        insert(folder_run_outcomes).values(
            run_id=run.id,
            source_id=source.id,
            disposition=disposition,
            reason=None if reason is None else reason[:500],
            item_id=item_id,
            batch_id=batch_id,
            attempt=ctx.attempt,
            settled_at=time.time(),
        )
    )
    return disposition


def _commit_source(
    conn: Connection, ctx: JobContext, run: RunRecord, tools: _Tools, source: _Source, agent: str, p: Prepared
) -> str:
    """Item, search material, owned-copy records, batch, outcome and its audit entry: one transaction."""
    from knowledge.knowledge_jobs import _commit_prepared  # the one place item material is stamped

    container = _ensure_container(conn, ctx, run, agent)
    path = Path(run.folder) / source.relative_path
    item_id = create_item(
        conn,
        run.base_id,
        "file",
        path.name,
        "processing",
        parent_id=container,
        root_id=container,
        source_path=str(path),
        relative_path=source.relative_path,
        owner=agent,
        run_id=run.id,
    )
    item = tree.load_item(conn, item_id)
    assert item is not None
    p.item = item
    _commit_prepared(tools.quire, conn, tools.base, p, time.time())
    pk = conn.execute(
        insert(ingest_batches).values(
            run_id=run.id, source_id=source.id, item_id=item_id, attempt=ctx.attempt, created_at=time.time()
        )
    ).inserted_primary_key
    assert pk is not None
    _record(conn, ctx, run, source, COMMITTED, None, item_id=item_id, batch_id=int(pk[0]))
    audit.append(
        conn,
        audit.BATCH_COMMITTED,
        agent,
        base_id=run.base_id,
        run_id=run.id,
        attempt=ctx.attempt,
        payload=_size_and_counts(conn, run.id, run.declared_size),
    )
    return COMMITTED


def _ensure_container(conn: Connection, ctx: JobContext, run: RunRecord, agent: str) -> int:
    """The run's directory item (named after the folder), created with its first file."""
    row = conn.execute(select(folder_runs.c.container_item_id).where(folder_runs.c.id == run.id)).one()
    if row.container_item_id is not None:
        current = tree.load_item(conn, row.container_item_id)
        if current is not None and current.status != "deleting":
            return int(row.container_item_id)
    folder = Path(run.folder)
    container = create_item(
        conn,
        run.base_id,
        "directory",
        folder.name or str(folder),
        "processing",
        source_path=str(folder),
        owner=agent,
        run_id=run.id,
    )
    conn.execute(update(items).where(items.c.id == container).values(job_id=ctx.job_id))
    conn.execute(
        update(folder_runs)
        .where(folder_runs.c.id == run.id)
        .values(container_item_id=container, updated_at=time.time())
    )
    return container


def _run_containers(conn: Connection, run_id: int) -> list[int]:
    rows = conn.execute(
        select(items.c.id).where(
            and_(items.c.run_id == run_id, items.c.parent_id.is_(None), items.c.type == "directory")
        )
    ).all()
    return [int(r.id) for r in rows]


def _reconcile_containers(conn: Connection, run_id: int) -> None:
    for container in _run_containers(conn, run_id):
        tree.reconcile_container(conn, container)


def _complete(quire: Quire, ctx: JobContext, run: RunRecord) -> dict[str, int]:
    """running → completed, guarded on the stamp; the entry's counts are read here, under the lock."""
    del quire
    with ctx.write() as conn:
        _fence(conn, run.id, ctx.attempt)
        counts = _counts(conn, run.id, run.declared_size)
        if counts["pending"] != 0:
            raise RunFault("invariant violation: the run reached its end with unsettled sources")
        _terminal(conn, run, ctx.attempt, counts)
    return counts


def _fault_reason(exc: BaseException) -> str:
    """A short, path-free reason for a run fault."""
    if isinstance(exc, KnowledgeError):
        return str(exc)[:300]
    if isinstance(exc, sa_exc.DBAPIError):
        orig = exc.orig if exc.orig is not None else exc
        return f"database error: {str(orig).splitlines()[0][:300]}" if str(orig) else "database error"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or 'operating system error'}"
    return sanitize_error(exc)[:300]


def _fail(quire: Quire, ctx: JobContext, run: RunRecord, exc: BaseException) -> dict[str, int]:
    """running → failed, guarded on the stamp, with its one terminal entry."""
    del quire
    reason = _fault_reason(exc)
    with ctx.write() as conn:
        _fence(conn, run.id, ctx.attempt)
        return _settle_failed(conn, run, ctx.attempt, reason)


def _settle_failed(conn: Connection, run: RunRecord, attempt: int | None, reason: str) -> dict[str, int]:
    """The failed transition and its one terminal entry, counts read from the ledger under the lock."""
    counts = _counts(conn, run.id, run.declared_size)
    _terminal(conn, run, attempt, counts, error=reason)
    return counts


def _terminal(
    conn: Connection, run: RunRecord, attempt: int | None, counts: dict[str, int], *, error: str | None = None
) -> None:
    """The one terminal transition (completed, or failed with ``error``) and its one audit entry."""
    now = time.time()
    status, action = ("completed", audit.RUN_COMPLETED) if error is None else ("failed", audit.RUN_FAILED)
    conn.execute(
        update(folder_runs)
        .where(folder_runs.c.id == run.id)
        .values(status=status, error=error, finished_at=now, updated_at=now)
    )
    _reconcile_containers(conn, run.id)
    payload: dict[str, Any] = {"size": run.declared_size, "counts": counts}
    if error is not None:
        payload["error"] = error
    audit.append(conn, action, audit.SYSTEM_ACTOR, base_id=run.base_id, run_id=run.id, attempt=attempt, payload=payload)


# -- revert ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RevertResult:
    run_id: int
    deleting: int
    job_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": "reverted", "deleting": self.deleting, "job_id": self.job_id}


def revert_run(quire: Quire, principal: Principal, run_id: int) -> RevertResult:
    """Undo a completed run as a group: one audited transaction (its items ``deleting``, cleanup queued)."""
    _require_person(principal, "revert")
    with quire.db.write() as conn:
        run = _load_run(conn, run_id)
        if run is None:
            raise NotFound(f"folder run {run_id} not found")
        base = load_base(conn, run.base_id)
        if base.locked:
            raise Conflict(f"knowledge base {base.name!r} is locked (read-only); unlock it to revert a run")
        if run.status != "completed":
            hint = "; a failed run is not revertible, start a new run instead" if run.status == "failed" else ""
            raise Conflict(f"folder run {run_id} is {run.status}; only a completed run can be reverted{hint}")
        roots = [
            c for c in _run_containers(conn, run.id) if (item := tree.load_item(conn, c)) and item.status != "deleting"
        ]
        marked = tree.mark_deleting(conn, roots) if roots else []
        job_id: int | None = None
        if roots:
            job_id = quire.queue.enqueue(
                conn,
                DELETE_SUBTREE,
                {"base_id": base.id, "root_ids": sorted(roots)},
                base_id=base.id,
                key=idempotency_key(base.id, roots, "delete"),
            ).job_id
        now = time.time()
        conn.execute(
            update(folder_runs)
            .where(folder_runs.c.id == run.id)
            .values(status="reverted", reverted_at=now, reverted_by=principal.label, updated_at=now)
        )
        audit.append(
            conn,
            audit.RUN_REVERTED,
            principal.label,
            base_id=base.id,
            run_id=run.id,
            payload={**_size_and_counts(conn, run.id, run.declared_size), "deleting": len(marked)},
        )
    return RevertResult(run_id, len(marked), job_id)


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    run: RunRecord
    base_name: str
    counts: dict[str, int]
    job_status: str | None
    job_attempt: int | None

    def as_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "id": r.id,
            "base": {"id": r.base_id, "name": self.base_name},
            "folder": r.folder,
            "key": r.idempotency_key,
            "status": r.status,
            "approved_by": r.approved_by,
            "job": {"id": r.job_id, "status": self.job_status, "attempt": self.job_attempt},
            "owner_attempt": r.owner_attempt,
            "size": r.declared_size,
            "walked": r.walked,
            "progress": {"settled": self.counts["settled"], "total": r.declared_size},
            "counts": self.counts,
            "error": r.error,
            "created_at": r.created_at,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "reverted_at": r.reverted_at,
            "reverted_by": r.reverted_by,
        }


@dataclass(frozen=True)
class SourceOutcome:
    ordinal: int
    relative_path: str
    size: int
    sha256: str
    disposition: str  # pending until settled
    reason: str | None
    attempt: int | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunDetail:
    summary: RunSummary
    sources: list[SourceOutcome]

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary.as_dict(), "sources": [s.as_dict() for s in self.sources]}


def _summary(conn: Connection, run: RunRecord) -> RunSummary:
    from knowledge.store.schema import bases

    name = conn.execute(select(bases.c.name).where(bases.c.id == run.base_id)).scalar_one_or_none()
    job = None
    if run.job_id is not None:
        job = conn.execute(select(jobs.c.status, jobs.c.attempt).where(jobs.c.id == run.job_id)).first()
    return RunSummary(
        run,
        str(name or ""),
        _counts(conn, run.id, run.declared_size),
        None if job is None else str(job.status),
        None if job is None else int(job.attempt),
    )


def list_runs(
    quire: Quire,
    *,
    folder: str | os.PathLike[str] | None = None,
    base: str | int | None = None,
    limit: int = 200,
    after_id: int = 0,
) -> list[RunSummary]:
    """Runs over one folder (by its resolved path, also after it is gone) or into one base, oldest first."""
    if (folder is None) == (base is None):
        raise InvalidInput("list runs either for a folder or for a knowledge base")
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    query = select(folder_runs).where(folder_runs.c.id > after_id).order_by(folder_runs.c.id).limit(limit)
    with quire.db.read() as conn:
        if folder is not None:
            query = query.where(folder_runs.c.folder == os.path.realpath(os.path.abspath(os.fspath(folder))))
        else:
            assert base is not None
            query = query.where(folder_runs.c.base_id == resolve_base(conn, base).id)
        return [_summary(conn, RunRecord.from_row(r)) for r in conn.execute(query).all()]


def show_run(quire: Quire, run_id: int) -> RunDetail:
    """A run's status, timestamps, progress and every manifest source's disposition."""
    with quire.db.read() as conn:
        run = _load_run(conn, run_id)
        if run is None:
            raise NotFound(f"folder run {run_id} not found")
        rows = conn.execute(
            select(
                folder_run_sources.c.ordinal,
                folder_run_sources.c.relative_path,
                folder_run_sources.c.size,
                folder_run_sources.c.content_sha256,
                folder_run_outcomes.c.disposition,
                folder_run_outcomes.c.reason,
                folder_run_outcomes.c.attempt,
            )
            .outerjoin(folder_run_outcomes, folder_run_outcomes.c.source_id == folder_run_sources.c.id)
            .where(folder_run_sources.c.run_id == run_id)
            .order_by(folder_run_sources.c.ordinal)
        ).all()
        summary = _summary(conn, run)
    sources = [SourceOutcome(r[0], r[1], r[2], r[3], r[4] or "pending", r[5], r[6]) for r in rows]
    return RunDetail(summary, sources)


# -- repair and registration -------------------------------------------------------------------


def repair_stranded_runs(queue: JobQueue, limit: int) -> int:
    """Runs left pending/running whose bound job is no longer live (e.g. cancelled) are settled failed."""
    settled = 0
    with queue.db.write() as conn:
        rows = conn.execute(
            select(folder_runs.c.id, jobs.c.attempt)
            .outerjoin(jobs, jobs.c.id == folder_runs.c.job_id)
            .where(folder_runs.c.status.in_(("pending", "running")))
            .where(or_(jobs.c.id.is_(None), jobs.c.status.not_in(LIVE_STATUSES)))
            .order_by(folder_runs.c.id)
            .limit(limit)
        ).all()
        for row in rows:
            run = _load_run(conn, row.id)
            assert run is not None
            _settle_failed(conn, run, row.attempt, "its job ended without settling the run")
            settled += 1
    return settled


def register(quire: Quire) -> None:
    quire.registry.register(
        JobType(JOB_TYPE, lambda ctx: execute_run(quire, ctx), "retry", max_attempts=JOB_MAX_ATTEMPTS)
    )
    quire.registry.add_repair_scan(repair_stranded_runs)
