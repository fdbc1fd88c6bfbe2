"""Proposals: filed once, decided once by a person, replay-safe, and the same through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.agents import access, proposals
from knowledge.errors import Conflict, InvalidInput, NotFound
from knowledge.library import audit
from knowledge.lifecycle import operations
from knowledge.principal import Principal
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.knowledge.helpers import make_base
from tests.support.files import write_tree

AGENT = Principal.agent("claude")
PERSON = Principal.person("tester")


def test_folder_run_proposal_is_filed_once_and_accepted_once(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire, "kb")
    folder = write_tree(tmp_path / "f", {"a.md": "alpha", "b.txt": "beta"})
    access.allow_root(quire, PERSON, folder)
    first, plan = proposals.propose_folder_run(quire, AGENT, "kb", folder)
    again, _ = proposals.propose_folder_run(quire, AGENT, "kb", folder)
    assert again.id == first.id and len(plan.eligible) == 2  # the same pending proposal, not a second one
    other, _ = proposals.propose_folder_run(quire, Principal.agent("cursor"), "kb", folder)
    assert other.id != first.id
    (filed, _other) = audit.list_entries(quire.db, actions=[audit.PROPOSAL_FILED])
    assert filed.actor == "agent:claude" and filed.base_id == base.id
    assert filed.payload["counts"] == {"eligible": 2, "ineligible": 0}

    decided = proposals.accept_proposal(quire, PERSON, first.id)
    assert decided.run is not None and decided.proposal.status == "accepted"
    assert decided.run.key == f"proposal-{first.id}"
    with pytest.raises(Conflict, match="already accepted"):
        proposals.accept_proposal(quire, PERSON, first.id)
    with pytest.raises(Conflict, match="already accepted"):
        proposals.dismiss_proposal(quire, PERSON, first.id)
    # a retry after a crash between starting and closing the proposal replays the very same run
    replay = folder_runs.start_run(quire, PERSON, "kb", folder, key=f"proposal-{first.id}")
    assert replay.outcome == "replayed" and replay.run_id == decided.run.run_id
    # the database keeps a decided proposal as it is
    with pytest.raises(sa_exc.IntegrityError, match="decided once"), quire.db.write() as conn:
        conn.execute(text("UPDATE agent_proposals SET status = 'pending' WHERE id = :i"), {"i": first.id})
    with pytest.raises(NotFound):
        proposals.accept_proposal(quire, PERSON, 999)


def test_note_proposal_checks_input_and_is_added_when_accepted(quire: Quire) -> None:
    base = make_base(quire, "kb")
    with pytest.raises(InvalidInput):
        proposals.propose_note(quire, AGENT, "kb", "   ")
    with pytest.raises(InvalidInput):
        proposals.propose_note(quire, AGENT, "kb", "x" * (proposals.MAX_NOTE_CHARS + 1))
    note = proposals.propose_note(quire, AGENT, "kb", "Remember the milk\nand eggs")
    assert note.note_title == "Remember the milk" and note.preview["chars"] == 26
    assert operations.list_items(quire, base.id) == []  # nothing is added by a proposal
    decided = proposals.accept_proposal(quire, PERSON, note.id)
    (item,) = operations.list_items(quire, base.id)
    assert item.type == "note" and item.owner == "agent:claude" and decided.proposal.item_id == item.id


def test_cli_lists_accepts_and_dismisses(data_dir: Path, quire: Quire) -> None:
    make_base(quire, "kb")
    keep = proposals.propose_note(quire, AGENT, "kb", "keep this")
    drop = proposals.propose_note(quire, AGENT, "kb", "drop this")
    listed = quire_cli("--json", "proposals", "list", data_dir=data_dir)
    assert [p["id"] for p in json.loads(listed.stdout)["proposals"]] == [drop.id, keep.id]
    assert quire_cli("proposals", "accept", str(keep.id), data_dir=data_dir).returncode == 0
    assert quire_cli("proposals", "dismiss", str(drop.id), data_dir=data_dir).returncode == 0
    assert quire_cli("proposals", "dismiss", str(drop.id), data_dir=data_dir).returncode == 4
    assert quire_cli("proposals", "accept", "77", data_dir=data_dir).returncode == 3
    assert json.loads(quire_cli("--json", "proposals", "list", data_dir=data_dir).stdout)["proposals"] == []
    every = json.loads(quire_cli("--json", "proposals", "list", "--all", data_dir=data_dir).stdout)["proposals"]
    assert {p["id"]: p["status"] for p in every} == {keep.id: "accepted", drop.id: "dismissed"}


def test_the_table_mirror_matches_the_frozen_ddl(quire: Quire) -> None:
    from knowledge.store.schema_agents import agent_proposals

    with quire.db.read() as conn:
        columns = [r[1] for r in conn.execute(text("PRAGMA table_info(agent_proposals)")).all()]
    assert columns == [c.name for c in agent_proposals.columns]
