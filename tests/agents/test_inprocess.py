"""The SDK's own in-process client against ``quire mcp``'s server on a real, really indexed base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from knowledge.agents import reads
from knowledge.agents.server import QuireMCP, RateLimit
from knowledge.library import audit
from knowledge.runtime import Quire
from tests.agents.helpers import PARAGRAPHS, error_text, indexed_base, payload, run

TOOLS = {"list_bases", "search", "related", "read", "list_items", "status", "propose_folder_run", "propose_note"}


@pytest.mark.model
def test_lists_tools_and_resources_searches_and_reads_a_chunk_with_neighbours(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_base(quire, tmp_path)
    server = QuireMCP(quire, agent="claude").server

    async def session() -> dict[str, object]:
        async with Client(server) as client:
            tools = await client.list_tools()
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
            listed = payload(await client.call_tool("list_bases", {}))
            found = payload(
                await client.call_tool("search", {"base": base.name, "query": "lighthouse foghorn tide", "limit": 5})
            )
            middle = next(h for h in found["hits"] if h["item"]["name"] == "logbook.md")
            chunk = payload(
                await client.call_tool("read", {"base": base.name, "chunk": middle["chunk_id"], "neighbours": 2})
            )
            again = payload(await client.call_tool("search", {"base": base.name, "query": "lighthouse foghorn tide"}))
            text = payload(await client.call_tool("read", {"base": base.name, "item": ids["docs/volcano.md"]}))
            resource = await client.read_resource(f"quire://chunks/{base.id}/{middle['chunk_id']}")
            item_res = await client.read_resource(f"quire://items/{base.id}/{ids['docs/bread.md']}")
            return {
                "tools": {t.name for t in tools.tools},
                "resources": {r.uri for r in resources.resources},
                "templates": {t.uri_template for t in templates.resource_templates},
                "listed": listed,
                "found": found,
                "chunk": chunk,
                "again": again,
                "text": text,
                "resource": json.loads(resource.contents[0].text),  # type: ignore[union-attr]
                "item_res": json.loads(item_res.contents[0].text),  # type: ignore[union-attr]
                "middle": middle,
            }

    got = run(session)
    assert got["tools"] == TOOLS
    assert "quire://bases" in got["resources"]  # type: ignore[operator]
    assert got["templates"] == {"quire://bases/{base}", "quire://items/{base}/{item}", "quire://chunks/{base}/{chunk}"}
    assert [b["name"] for b in got["listed"]["bases"]] == ["kb"]  # type: ignore[index]

    hits = got["found"]["hits"]  # type: ignore[index]
    assert hits and hits[0]["item"]["name"] == "logbook.md"  # the real model ranks the logbook first
    assert hits[0]["item"]["path"] == "src-kb/logbook.md"  # where it lies below the top of its tree (the folder added)
    top = hits[0]
    assert top["citation"].startswith(f"quire:{base.id}:{top['item']['id']}:")
    assert top["source_path"].endswith("logbook.md") and "lighthouse" in top["text"].lower()
    assert set(top["location"]) == {"page", "line_start", "line_end"} and top["location"]["line_start"] is not None
    # the citation of a chunk is stable: the same chunk gets the same id in another search
    assert {h["chunk_id"]: h["citation"] for h in got["again"]["hits"]}[top["chunk_id"]] == top["citation"]  # type: ignore[index]

    chunk = got["chunk"]
    ordinal = chunk["chunk"]["ordinal"]  # type: ignore[index]
    assert [c["ordinal"] for c in chunk["before"]] == list(range(max(0, ordinal - 2), ordinal))  # type: ignore[index]
    assert all(c["ordinal"] in (ordinal + 1, ordinal + 2) for c in chunk["after"])  # type: ignore[index]
    assert chunk["before"] or chunk["after"]  # type: ignore[index]  # the logbook has several chunks
    assert chunk["item"]["name"] == "logbook.md"  # type: ignore[index]
    middle = got["middle"]
    assert chunk["chunk"]["citation"] == middle["citation"] == f"quire:{base.id}:{middle['item']['id']}:{ordinal}"  # type: ignore[index]

    assert "Magma rises" in got["text"]["text"] and got["text"]["pages"] == 1  # type: ignore[index]
    assert got["resource"]["chunk"]["chunk_id"] == middle["chunk_id"]  # type: ignore[index]
    assert got["item_res"]["item"]["name"] == "bread.md"  # type: ignore[index]

    calls = [e for e in audit.list_entries(quire.db, actions=[audit.AGENT_CALL])]
    assert {e.actor for e in calls} == {"agent:claude"}
    assert {e.payload["tool"] for e in calls} >= {"list_bases", "search", "read"}
    assert all("query" not in e.payload for e in calls)  # arguments are never audited


@pytest.mark.model
def test_list_items_pages_with_a_cursor_and_status_reports_the_base(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, ids = indexed_base(quire, tmp_path)
    monkeypatch.setattr(reads, "LIMITS", reads.Limits(page_chars=700))
    server = QuireMCP(quire, agent="claude").server
    folder = next(i for name, i in ids.items() if name.startswith("src-"))

    async def session() -> tuple[list[dict[str, object]], dict[str, object], dict[str, object]]:
        async with Client(server) as client:
            pages: list[dict[str, object]] = []
            cursor = None
            while True:
                args = {"base": base.name, "folder": ids["docs"], "limit": 2}
                if cursor:
                    args["cursor"] = cursor
                page = payload(await client.call_tool("list_items", args))
                pages.append(page)
                cursor = page["next_cursor"]
                if not cursor:
                    break
            top = payload(await client.call_tool("list_items", {"base": base.name, "folder": folder}))
            state = payload(await client.call_tool("status", {"base": base.name}))
            first = payload(await client.call_tool("read", {"base": base.name, "item": ids["logbook.md"]}))
            text_pages = [first] + [
                payload(await client.call_tool("read", {"base": base.name, "item": ids["logbook.md"], "page": n}))
                for n in range(1, int(first["pages"]))  # type: ignore[call-overload]
            ]
            beyond = error_text(
                await client.call_tool("read", {"base": base.name, "item": ids["logbook.md"], "page": 99})
            )
            return pages, top, state, text_pages, beyond

    pages, top, state, text_pages, beyond = run(session)
    assert len(text_pages) > 2 and all(len(p["text"]) <= 700 for p in text_pages)  # type: ignore[arg-type]
    assert "".join(p["text"] for p in text_pages).strip().endswith(PARAGRAPHS[-1].strip())  # type: ignore[misc]
    assert "invalid_input" in beyond
    names = [i["name"] for p in pages for i in p["items"]]  # type: ignore[attr-defined]
    assert names == ["bread.md", "orbits.md", "volcano.md"] and len(pages) == 2
    assert all(i["status"] == "completed" and i["reason"] is None for p in pages for i in p["items"])  # type: ignore[attr-defined]
    assert [i["name"] for i in top["items"]] == ["docs", "logbook.md"]  # type: ignore[attr-defined]
    (report,) = state["bases"]  # type: ignore[misc]
    assert report["name"] == "kb" and report["jobs_in_flight"] == 0 and report["items"]["completed"] == 4
    assert report["failed_items"] == [] and report["sync"] is None


def test_unknown_base_and_item_are_clear_errors_without_traces_or_other_paths(quire: Quire, tmp_path: Path) -> None:
    from tests.knowledge.helpers import make_base

    base = make_base(quire, "private")
    server = QuireMCP(quire, agent="claude").server

    async def session() -> tuple[str, str, str, str]:
        async with Client(server) as client:
            unknown = error_text(await client.call_tool("search", {"base": "nope", "query": "x"}))
            item = error_text(await client.call_tool("read", {"base": base.name, "item": 999}))
            bad = error_text(await client.call_tool("read", {"base": base.name}))
            try:
                await client.read_resource(f"quire://items/{base.id}/999")
                resource = ""
            except MCPError as exc:
                resource = str(exc)
            return unknown, item, bad, resource

    unknown, item, bad, resource = run(session)
    assert "not_found" in unknown and "'nope' not found" in unknown
    assert "not_found" in item and "item 999 not found" in item
    assert "give exactly one of chunk or item" in bad
    assert "item 999 not found" in resource
    for text in (unknown, item, bad, resource):
        assert "Traceback" not in text and str(tmp_path) not in text and "/" not in text.split(":", 1)[-1]


def test_rate_limit_per_agent(quire: Quire) -> None:
    server = QuireMCP(quire, agent="busy", rate=RateLimit(per_second=0.001, burst=3)).server

    async def session() -> list[bool]:
        async with Client(server) as client:
            return [(await client.call_tool("list_bases", {})).is_error for _ in range(5)]

    assert run(session) == [False, False, False, True, True]
    assert RateLimit(per_second=1, burst=1).take("a", now=0.0) == 0.0
    limit = RateLimit(per_second=1, burst=1)
    limit.take("a", now=0.0)
    assert limit.take("a", now=0.5) > 0 and limit.take("b", now=0.5) == 0.0  # per client, refilled over time
    assert limit.take("a", now=2.0) == 0.0
