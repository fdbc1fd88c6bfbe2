"""Every MCP tool on a ``deleting`` item, a locked base and a failed base answers as the seed's guards say.

* ``deleting`` material does not exist for a reader (seed 001's visibility rule): search never returns
  it, reading it or listing under it answers "not found", listings and counts leave it out.
* A locked base is read-only: every read works; proposals are refused (conflict) like a folder run's
  destination (seed 000: an ``ok``, unlocked base, judged first).
* A failed base still lists (and deletes, which agents cannot do); search and reading chunks are refused
  with its reason; proposals are refused (conflict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from knowledge.agents import access
from knowledge.agents.server import QuireMCP
from knowledge.library import bases
from knowledge.lifecycle import operations
from knowledge.principal import Principal
from knowledge.runtime import Quire
from tests.agents.helpers import error_text, indexed_base, payload, run
from tests.support.files import write_tree


def _calls(server: Any, script: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def session() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in script]

    return run(session)


def _resource(server: Any, uri: str) -> str:
    async def session() -> str:
        async with Client(server) as client:
            try:
                got = await client.read_resource(uri)
                return str(got.contents[0].text)  # type: ignore[union-attr]
            except MCPError as exc:
                return f"error: {exc}"

    return run(session)


@pytest.mark.model
def test_guards_for_deleting_items_locked_and_failed_bases(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_base(quire, tmp_path)
    server = QuireMCP(quire, agent="claude").server
    volcano, docs = ids["docs/volcano.md"], ids["docs"]
    found = payload(_calls(server, [("search", {"base": "kb", "query": "magma lava volcano", "mode": "keyword"})])[0])
    volcano_chunk = next(h["chunk_id"] for h in found["hits"] if h["item"]["id"] == volcano)
    folder = write_tree(tmp_path / "more", {"new.md": "new text"})
    access.allow_root(quire, Principal.person("tester"), folder)

    # -- deleting: the item and its chunks are gone for every tool and resource ---------------------
    operations.delete_items(quire, base.id, [volcano])  # no worker runs: it stays `deleting`
    answers = _calls(
        server,
        [
            ("search", {"base": "kb", "query": "magma lava volcano", "mode": "keyword"}),
            ("search", {"base": "kb", "query": "magma lava volcano", "mode": "vector"}),
            ("read", {"base": "kb", "chunk": volcano_chunk}),
            ("read", {"base": "kb", "item": volcano}),
            ("list_items", {"base": "kb", "folder": docs}),
            ("list_items", {"base": "kb", "folder": volcano}),
            ("search", {"base": "kb", "query": "magma", "subtree": volcano}),
            ("status", {"base": "kb"}),
        ],
    )
    keyword, vector, chunk, item, listing, under, subtree, state = answers
    assert all(h["item"]["id"] != volcano for h in payload(keyword)["hits"])
    assert all(h["item"]["id"] != volcano for h in payload(vector)["hits"])
    for refused in (chunk, item, under, subtree):
        assert "not_found" in error_text(refused)
    assert [i["name"] for i in payload(listing)["items"]] == ["bread.md", "orbits.md"]
    assert "deleting" not in payload(state)["bases"][0]["items"]
    assert "not_found" in _resource(server, f"quire://items/{base.id}/{volcano}")
    assert "not_found" in _resource(server, f"quire://chunks/{base.id}/{volcano_chunk}")

    # -- locked: reads work, proposals are refused as conflicts -------------------------------------
    bases.set_locked(quire.db, base.id, True)
    bread = ids["docs/bread.md"]
    search, read, listing, folder_run, note = _calls(
        server,
        [
            ("search", {"base": "kb", "query": "sourdough starter"}),
            ("read", {"base": "kb", "item": bread}),
            ("list_items", {"base": "kb", "folder": docs}),
            ("propose_folder_run", {"base": "kb", "folder": str(folder)}),
            ("propose_note", {"base": "kb", "text": "a note"}),
        ],
    )
    assert payload(search)["hits"][0]["item"]["id"] == bread
    assert "Sourdough" in payload(read)["text"]
    assert payload(listing)["items"]
    assert "conflict" in error_text(folder_run) and "locked" in error_text(folder_run)
    assert "conflict" in error_text(note) and "locked" in error_text(note)
    bases.set_locked(quire.db, base.id, False)

    # -- failed: listing works; search, chunks, item text and proposals are refused -----------------
    bases.mark_base_failed(quire.db, base.id, "its search index is missing or damaged")
    listing, state, search, chunk, item, folder_run, note = _calls(
        server,
        [
            ("list_items", {"base": "kb", "folder": docs}),
            ("status", {"base": "kb"}),
            ("search", {"base": "kb", "query": "sourdough"}),
            ("read", {"base": "kb", "chunk": volcano_chunk + 1}),
            ("read", {"base": "kb", "item": bread}),
            ("propose_folder_run", {"base": "kb", "folder": str(folder)}),
            ("propose_note", {"base": "kb", "text": "a note"}),
        ],
    )
    assert payload(listing)["items"] and payload(state)["bases"][0]["status"] == "failed"
    for refused in (search, chunk, item):
        text = error_text(refused)
        assert "conflict" in text and "is failed: its search index is missing or damaged" in text
    assert "conflict" in error_text(folder_run) and "failed" in error_text(folder_run)
    assert "conflict" in error_text(note) and "failed" in error_text(note)
    with quire.db.read() as conn:
        from sqlalchemy import text as sql

        assert conn.execute(sql("SELECT count(*) FROM agent_proposals")).scalar_one() == 0
