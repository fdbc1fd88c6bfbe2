"""Items a person keeps from agents: a document, and a folder with a document added below it afterwards, never
reach an agent principal (search in every mode, reads, listings, counts, citations, related documents; MCP tools
and ``--as-agent``) while the person still sees them. Only a person marks or unmarks; unmarking restores what the
agent sees. The first test runs on a team store too: the marks' table comes from its own migration there, and the
subtree is walked by the same query on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from sqlalchemy import text

from knowledge.agents.reads import bases_overview, list_children, read_chunk, read_item_text, search_base, status
from knowledge.agents.server import QuireMCP
from knowledge.errors import Forbidden, NotFound
from knowledge.library import agent_exclusions, audit
from knowledge.lifecycle import operations, stale_items
from knowledge.portable.export import export_base
from knowledge.principal import Principal, acting_as
from knowledge.runtime import Quire
from knowledge.search import MODES, related, search
from tests.agents.helpers import error_text, payload, run
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree

quire = pytest.fixture(engine_quire)  # the search and read test runs on a team store too (PostgreSQL)

AGENT = Principal.agent("bot")
FILES = {
    "open/alpha.md": "# Alpha\n\nThe volcano erupted and magma flowed down the open slope.\n",
    "open/beta.md": "# Beta\n\nVolcano magma chambers feed the eruption beneath the island.\n",
    "secret/gamma.md": "# Gamma\n\nSecret volcano magma survey of the caldera, not for machines.\n",
    "private.md": "# Private\n\nPrivate notes on the volcano and its magma, [[alpha]] cited.\n",
}
LATER = "# Delta\n\nA later volcano magma report, filed after the folder was kept from agents.\n"
HIDDEN = {"gamma.md", "private.md", "delta.md", "secret"}


def _ids(quire: Quire, base_id: int) -> dict[str, int]:
    return {i.name: i.id for i in operations.list_items(quire, base_id, flat=True)}


def _kept_world(quire: Quire, tmp_path: Path) -> tuple[int, dict[str, int]]:
    """Four documents indexed; ``private.md`` and the folder ``secret`` kept from agents, then ``delta.md``
    added inside ``secret`` (a re-add of the folder picks it up) and indexed."""
    base = make_base(quire, "kb")
    folder = write_tree(tmp_path / "src", FILES)
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    ids = _ids(quire, base.id)
    assert agent_exclusions.exclude_from_agents(quire, base.id, ids["private.md"])
    assert agent_exclusions.exclude_from_agents(quire, "kb", str(folder / "secret"))  # by the original's path
    assert not agent_exclusions.exclude_from_agents(quire, base.id, ids["secret"])  # already kept
    (folder / "secret" / "delta.md").write_text(LATER)
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    ids = _ids(quire, base.id)
    assert "delta.md" in ids
    return base.id, ids


def _names(hits: list[Any]) -> set[str]:
    return {h.item_name for h in hits}


@pytest.mark.model
@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_kept_items_never_reach_an_agent_in_search_reads_listings_or_counts(quire: Quire, tmp_path: Path) -> None:
    base_id, ids = _kept_world(quire, tmp_path)
    for mode in MODES:
        person = _names(search(quire, base_id, "volcano magma", mode=mode, limit=10))
        assert {"gamma.md", "private.md", "delta.md"} <= person, mode  # the person still finds them
        with acting_as(AGENT):
            page = search(quire, base_id, "volcano magma", mode=mode, limit=2)
            agent = search(quire, base_id, "volcano magma", mode=mode, limit=10)
        assert _names(page) == {"alpha.md", "beta.md"}, mode  # a full page of allowed hits
        assert _names(agent) == {"alpha.md", "beta.md"}, mode  # and nothing kept, however deep
    with acting_as(AGENT):
        assert _names(search(quire, base_id, "type:md", limit=10)) == {"alpha.md", "beta.md"}  # filters alone
        found = search_base(quire, base_id, "volcano alpha", mode="keyword", limit=10)
        cited = [b for h in found["hits"] for b in h["linked_from"]]
        assert cited == []  # private.md links to alpha, but is not cited to an agent
        listed = {i.name for i in operations.list_items(quire, base_id, flat=True)}
        assert listed.isdisjoint(HIDDEN) and {"alpha.md", "beta.md", "open"} <= listed
        top = {i["name"] for i in list_children(quire, base_id, folder=ids["src"])["items"]}
        assert top == {"open"}
        for hidden in ("private.md", "delta.md", "secret"):
            with pytest.raises(NotFound):
                read_item_text(quire, base_id, ids[hidden])
            with pytest.raises(NotFound):
                operations.get_item(quire, base_id, ids[hidden])
        with pytest.raises(NotFound):
            list_children(quire, base_id, folder=ids["secret"])
        with pytest.raises(NotFound):
            operations.list_item_chunks(quire, base_id, ids["delta.md"])
        counts = bases_overview(quire)[0]["items"]
        report = status(quire, base_id)["bases"][0]
    assert counts["completed"] == 4  # src, open, alpha, beta: the four kept are not counted
    assert report["items"]["completed"] == 2  # the two allowed documents
    chunk = operations.list_item_chunks(quire, base_id, ids["gamma.md"])[0]["chunk_id"]
    with acting_as(AGENT), pytest.raises(NotFound):
        read_chunk(quire, base_id, int(chunk))
    assert read_chunk(quire, base_id, int(chunk))["item"]["name"] == "gamma.md"  # the person reads it
    person_counts = bases_overview(quire)[0]["items"]
    assert person_counts["completed"] == 8
    with quire.db.write() as conn:  # every document stale: an older chunker made them
        conn.execute(text("UPDATE items SET chunker_version = 'old' WHERE type != 'directory'"))
    with acting_as(AGENT):
        assert {i.name for i in stale_items(quire, base_id)} == {"alpha.md", "beta.md"}
    assert len(stale_items(quire, base_id)) == 5


@pytest.mark.model
def test_only_a_person_keeps_or_allows_and_allowing_restores_what_an_agent_sees(quire: Quire, tmp_path: Path) -> None:
    base_id, ids = _kept_world(quire, tmp_path)
    for mark in (agent_exclusions.exclude_from_agents, agent_exclusions.include_for_agents):
        with acting_as(AGENT), pytest.raises(Forbidden):
            mark(quire, base_id, ids["alpha.md"])
    with acting_as(AGENT), pytest.raises(Forbidden):  # an export holds every item, the kept ones too
        export_base(quire, base_id, tmp_path / "kb.quire")
    assert not (tmp_path / "kb.quire").exists()
    assert agent_exclusions.include_for_agents(quire, base_id, ids["secret"])
    with acting_as(AGENT):
        found = _names(search(quire, base_id, "volcano magma", mode="keyword", limit=10))
        assert read_item_text(quire, base_id, ids["delta.md"])["item"]["name"] == "delta.md"
    assert {"gamma.md", "delta.md"} <= found and "private.md" not in found
    actions = [e.action for e in audit.list_entries(quire.db)]
    assert actions.count(audit.AGENT_EXCLUDED) == 2 and actions.count(audit.AGENT_INCLUDED) == 1


@pytest.mark.model
def test_the_mcp_tools_do_not_show_kept_items(quire: Quire, tmp_path: Path) -> None:
    _base_id, ids = _kept_world(quire, tmp_path)
    server = QuireMCP(quire, agent="claude").server

    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            return {
                "search": payload(await client.call_tool("search", {"base": "kb", "query": "volcano magma"})),
                "read": error_text(await client.call_tool("read", {"base": "kb", "item": ids["delta.md"]})),
                "list": payload(await client.call_tool("list_items", {"base": "kb", "folder": ids["src"]})),
                "inside": error_text(await client.call_tool("list_items", {"base": "kb", "folder": ids["secret"]})),
                "bases": payload(await client.call_tool("list_bases", {})),
                "status": payload(await client.call_tool("status", {"base": "kb"})),
                "related": payload(await client.call_tool("related", {"base": "kb", "item": ids["alpha.md"]})),
                "kept": error_text(await client.call_tool("related", {"base": "kb", "item": ids["delta.md"]})),
            }

    got = run(session)
    assert {h["item"]["name"] for h in got["search"]["hits"]} == {"alpha.md", "beta.md"}
    assert "not_found" in got["read"] and "not_found" in got["inside"]
    assert [i["name"] for i in got["list"]["items"]] == ["open"]
    assert got["bases"]["bases"][0]["items"]["completed"] == 4
    assert got["status"]["bases"][0]["items"]["completed"] == 2
    assert [r["item"]["name"] for r in got["related"]["related"]] == ["beta.md"]  # related documents: none kept
    assert "not_found" in got["kept"]
    assert {"gamma.md", "delta.md", "private.md"} <= {r.name for r in related(quire, "kb", ids["alpha.md"])}


@pytest.mark.model
def test_the_cli_marks_for_a_person_and_hides_from_as_agent(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    _base_id, ids = _kept_world(quire, tmp_path)
    quire.close()
    refused = quire_cli("--as-agent", "bot", "agents", "include", "kb", str(ids["secret"]), data_dir=data_dir)
    assert refused.returncode != 0 and "agent may not" in refused.stderr
    shown = quire_cli("--json", "items", "kb", data_dir=data_dir)
    kept = {i["name"] for i in json.loads(shown.stdout)["items"] if i["kept_from_agents"]}
    assert kept == HIDDEN
    text = quire_cli("items", "kb", data_dir=data_dir).stdout
    assert "private.md  (kept from agents)" in text
    agent = quire_cli("--json", "--as-agent", "bot", "items", "kb", data_dir=data_dir)
    assert {i["name"] for i in json.loads(agent.stdout)["items"]}.isdisjoint(HIDDEN)
    hits = quire_cli("--json", "--as-agent", "bot", "search", "kb", "volcano magma", data_dir=data_dir)
    assert {h["item_name"] for h in json.loads(hits.stdout)["hits"]} == {"alpha.md", "beta.md"}
    chunks = quire_cli("--as-agent", "bot", "chunks", "kb", str(ids["gamma.md"]), data_dir=data_dir)
    assert chunks.returncode != 0 and "not found" in chunks.stderr
    allowed = quire_cli("agents", "include", "kb", "secret", data_dir=data_dir)  # by its path in the base
    assert allowed.returncode == 0, allowed.stderr
    hits = quire_cli("--json", "--as-agent", "bot", "search", "kb", "volcano magma", data_dir=data_dir)
    assert {"gamma.md", "delta.md"} <= {h["item_name"] for h in json.loads(hits.stdout)["hits"]}
