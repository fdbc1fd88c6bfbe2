"""The per-agent proposal cap counts under the agent's account — its credential (``quire mcp --agent NAME``,
else the server's ``mcp-client``) — never the name a client gives itself in its handshake.

Crafted inputs: one server without ``--agent`` whose clients name themselves afresh for every call, two
servers configured for two agents, and pending proposals filed before accounts were kept (migration 0034).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import Implementation
from sqlalchemy import text

from knowledge.agents import proposals
from knowledge.agents.server import QuireMCP, RateLimit
from knowledge.compose import open_quire
from knowledge.principal import Principal
from knowledge.runtime import Quire
from knowledge.store import migrations as mig
from knowledge.store.database import Database
from tests.agents.helpers import error_text, run
from tests.knowledge.helpers import make_base
from tests.support.migrations import migrate_before

CAP = 3  # the per-agent cap for these tests
MIGRATION = "0034_agent_proposal_account"


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proposals, "MAX_PENDING_PER_AGENT", CAP)


def _server(quire: Quire, agent: str | None = None) -> Any:
    return QuireMCP(quire, agent=agent, rate=RateLimit(burst=1000, global_burst=1000)).server


def _propose_as(server: Any, names: Sequence[str]) -> list[str | None]:
    """One connection per name, each filing one note; each call's error text (None: filed)."""

    async def calls() -> list[str | None]:
        answers: list[str | None] = []
        for name in names:
            async with Client(server, client_info=Implementation(name=name, version="1")) as client:
                result = await client.call_tool("propose_note", {"base": "kb", "text": f"a note from {name}"})
                answers.append(error_text(result) if result.is_error else None)
        return answers

    return run(calls)


def test_a_client_naming_itself_afresh_meets_its_credentials_cap(quire: Quire) -> None:
    make_base(quire, "kb")
    names = [f"bot-{n}" for n in range(CAP + 2)]
    answers = _propose_as(_server(quire), names)
    assert answers[:CAP] == [None] * CAP
    for answer in answers[CAP:]:
        assert answer is not None and "too_many_proposals: mcp-client (calling itself bot-" in answer
        assert f"already has {CAP} proposals waiting" in answer
    filed = proposals.list_proposals(quire)
    assert sorted(p.proposed_by for p in filed) == ["agent:bot-0", "agent:bot-1", "agent:bot-2"]  # as it said
    assert {p.account for p in filed} == {"agent:mcp-client"}
    # in process too: the credential, not the name, is what counts
    with pytest.raises(proposals.TooManyProposals):
        proposals.propose_note(quire, Principal.agent("yet-another-name", "mcp-client"), "kb", "one more")


def test_two_agents_each_have_their_own_cap(quire: Quire) -> None:
    make_base(quire, "kb")
    for agent in ("claude-desktop", "cursor"):
        answers = _propose_as(_server(quire, agent), [f"{agent}-{n}" for n in range(CAP + 1)])
        assert answers[:CAP] == [None] * CAP, agent
        assert answers[CAP] is not None and f"too_many_proposals: {agent} already has {CAP}" in answers[CAP]
    # the clients of a server configured for no agent share a third account, untouched by the two above
    assert _propose_as(_server(quire), ["bot-a", "bot-b"]) == [None, None]
    counts: dict[str | None, int] = {}
    for p in proposals.list_proposals(quire):
        counts[p.account] = counts.get(p.account, 0) + 1
    assert counts == {"agent:claude-desktop": CAP, "agent:cursor": CAP, "agent:mcp-client": 2}
    # two credentials in process: each its own cap, whatever names they use
    for n in range(CAP):
        proposals.propose_note(quire, Principal.agent(f"a-{n}", "cred-a"), "kb", "a")
    assert proposals.propose_note(quire, Principal.agent("a-0", "cred-b"), "kb", "b").account == "agent:cred-b"


def test_proposals_filed_before_accounts_count_for_their_proposer(data_dir: Path) -> None:
    db = Database.in_dir(data_dir)
    migrate_before(db, MIGRATION)
    with db.write() as conn:
        for n in range(CAP):
            conn.execute(
                text(
                    "INSERT INTO agent_proposals (kind, base_id, base_name, proposed_by, note_title, note_text,"
                    " preview, status, created_at) VALUES ('note', 1, 'kb', 'agent:claude', :t, :t, '{}',"
                    " 'pending', 0)"
                ),
                {"t": f"old note {n}"},
            )
    db.dispose()
    quire = open_quire(data_dir)  # migrates: the older rows keep no account
    try:
        with quire.db.read() as conn:
            assert conn.execute(text("SELECT name FROM schema_migrations WHERE name = :n"), {"n": MIGRATION}).first()
        assert {p.account for p in proposals.list_proposals(quire)} == {None}
        make_base(quire, "notes")
        with pytest.raises(proposals.TooManyProposals, match=f"claude already has {CAP}"):
            proposals.propose_note(quire, Principal.agent("claude"), "notes", "one more")
        assert proposals.propose_note(quire, Principal.agent("other"), "notes", "fine").status == "pending"
    finally:
        quire.close()
    again = Database.in_dir(data_dir)
    try:
        assert mig.migrate(again) == []  # applied once, recorded
    finally:
        again.dispose()
