"""Start: judge, re-run the preview, and commit ledger row, manifest, job and created entry in one transaction."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection, select

from knowledge.errors import Conflict, InvalidInput
from knowledge.folder_runs.judging import descendant_cap, judge_destination, visible_folder
from knowledge.folder_runs.ledger import add_source, create_run, size_and_counts, transition
from knowledge.folder_runs.preview import Preview, build_preview
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.folder_runs.rules import JOB_TYPE
from knowledge.library import audit
from knowledge.library.bases import Base
from knowledge.principal import Principal
from knowledge.store import machine_folders
from knowledge.store.schema_runs import (
    folder_run_sources,
    folder_runs,
)

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- start -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartResult:
    outcome: Literal["created", "replayed"]
    run_id: int
    job_id: int
    key: str
    retry_of: int | None = None  # the failed run this run retries

    def as_dict(self) -> dict[str, Any]:
        answer = {"outcome": self.outcome, "run_id": self.run_id, "job_id": self.job_id, "key": self.key}
        return answer if self.retry_of is None else {**answer, "retry_of": self.retry_of}


def request_fingerprint(base_id: int, folder: str, actor: str) -> str:
    """What makes two requests "the same": folder, payload (the destination) and actor."""
    body = {"v": 1, "folder": folder, "payload": {"base_id": base_id}, "actor": actor}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def derived_key(base_id: int, folder: str, actor: str, plan: Preview) -> str:
    """The key of a start without ``--key``: base, folder, actor and manifest (path, size, content), so
    repeating the same command over the same folder replays its run instead of starting a second one."""
    manifest = [[e.relative, e.size, e.sha256] for e in plan.eligible]
    body = {"v": 1, "base_id": base_id, "folder": folder, "actor": actor, "manifest": manifest}
    return "auto-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:40]


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

    ``proposed_by`` names the agent whose proposal the person approved (kept in the created entry).
    Without ``key``, the key is :func:`derived_key`: the same request replays its run."""
    require_person_for_run(principal, "start")
    if key is not None and not (1 <= len(key.strip()) <= 200):
        raise InvalidInput("an idempotency key is 1 to 200 characters")
    with quire.db.read() as conn:
        base = judge_destination(conn, base_ref)
        cap = descendant_cap(conn)
    root = visible_folder(quire, folder)
    machine_folders.record_for(quire.db, quire.data_dir, [root])  # a person here starts it: this machine may read it
    plan = build_preview(quire, base, root, cap)
    key = key.strip() if key is not None else derived_key(base.id, str(root), principal.label, plan)
    return create_or_replay(quire, principal, base, plan, key, proposed_by=proposed_by)


def create_or_replay(
    quire: Quire,
    principal: Principal,
    base: Base,
    plan: Preview,
    key: str,
    *,
    proposed_by: str | None = None,
    retry_of: int | None = None,
    split_of: str | None = None,
) -> StartResult:
    """Under the write lock: replay the run ``key`` names (same request) or create it with ``plan``.

    ``split_of`` names the folder a split started this run from (kept in the created entry)."""
    require_person_for_run(principal, "start")
    fingerprint = request_fingerprint(base.id, plan.folder, principal.label)
    with quire.db.write() as conn:
        base = judge_destination(conn, base.id)  # re-judged under the write lock
        existing = conn.execute(select(folder_runs).where(folder_runs.c.idempotency_key == key)).first()
        if existing is not None:
            return _replay(conn, existing, fingerprint, plan, key, retry_of)
        extra = {"proposed_by": proposed_by, "retry_of": retry_of, "split_of": split_of}
        return _create(quire, conn, base, plan, principal, key, fingerprint, extra)


def _replay(conn: Connection, row: Any, fingerprint: str, plan: Preview, key: str, retry_of: int | None) -> StartResult:
    if row.request_fingerprint != fingerprint or row.retry_of != retry_of:
        raise Conflict(f"the idempotency key {key!r} already names a different request; choose another key")
    query = select(folder_run_sources.c.relative_path).where(folder_run_sources.c.run_id == row.id)
    manifest = [r[0] for r in conn.execute(query).all()]
    gone = [rel for rel in manifest if rel not in plan.visible_files]
    if gone:
        raise Conflict(
            f"{len(gone)} of the sources this request covered were removed, moved out or excluded since it was "
            "made, so it is not replayed; the run is on the folder's run listing"
        )
    return StartResult("replayed", int(row.id), int(row.job_id), key, row.retry_of)


def _create(
    quire: Quire,
    conn: Connection,
    base: Base,
    plan: Preview,
    principal: Principal,
    key: str,
    fingerprint: str,
    extra: dict[str, Any],
) -> StartResult:
    """The run, its manifest, its job and its created entry; ``extra``'s values that are set go in the entry."""
    retry_of = extra.get("retry_of")
    now = time.time()
    run_id = create_run(
        conn,
        base_id=base.id,
        folder=plan.folder,
        idempotency_key=key,
        request_fingerprint=fingerprint,
        approved_by=principal.label,
        status="pending",
        declared_size=len(plan.eligible),
        walked=plan.walked,
        retry_of=retry_of,
        created_at=now,
        updated_at=now,
    )
    for ordinal, entry in enumerate(plan.eligible):
        assert entry.sha256 is not None and entry.size is not None
        add_source(
            conn,
            run_id=run_id,
            ordinal=ordinal,
            relative_path=entry.relative,
            size=entry.size,
            content_sha256=entry.sha256,
            approved_by=principal.label,
        )
    job = quire.queue.enqueue(
        conn,
        JOB_TYPE,
        {"run_id": run_id, "base_id": base.id, "approved_by": principal.label},
        base_id=base.id,
        key=f"knowledge:folder-run:{run_id}",
    )
    transition(
        conn,
        run_id,
        base.id,
        audit.RUN_CREATED,
        principal.label,
        {
            **size_and_counts(conn, run_id, len(plan.eligible)),
            "walked": plan.walked,
            "unreadable_folders": len(plan.unreadable_folders),
            **{name: value for name, value in extra.items() if value is not None and value != ""},
        },
        values={"job_id": job.job_id},
    )
    return StartResult("created", run_id, job.job_id, key, retry_of)
