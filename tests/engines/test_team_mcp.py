"""An agent over MCP against a team store works exactly as against a data directory: ``quire mcp`` as a real
child process (the store in its environment, stdio), listing, searching, reading and proposing; the person
accepts the proposal; every call and the proposal are filed under the agent's name in the store's audit log.

Real PostgreSQL on loopback; the base is indexed by an in-process worker with the real model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from knowledge.agents import access, proposals
from knowledge.compose import open_team_quire
from knowledge.library import audit
from knowledge.lifecycle import operations
from knowledge.principal import Principal
from tests.agents.helpers import indexed_base, payload, run
from tests.conftest import REPO
from tests.knowledge.helpers import drain

pytestmark = [pytest.mark.engines, pytest.mark.model]

PERSON = Principal.person("tester")


def test_an_agent_searches_reads_and_proposes_on_a_team_store(postgres_url: str, tmp_path: Path) -> None:
    store = open_team_quire(postgres_url, data_dir=tmp_path / "laptop")
    try:
        base, _ids = indexed_base(store, tmp_path)
        access.set_enabled(store, PERSON, True)
        env = {
            k: v for k, v in os.environ.items() if k not in ("QUIRE_STORE", "QUIRE_QUEUE")
        }  # the store comes from here alone
        env.update({"PYTHONPATH": str(REPO), "QUIRE_STORE": postgres_url, "HF_HUB_OFFLINE": "1"})
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "app.cli", "--data-dir", str(tmp_path / "agent"), "mcp", "--agent", "desktop"],
            cwd=str(REPO),
            env=env,
        )

        async def session() -> tuple[set[str], dict[str, object], dict[str, object], dict[str, object]]:
            async with Client(params, read_timeout_seconds=120) as client:
                listed = payload(await client.call_tool("list_bases", {}))
                found = payload(await client.call_tool("search", {"base": "kb", "query": "volcano lava", "limit": 3}))
                hit = found["hits"][0]  # type: ignore[index]
                chunk = payload(await client.call_tool("read", {"base": "kb", "chunk": hit["chunk_id"]}))
                note = payload(
                    await client.call_tool("propose_note", {"base": "kb", "text": "Pumice floats on water."})
                )
                return {b["name"] for b in listed["bases"]}, found, chunk, note  # type: ignore[index]

        names, found, chunk, note = run(session)
        assert names == {"kb"}
        assert found["hits"][0]["item"]["name"] == "volcano.md"  # type: ignore[index]
        assert "Magma" in chunk["chunk"]["text"] and chunk["base"]["id"] == base.id  # type: ignore[index]

        (filed,) = proposals.list_proposals(store, status="pending", limit=10)
        assert filed.proposed_by == "agent:desktop" and filed.id == note["proposal_id"]
        decided = proposals.accept_proposal(store, PERSON, filed.id)  # the person, in the store
        drain(store)
        added = operations.get_item(store, "kb", decided.proposal.item_id or 0)
        assert added.owner == "agent:desktop" and added.status == "completed"
        calls = audit.list_entries(store.db, actions=[audit.AGENT_CALL])
        assert calls and {e.actor for e in calls} == {"agent:desktop"}
        (proposed,) = audit.list_entries(store.db, actions=[audit.PROPOSAL_FILED])
        assert proposed.actor == "agent:desktop" and proposed.base_id == base.id
    finally:
        store.close()
