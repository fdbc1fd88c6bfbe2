"""Proposals: what an agent may do instead of writing, and how a person accepts or dismisses it.

Contract
* ``propose_folder_run`` judges exactly what a folder-run preview judges (destination first, then the
  folder, then the cap) and answers with the preview; then, in one short write transaction, files a
  ``pending`` proposal **and** its ``agent.proposal.filed`` audit entry (actor: the agent). A second
  identical pending proposal (same agent, base and folder) is not filed again: the first is returned.
  The folder must lie inside the roots a person allowed (``access.check_agent_folder``): anywhere else
  the answer is ``Forbidden`` before the folder is looked at (nothing listed, opened or hashed).
* ``propose_note`` does the same for a text note (the base must be ``ok`` and not locked).
* Pending proposals are capped (``MAX_PENDING_PER_AGENT`` per agent, ``MAX_PENDING`` in all), checked
  inside the filing transaction: over the cap is a ``TooManyProposals`` conflict until a person decides.
  "Per agent" is per account (``Principal.account``, kept with each proposal): the agent's credential, not
  the name a client gives itself, so renaming itself on every call gets a client no fresh cap.
* ``accept_proposal`` / ``dismiss_proposal`` are a person's: :func:`require_person` refuses an agent.
  Accepting a folder run calls ``folder_runs.start_run`` with the person as approver, the proposal's
  own idempotency key (``proposal-<id>``: pressing Start twice, or again after a crash, replays the
  same run) and the agent as ``proposed_by`` (kept in the run's ``created`` entry). The proposal is
  then marked ``accepted`` together with its audit entry; the table's trigger lets a proposal be
  decided only once.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, func, insert, select, update

from knowledge import folder_runs
from knowledge.agents.access import check_agent_folder
from knowledge.errors import Conflict, InvalidInput, NotFound
from knowledge.library import audit
from knowledge.library.bases import assert_base_can_run_runtime_operation, assert_base_writable, resolve_base
from knowledge.lifecycle import operations
from knowledge.principal import Principal, require_person
from knowledge.store.schema_agents import agent_proposals

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_NOTE_CHARS = 100_000
MAX_TITLE_CHARS = 120
EXCERPT_CHARS = 400
MAX_PENDING_PER_AGENT = 50
MAX_PENDING = 500


class TooManyProposals(Conflict):
    """An agent (or all agents together) has as many pending proposals as may wait for a person."""

    code = "too_many_proposals"


@dataclass(frozen=True)
class Proposal:
    id: int
    kind: str
    base_id: int
    base_name: str
    proposed_by: str
    folder: str | None
    note_title: str | None
    note_text: str | None
    preview: dict[str, Any]
    status: str
    decided_by: str | None
    run_id: int | None
    item_id: int | None
    created_at: float
    decided_at: float | None
    account: str | None = None  # the proposer's account (None: filed before accounts were kept)

    @classmethod
    def from_row(cls, row: Any) -> Proposal:
        m = dict(row._mapping)
        m["preview"] = json.loads(m["preview"] or "{}")
        return cls(**m)

    @property
    def agent_name(self) -> str:
        return self.proposed_by.split(":", 1)[-1]

    def summary(self) -> str:
        """One line for a person: who proposed what, where."""
        if self.kind == "folder_run":
            p = self.preview
            return (
                f"{self.agent_name} proposes a folder run: {self.folder} → {self.base_name} "
                f"({len(p.get('eligible', []))} eligible, {len(p.get('ineligible', []))} not)"
            )
        return f"{self.agent_name} proposes a note {self.note_title!r} → {self.base_name}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# -- filing (agents and people) ------------------------------------------------------------------


def agent_preview(preview: dict[str, Any]) -> dict[str, Any]:
    """A preview as an agent sees it: without content fingerprints (an agent has no use for them, and
    they would let it fingerprint files it cannot read)."""
    shown = dict(preview)
    for key in ("eligible", "ineligible"):
        shown[key] = [{f: v for f, v in entry.items() if f != "sha256"} for entry in preview.get(key, [])]
    return shown


def propose_folder_run(
    quire: Quire, principal: Principal, base_ref: str | int, folder: str | os.PathLike[str]
) -> tuple[Proposal, folder_runs.Preview]:
    """The run's preview, and a pending proposal to start it (returned with the preview)."""
    check_agent_folder(quire, folder)  # before anything looks at the folder
    with quire.db.read() as conn:
        _check_pending_caps(conn, principal)  # cheap, before the walk; checked again when filing
    plan = folder_runs.preview(quire, principal, base_ref, folder)  # judges base, folder and cap
    preview = plan.as_dict()
    with quire.db.write() as conn:
        existing = conn.execute(
            select(agent_proposals).where(
                and_(
                    agent_proposals.c.status == "pending",
                    agent_proposals.c.kind == "folder_run",
                    agent_proposals.c.base_id == plan.base_id,
                    agent_proposals.c.folder == plan.folder,
                    agent_proposals.c.proposed_by == principal.label,
                )
            )
        ).first()
        if existing is not None:
            return Proposal.from_row(existing), plan
        proposal_id = _file(
            conn,
            principal,
            kind="folder_run",
            base_id=plan.base_id,
            base_name=plan.base_name,
            preview=preview,
            folder=plan.folder,
            counts={"eligible": len(plan.eligible), "ineligible": len(plan.ineligible)},
        )
        return _load(conn, proposal_id), plan


def propose_note(
    quire: Quire, principal: Principal, base_ref: str | int, text: str, title: str | None = None
) -> Proposal:
    """A pending proposal to add a text note (judged like ``add_items`` would judge it, nothing added)."""
    if not text.strip():
        raise InvalidInput("a note needs some text")
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidInput(f"a proposed note is at most {MAX_NOTE_CHARS} characters")
    clean_title = (title or text.strip().splitlines()[0]).strip()[:MAX_TITLE_CHARS]
    preview = {"title": clean_title, "chars": len(text), "excerpt": text[:EXCERPT_CHARS]}
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_can_run_runtime_operation(base)
        assert_base_writable(base)
        proposal_id = _file(
            conn,
            principal,
            kind="note",
            base_id=base.id,
            base_name=base.name,
            preview={**preview, "base": {"id": base.id, "name": base.name}},
            note_title=clean_title,
            note_text=text,
            counts={"chars": len(text)},
        )
        return _load(conn, proposal_id)


def _check_pending_caps(conn: Connection, principal: Principal) -> None:
    pending = agent_proposals.c.status == "pending"
    account = func.coalesce(agent_proposals.c.account, agent_proposals.c.proposed_by)  # older rows: their proposer
    mine = conn.execute(select(func.count()).where(and_(pending, account == principal.account))).scalar_one()
    if mine >= MAX_PENDING_PER_AGENT:
        raise TooManyProposals(
            f"{principal.described} already has {MAX_PENDING_PER_AGENT} proposals waiting, the most one agent may "
            "have; a person has to accept or dismiss some in Quire first"
        )
    if conn.execute(select(func.count()).where(pending)).scalar_one() >= MAX_PENDING:
        raise TooManyProposals(
            f"{MAX_PENDING} proposals are waiting, the most Quire keeps; a person has to accept or dismiss some first"
        )


def _file(
    conn: Connection,
    principal: Principal,
    *,
    kind: str,
    base_id: int,
    base_name: str,
    preview: dict[str, Any],
    counts: dict[str, int],
    folder: str | None = None,
    note_title: str | None = None,
    note_text: str | None = None,
) -> int:
    _check_pending_caps(conn, principal)
    pk = conn.execute(
        insert(agent_proposals).values(
            kind=kind,
            base_id=base_id,
            base_name=base_name,
            proposed_by=principal.label,
            account=principal.account,
            folder=folder,
            note_title=note_title,
            note_text=note_text,
            preview=json.dumps(preview, sort_keys=True, default=str),
            status="pending",
            created_at=time.time(),
        )
    ).inserted_primary_key
    assert pk is not None
    proposal_id = int(pk[0])
    audit.append(
        conn,
        audit.PROPOSAL_FILED,
        principal.label,
        base_id=base_id,
        payload={"proposal_id": proposal_id, "kind": kind, "counts": counts},
    )
    return proposal_id


def _load(conn: Connection, proposal_id: int) -> Proposal:
    row = conn.execute(select(agent_proposals).where(agent_proposals.c.id == proposal_id)).first()
    if row is None:
        raise NotFound(f"proposal {proposal_id} not found")
    return Proposal.from_row(row)


# -- reading -------------------------------------------------------------------------------------


def list_proposals(
    quire: Quire, *, status: str | None = "pending", limit: int = 200, before_id: int | None = None
) -> list[Proposal]:
    """Newest first; ``status=None`` lists every proposal. ``before_id`` (the last id of the page before)
    pages on towards older ones."""
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    query = select(agent_proposals).order_by(agent_proposals.c.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(agent_proposals.c.id < before_id)
    if status is not None:
        query = query.where(agent_proposals.c.status == status)
    with quire.db.read() as conn:
        return [Proposal.from_row(r) for r in conn.execute(query).all()]


def get_proposal(quire: Quire, proposal_id: int) -> Proposal:
    with quire.db.read() as conn:
        return _load(conn, proposal_id)


# -- deciding (a person only) --------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    proposal: Proposal
    run: folder_runs.StartResult | None = None
    changes: operations.Changes | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "proposal": self.proposal.as_dict(),
            "run": None if self.run is None else self.run.as_dict(),
            "changes": None if self.changes is None else self.changes.as_dict(),
        }


def _pending(quire: Quire, proposal_id: int) -> Proposal:
    proposal = get_proposal(quire, proposal_id)
    if proposal.status != "pending":
        raise Conflict(f"proposal {proposal_id} was already {proposal.status}")
    return proposal


def accept_proposal(quire: Quire, principal: Principal, proposal_id: int) -> Decision:
    """A person approves: the folder run starts (or the note is added) and the proposal is closed."""
    require_person("accept a proposal", principal)
    proposal = _pending(quire, proposal_id)
    run: folder_runs.StartResult | None = None
    changes: operations.Changes | None = None
    if proposal.kind == "folder_run":
        assert proposal.folder is not None
        run = folder_runs.start_run(
            quire,
            principal,
            proposal.base_id,
            proposal.folder,
            key=f"proposal-{proposal.id}",
            proposed_by=proposal.proposed_by,
        )
    else:
        assert proposal.note_text is not None
        changes = operations.add_items(
            quire,
            proposal.base_id,
            [operations.NoteInput(proposal.note_text, proposal.note_title)],
            owner=proposal.proposed_by,
        )
    item_id = changes.created[0] if changes is not None and changes.created else None
    decided = _decide(
        quire,
        principal,
        proposal,
        "accepted",
        audit.PROPOSAL_ACCEPTED,
        run_id=None if run is None else run.run_id,
        item_id=item_id,
    )
    return Decision(decided, run, changes)


def dismiss_proposal(quire: Quire, principal: Principal, proposal_id: int) -> Decision:
    require_person("dismiss a proposal", principal)
    proposal = _pending(quire, proposal_id)
    return Decision(_decide(quire, principal, proposal, "dismissed", audit.PROPOSAL_DISMISSED))


def _decide(
    quire: Quire,
    principal: Principal,
    proposal: Proposal,
    status: str,
    action: str,
    *,
    run_id: int | None = None,
    item_id: int | None = None,
) -> Proposal:
    with quire.db.write() as conn:
        done = conn.execute(
            update(agent_proposals)
            .where(and_(agent_proposals.c.id == proposal.id, agent_proposals.c.status == "pending"))
            .values(status=status, decided_by=principal.label, decided_at=time.time(), run_id=run_id, item_id=item_id)
        ).rowcount
        if done != 1:
            current = _load(conn, proposal.id)
            raise Conflict(f"proposal {proposal.id} was already {current.status}")
        audit.append(
            conn,
            action,
            principal.label,
            base_id=proposal.base_id,
            run_id=run_id,
            payload={"proposal_id": proposal.id, "kind": proposal.kind, "proposed_by": proposal.proposed_by},
        )
        return _load(conn, proposal.id)
