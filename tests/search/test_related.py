"""Related documents on a real corpus (tests/support/related_corpus.py: two documents on each of three subjects)
indexed with the real model, on both engines: the local vector index and pgvector on a team store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from knowledge.agents.server import QuireMCP
from knowledge.errors import GuardRejected, NotFound
from knowledge.library import agent_exclusions, audit
from knowledge.lifecycle import operations
from knowledge.principal import Principal, acting_as
from knowledge.runtime import Quire
from knowledge.search import NotIndexed, related
from tests.agents.helpers import error_text, payload, run
from tests.conftest import quire_cli
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree
from tests.support.related_corpus import SUBJECT, indexed_related_base

pytestmark = pytest.mark.model
quire = pytest.fixture(engine_quire)


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_related_documents_by_subject_folders_scope_and_unindexed_items(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_related_base(quire, tmp_path)
    by_id = {v: k for k, v in ids.items()}

    # every document's nearest is the other one on its subject; the item itself never comes back
    for path, subject in SUBJECT.items():
        found = related(quire, base, ids[path], limit=5)
        names = [by_id[r.item_id] for r in found]
        assert path not in names
        assert SUBJECT[names[0]] == subject, (path, names)
        assert len(names) == 5 and set(names) == set(SUBJECT) - {path}  # documents only: no folder
        assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)

    pottery = related(quire, base, ids["desk/celadon.md"], limit=2)
    first = pottery[0]
    assert (first.name, first.path) == ("crawling.md", "library/shelf/crawling.md")
    assert first.score > pottery[1].score + 0.2
    # why: one passage of each document, as short snippets with their places
    assert first.mine.item_id == ids["desk/celadon.md"] and first.theirs.item_id == ids["shelf/crawling.md"]
    assert "celadon" in first.mine.snippet.casefold() and "crawl" in first.theirs.snippet.casefold()
    assert first.mine.line_start is not None and first.theirs.line_start is not None
    assert 0 < len(first.theirs.snippet) <= 240
    assert first.as_dict()["why"]["related"]["location"]["line_start"] == first.theirs.line_start

    # a folder: its documents together (a pottery and a packaging one), never anything inside it
    desk = related(quire, base, ids["desk"], limit=4)
    assert {by_id[r.item_id] for r in desk[:2]} == {"shelf/crawling.md", "shelf/pyproject.md"}
    assert not {by_id[r.item_id] for r in desk} & {"desk/celadon.md", "desk/wheels.md"}
    assert not related(quire, base, ids[""], limit=5)  # the whole tree: nothing is left outside it

    # narrowed to one folder, as a search's subtree: nothing outside it, whatever is nearer
    in_boat = related(quire, base, ids["desk/celadon.md"], limit=5, subtree=ids["boat"])
    assert {by_id[r.item_id] for r in in_boat} == {"boat/reefing.md", "boat/tides.md"}

    # an item with no passages yet (pending): a clear refusal, not an empty answer
    extra = write_tree(tmp_path / "later", {"glaze-notes.md": "Tenmoku glazes break brown on the rims of tea bowls.\n"})
    added = operations.add_items(quire, base, [operations.PathInput(extra / "glaze-notes.md")])
    pending = added.created[0]
    with pytest.raises(NotIndexed, match="no indexed passages") as refused:
        related(quire, base, pending)
    assert isinstance(refused.value, GuardRejected) and refused.value.code == "not_indexed"
    with pytest.raises(NotFound):
        related(quire, base, 999_999)


def test_cli_related_text_json_and_exit_codes(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    _base, ids = indexed_related_base(quire, tmp_path)
    celadon = str(ids["desk/celadon.md"])

    as_json = quire_cli("--json", "related", "kb", celadon, "--limit", "3", data_dir=data_dir)
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    first = answer["related"][0]
    assert (first["item_id"], first["name"], first["path"]) == (
        ids["shelf/crawling.md"],
        "crawling.md",
        "library/shelf/crawling.md",
    )
    assert len(answer["related"]) == 3 and int(celadon) not in {r["item_id"] for r in answer["related"]}
    assert first["score"] > answer["related"][1]["score"]
    why = first["why"]
    assert why["item"]["item_id"] == int(celadon) and why["related"]["item_id"] == ids["shelf/crawling.md"]
    assert "celadon" in why["item"]["snippet"].casefold() and why["related"]["location"]["line_start"] is not None

    as_text = quire_cli("related", "kb", celadon, "--limit", "2", data_dir=data_dir)
    assert as_text.returncode == 0, as_text.stderr
    lines = as_text.stdout.splitlines()
    assert lines[0].startswith(" 1. ") and lines[0].endswith(" library/shelf/crawling.md")
    assert lines[1].startswith("    this #0 l.") and "celadon" in lines[1].casefold()
    assert lines[2].startswith("    that #0 l.") and "crawl" in lines[2].casefold()

    extra = write_tree(tmp_path / "later", {"tenmoku.md": "Tenmoku glazes break brown on the rims of tea bowls.\n"})
    pending = operations.add_items(quire, "kb", [operations.PathInput(extra / "tenmoku.md")]).created[0]
    refused = quire_cli("--json", "related", "kb", str(pending), data_dir=data_dir)
    assert refused.returncode == 5, refused.stdout  # refused, as `chunks` refuses an item not indexed yet
    assert json.loads(refused.stdout)["error"]["code"] == "not_indexed"
    assert quire_cli("related", "kb", "999999", data_dir=data_dir).returncode == 3
    assert quire_cli("related", "kb", celadon, "--limit", "0", data_dir=data_dir).returncode == 2


def test_mcp_related_is_audited_and_keeps_to_the_subtree(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_related_base(quire, tmp_path)
    server = QuireMCP(quire, agent="claude").server

    async def session() -> list[dict[str, Any]]:
        async with Client(server) as client:
            asked = {"base": "kb", "item": ids["shelf/pyproject.md"], "limit": 3}
            near = payload(await client.call_tool("related", asked))
            boat = payload(await client.call_tool("related", {**asked, "limit": 5, "subtree": ids["boat"]}))
            gone = error_text(await client.call_tool("related", {"base": "kb", "item": ids["boat"] + 1000}))
            return [near, boat, {"error": gone}]

    near, boat, missing = run(session)
    first = near["related"][0]
    assert first["item"]["id"] == ids["desk/wheels.md"] and first["item"]["path"] == "library/desk/wheels.md"
    assert near["item"]["id"] == ids["shelf/pyproject.md"] and len(near["related"]) == 3
    passage = first["why"]["related_passage"]
    assert passage["citation"] == f"quire:{base}:{ids['desk/wheels.md']}:0" and "wheel" in passage["snippet"]
    assert first["why"]["item_passage"]["citation"] == f"quire:{base}:{ids['shelf/pyproject.md']}:0"
    assert {r["item"]["id"] for r in boat["related"]} == {ids["boat/reefing.md"], ids["boat/tides.md"]}
    assert "not_found: item" in missing["error"]
    calls = [e for e in audit.list_entries(quire.db, actions=[audit.AGENT_CALL]) if e.payload["tool"] == "related"]
    assert [(e.actor, e.payload["ok"]) for e in calls] == [
        ("agent:claude", True),
        ("agent:claude", True),
        ("agent:claude", False),
    ]


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_an_agent_never_sees_related_documents_kept_from_agents(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_related_base(quire, tmp_path)
    by_id = {v: k for k, v in ids.items()}
    agent_exclusions.exclude_from_agents(quire, base, ids["shelf"])  # a person keeps a folder from agents
    with acting_as(Principal.agent("claude")):
        seen = {by_id[r.item_id] for r in related(quire, base, ids["desk/celadon.md"], limit=10)}
        with pytest.raises(NotFound):
            related(quire, base, ids["shelf/crawling.md"])  # as if it never existed
        inside = related(quire, base, ids["desk"], limit=10)
    assert seen == {"desk/wheels.md", "boat/reefing.md", "boat/tides.md"}  # not the nearest: it is kept
    assert {by_id[r.item_id] for r in inside} == {"boat/reefing.md", "boat/tides.md"}
    person = related(quire, base, ids["desk/celadon.md"], limit=1)  # the person still sees everything
    assert by_id[person[0].item_id] == "shelf/crawling.md"
