"""The audit log: append an entry inside the transaction of the change it records, and read entries back.

Contract
* :func:`append` takes a connection inside the caller's open write transaction, so "the run moved" and
  "we recorded that it moved" commit or roll back together. It never opens a transaction of its own.
* The log is append-only (database triggers refuse UPDATE and DELETE). Entries carry an action, the
  actor (a person ``person:NAME``, an agent ``agent:NAME``, the ``system`` for machine transitions,
  or the base's ingest-agent identity for what it authored; :func:`person_actor` names the person doing
  a write — on a team store the server refuses any other person's name), the run and queue attempt they concern,
  and a JSON payload of counts — never a manifest, item or batch id.
* *Read* entries record something a worker looked at (the folder walk meeting a folder it could not
  read). They belong to the read, not to the write that followed: when the source transaction that
  filed one is rolled back, the caller files it again with :func:`append_reads` in a separate
  transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select

from jobs.sanitize import sanitize_reason
from knowledge.errors import InvalidInput
from knowledge.principal import acting_principal
from knowledge.store.database import Database
from knowledge.store.schema_runs import audit_log

RUN_CREATED = "ingest.folder_run.created"
RUN_STARTED = "ingest.folder_run.started"
RUN_COMPLETED = "ingest.folder_run.completed"
RUN_FAILED = "ingest.folder_run.failed"
RUN_REVERTED = "ingest.folder_run.reverted"
RUN_RETRIED = "ingest.folder_run.retried"
RUN_CANCEL_REQUESTED = "ingest.folder_run.cancel_requested"  # a person asked; the transition follows
RUN_CANCELLED = "ingest.folder_run.cancelled"
BATCH_COMMITTED = "ingest.batch.committed"
WALK_UNREADABLE = "ingest.folder_run.unreadable_folder"  # a read entry
# Agents (MCP, knowledge.agents): calls they made, proposals they filed, what a person decided.
AGENT_CALL = "agent.call"
PROPOSAL_FILED = "agent.proposal.filed"
PROPOSAL_ACCEPTED = "agent.proposal.accepted"
PROPOSAL_DISMISSED = "agent.proposal.dismissed"
AGENT_ACCESS_CHANGED = "agent.access.changed"
AGENT_TOKEN_REVOKED = "agent.token.revoked"
AGENT_ACTIONS = frozenset(
    {AGENT_CALL, PROPOSAL_FILED, PROPOSAL_ACCEPTED, PROPOSAL_DISMISSED, AGENT_ACCESS_CHANGED, AGENT_TOKEN_REVOKED}
)

# Folder sync (knowledge.sync): an applied diff of a synced root (counts per kind), a dismissal.
SYNC_BATCH_APPLIED = "sync.batch.applied"
SYNC_DISMISSED = "sync.pending.dismissed"
SYNC_ACTIONS = frozenset({SYNC_BATCH_APPLIED, SYNC_DISMISSED})

# A person's gestures on a base and its items: one entry per operation, counts in the payload (never item ids).
ITEMS_ADDED = "items.added"
ITEMS_DELETED = "items.deleted"
ITEMS_REINDEXED = "items.reindexed"
BASE_CREATED = "base.created"
BASE_RENAMED = "base.renamed"
BASE_LOCKED = "base.locked"
BASE_UNLOCKED = "base.unlocked"
BASE_DELETED = "base.deleted"
SYNC_ENABLED = "sync.enabled"
SYNC_DISABLED = "sync.disabled"
AGENT_EXCLUDED = "items.kept_from_agents"  # a person kept an item (and its subtree) from agents
AGENT_INCLUDED = "items.allowed_agents"  # and let agents see it again
PERSON_ACTIONS = frozenset(
    {ITEMS_ADDED, ITEMS_DELETED, ITEMS_REINDEXED, BASE_CREATED, BASE_RENAMED, BASE_LOCKED, BASE_UNLOCKED, BASE_DELETED}
) | frozenset({SYNC_ENABLED, SYNC_DISABLED, AGENT_EXCLUDED, AGENT_INCLUDED})

ACTIONS = (
    frozenset({RUN_CREATED, RUN_STARTED, RUN_COMPLETED, RUN_FAILED, RUN_REVERTED, RUN_RETRIED})
    | frozenset({RUN_CANCEL_REQUESTED, RUN_CANCELLED})
    | frozenset({BATCH_COMMITTED, WALK_UNREADABLE})
    | AGENT_ACTIONS
    | SYNC_ACTIONS
    | PERSON_ACTIONS
)
READ_ACTIONS = frozenset({WALK_UNREADABLE})
SYSTEM_ACTOR = "system"
# Keys an entry's payload may never carry: the audit channel does not reopen a run's composition.
FORBIDDEN_PAYLOAD_KEYS = frozenset({"manifest", "sources", "item_id", "item_ids", "batch_id", "batch_ids", "paths"})


@dataclass(frozen=True)
class Entry:
    id: int
    at: float
    action: str
    actor: str
    base_id: int | None
    run_id: int | None
    attempt: int | None
    payload: dict[str, Any]

    @classmethod
    def from_row(cls, row: Any) -> Entry:
        m = row._mapping
        return cls(
            id=m["id"],
            at=m["at"],
            action=m["action"],
            actor=m["actor"],
            base_id=m["base_id"],
            run_id=m["run_id"],
            attempt=m["attempt"],
            payload=json.loads(m["payload"] or "{}"),
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PendingEntry:
    """An entry to file (kept by the caller so a read entry can be filed again after a rollback)."""

    action: str
    actor: str
    base_id: int | None
    run_id: int | None
    attempt: int | None
    payload: dict[str, Any]


def append(
    conn: Connection,
    action: str,
    actor: str,
    *,
    base_id: int | None = None,
    run_id: int | None = None,
    attempt: int | None = None,
    payload: dict[str, Any] | None = None,
) -> PendingEntry:
    """File one entry in the caller's write transaction; return it (for re-filing a read entry)."""
    entry = PendingEntry(action, actor, base_id, run_id, attempt, dict(payload or {}))
    _insert(conn, entry)
    return entry


def person_actor(conn: Connection) -> str:
    """The person doing what ``conn`` writes, as an actor: ``person:NAME``. On a team store the role the server
    says connected (the server checks it: ``knowledge.store.pg_people``); on a data directory the person the
    caller acts as, else this machine's user — the name the CLI and the window give (``Quire.person_name``)."""
    if conn.dialect.name == "postgresql":
        return f"person:{conn.exec_driver_sql('SELECT session_user').scalar()}"
    acting = acting_principal()
    if acting is not None and not acting.is_agent:
        return acting.label
    import getpass

    try:
        return f"person:{getpass.getuser()}"
    except Exception:  # no user name in this environment (a container without a passwd entry)
        return "person:unknown"


def copy_entries(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """File entries filed elsewhere, as they were (their time, actor and payload): an imported base's history,
    in the transaction that shows the base."""
    if rows:
        conn.execute(insert(audit_log), list(rows))


def append_reads(db: Database, entries: Sequence[PendingEntry]) -> int:
    """File read entries again in their own transaction (their source transaction was rolled back)."""
    reads = [e for e in entries if e.action in READ_ACTIONS]
    if not reads:
        return 0
    with db.write() as conn:
        for entry in reads:
            _insert(conn, entry)
    return len(reads)


# Payload keys that hold a reason: stored through the one sanitizer (no path, no user name).
REASON_KEYS = frozenset({"error", "reason"})


def _reason_safe(key: str, value: Any) -> Any:
    return sanitize_reason(value) if key in REASON_KEYS and isinstance(value, str) else value


def _insert(conn: Connection, entry: PendingEntry) -> None:
    if entry.action not in ACTIONS:
        raise ValueError(f"unknown audit action {entry.action!r}")
    leaked = FORBIDDEN_PAYLOAD_KEYS & set(entry.payload)
    if leaked:
        raise ValueError(f"audit payloads never carry {sorted(leaked)}")
    payload = {k: _reason_safe(k, v) for k, v in entry.payload.items()}
    conn.execute(
        insert(audit_log).values(
            at=time.time(),
            action=entry.action,
            actor=entry.actor,
            base_id=entry.base_id,
            run_id=entry.run_id,
            attempt=entry.attempt,
            payload=json.dumps({"attempt": entry.attempt, **payload}, sort_keys=True, default=str),
        )
    )


def list_entries(
    db: Database,
    *,
    run_id: int | None = None,
    actions: Iterable[str] | None = None,
    after_id: int = 0,
    limit: int = 500,
) -> list[Entry]:
    """Entries in filing order, paginated by id (``after_id``), optionally for one run or some actions."""
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be between 1 and 10000")
    query = select(audit_log).where(audit_log.c.id > after_id).order_by(audit_log.c.id).limit(limit)
    if run_id is not None:
        query = query.where(audit_log.c.run_id == run_id)
    if actions is not None:
        query = query.where(audit_log.c.action.in_(list(actions)))
    with db.read() as conn:
        return [Entry.from_row(r) for r in conn.execute(query).all()]
