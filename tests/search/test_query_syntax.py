"""The query syntax on the operation, the CLI and MCP, from one table of cases (tests/support/query_cases.py).

The corpus is indexed once per module and engine by the real worker process: in a data directory, and in a
team store (PostgreSQL) that every ``quire`` process of the module reaches through QUIRE_STORE, as a
person's shell would. The window runs the same table in tests/app/test_query_syntax_window.py.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp import Client

from knowledge.agents.server import QuireMCP, RateLimit
from knowledge.compose import open_quire, open_team_quire
from knowledge.errors import InvalidInput
from knowledge.runtime import Quire
from knowledge.search import search
from knowledge.search.candidates import Candidate
from knowledge.search.rerank import RRF, Candidates, FusionReranker, active_fusion
from tests.agents.helpers import run
from tests.conftest import quire_cli
from tests.support.engine_fixtures import ENGINES, QUEUE_ENV, STORE_ENV
from tests.support.query_cases import CASES, Case, indexed_data_dir, judge

pytestmark = pytest.mark.model
LIMIT = 10


@pytest.fixture(scope="module", params=ENGINES)
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The machine's data directory; on PostgreSQL the store is named by QUIRE_STORE for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(QUEUE_ENV, raising=False)
        mp.delenv(STORE_ENV, raising=False)
        if request.param == "postgresql":
            server = request.getfixturevalue("postgres_server")
            url = server.create_database(f"quire_syntax_{uuid.uuid4().hex[:12]}")
            made = quire_cli("store", "init", url, data_dir=tmp_path_factory.mktemp("init"))
            assert made.returncode == 0, made.stderr
            mp.setenv(STORE_ENV, url)
        with pytest.MonkeyPatch.context() as config:
            config.setenv("QUIRE_CONFIG_DIR", str(tmp_path_factory.mktemp("user-config")))
            data_dir = indexed_data_dir(tmp_path_factory.mktemp("syntax"))
        yield data_dir


@pytest.fixture(scope="module")
def opened(indexed: Path) -> Iterator[Quire]:
    url = os.environ.get(STORE_ENV)
    quire = open_team_quire(url, data_dir=indexed) if url else open_quire(indexed)
    yield quire
    quire.close()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_operation(case: Case, opened: Quire) -> None:
    try:
        hits = search(opened, "kb", case.query, mode=case.mode, limit=LIMIT)
    except InvalidInput as exc:
        assert judge(case, None, str(exc)) is None, judge(case, None, str(exc))
        return
    names = [h.item_name for h in hits]
    assert judge(case, names, None) is None, judge(case, names, None)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_cli(case: Case, indexed: Path) -> None:
    result = quire_cli(
        "--json", "search", "kb", *_query_args(case.query), "--mode", case.mode, "--limit", str(LIMIT), data_dir=indexed
    )
    answer = json.loads(result.stdout) if result.stdout.strip() else {}
    if case.error is not None:
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        message = answer["error"]["message"]
        assert judge(case, None, message) is None, judge(case, None, message)
        return
    assert result.returncode == 0, (result.stdout, result.stderr)
    names = [h["item_name"] for h in answer["hits"]]
    assert judge(case, names, None) is None, judge(case, names, None)


def _query_args(query: str) -> tuple[str, ...]:
    """As a person types it: the positional argument, or --query=… for one that begins with "-"."""
    return (f"--query={query}",) if query.startswith("-") else (query,)


def test_mcp_from_the_same_table(opened: Quire) -> None:
    # the table is longer than the default burst (40 calls) and an idle machine asks faster than the refill;
    # the limits have their own tests (tests/security/test_agent_limits.py), this one reads the answers
    calls = len(CASES)
    rate = RateLimit(burst=calls, global_burst=calls)
    server = QuireMCP(opened, agent="claude", rate=rate).server
    wrong: dict[str, str] = {}

    async def session() -> None:
        async with Client(server) as client:
            for case in CASES:
                result = await client.call_tool(
                    "search", {"base": "kb", "query": case.query, "mode": case.mode, "limit": LIMIT}
                )
                if result.is_error:
                    problem = judge(case, None, str(result.content[0].text))  # type: ignore[union-attr]
                else:
                    answer = result.structured_content or json.loads(result.content[0].text)  # type: ignore[union-attr]
                    problem = judge(case, [h["item"]["name"] for h in answer["hits"]], None)
                if problem is not None:
                    wrong[case.id] = problem

    run(session)
    assert wrong == {}


def test_phrases_and_identifiers_are_highlighted_whole(opened: Quire) -> None:
    hit = search(opened, "kb", '"tidal silt budget" ABC-1234', mode="keyword", limit=1)[0]
    marked = [hit.snippet[s:e] for s, e in hit.highlights]
    assert "tidal silt budget" in marked and "ABC-1234" in marked


def test_filters_apply_before_the_top_k_cut(opened: Quire) -> None:
    """A filtered document that is not among the unfiltered best still comes back with limit=1."""
    for mode in ("keyword", "hybrid", "vector"):
        unfiltered = search(opened, "kb", "harbour dredging", mode=mode, limit=1)
        assert unfiltered and unfiltered[0].item_name != "gamma.html"
        only = search(opened, "kb", 'harbour dredging in:"Lab notes" type:html', mode=mode, limit=1)
        assert [h.item_name for h in only] == ["gamma.html"], mode


def test_a_hit_shows_the_notes_that_link_to_its_document(opened: Quire, indexed: Path) -> None:
    """[[alpha]] (by name, another case) and [[Lab notes/delta]] (by path) resolve; a note's link to itself
    ([[Alpha#Summary]]) does not count; documents nothing links to have none."""
    linked = {h.item_name: [b.name for b in h.linked_from] for h in search(opened, "kb", "harbour", limit=20)}
    assert linked["alpha.md"] == ["delta.md"]
    assert linked["delta.md"] == ["alpha.md"]
    assert all(not names for name, names in linked.items() if name not in ("alpha.md", "delta.md")), linked

    result = quire_cli("--json", "search", "kb", '"tidal silt budget"', "--mode", "keyword", data_dir=indexed)
    hit = json.loads(result.stdout)["hits"][0]
    assert hit["item_name"] == "alpha.md" and [b["name"] for b in hit["linked_from"]] == ["delta.md"]
    text = quire_cli("search", "kb", '"tidal silt budget"', "--mode", "keyword", data_dir=indexed).stdout
    assert "linked from: delta.md" in text


FUSION_QUERY = "harbour dredging silt"


def _ranked(hits: list[dict[str, object]]) -> list[tuple[object, float]]:
    return [(h["chunk_id"], round(float(h["score"]), 6)) for h in hits]  # type: ignore[arg-type]


def test_the_fusion_chosen_reaches_the_search_on_every_surface(opened: Quire, indexed: Path) -> None:
    """``hybrid`` (the fitted fusion) and ``hybrid-rrf`` score differently; the CLI and MCP return exactly what
    the operation returns for the mode they were given, so each passes the choice through."""
    expected = {
        mode: [(h.chunk_id, round(h.score, 6)) for h in search(opened, "kb", FUSION_QUERY, mode=mode, limit=LIMIT)]
        for mode in ("hybrid", "hybrid-rrf")
    }
    assert expected["hybrid"] != expected["hybrid-rrf"]
    # RRF's scores are sums of 0.5 / (5 + rank): the best is at most 1/6
    assert 0 < expected["hybrid-rrf"][0][1] <= 1 / 6 + 1e-6
    for mode, want in expected.items():
        result = quire_cli(
            "--json", "search", "kb", FUSION_QUERY, "--mode", mode, "--limit", str(LIMIT), data_dir=indexed
        )
        assert result.returncode == 0, result.stderr
        assert _ranked(json.loads(result.stdout)["hits"]) == want, mode

    server = QuireMCP(opened, agent="claude").server
    by_mcp: dict[str, list[tuple[object, float]]] = {}

    async def session() -> None:
        async with Client(server) as client:
            for mode in expected:
                result = await client.call_tool(
                    "search", {"base": "kb", "query": FUSION_QUERY, "mode": mode, "limit": LIMIT}
                )
                answer = result.structured_content or json.loads(result.content[0].text)  # type: ignore[union-attr]
                by_mcp[mode] = [(h["chunk_id"], round(float(h["score"]), 6)) for h in answer["hits"]]

    run(session)
    assert by_mcp == expected


@dataclass
class _ByWordCount:
    """A reranker of the test's own: orders the candidates by how often ``word`` occurs in their text (ties by
    id), and keeps what it was handed so the test can check the seam's inputs."""

    word: str
    seen: list[Candidates] = field(default_factory=list)
    name: str = "word count"
    needs_texts: bool = True

    def rerank(self, candidates: Candidates, depth: int) -> list[tuple[Candidate, float]]:
        self.seen.append(candidates)
        rows = {c.id: c for c, _s in (*candidates.by_vector, *candidates.by_keyword)}
        counts = {cid: candidates.texts[cid].lower().count(self.word) for cid in rows}
        ordered = sorted(rows, key=lambda cid: (-counts[cid], cid))[:depth]
        return [(rows[cid], float(counts[cid])) for cid in ordered]


def test_a_reranker_given_to_search_orders_what_both_rankings_found(opened: Quire) -> None:
    """The seam: hybrid search hands both rankings (and, when asked, the candidates' texts) to the reranker
    and returns its order; without one, each hybrid mode uses the fusion it ships with."""
    ranker = _ByWordCount("silt")
    hits = search(opened, "kb", FUSION_QUERY, mode="hybrid", limit=LIMIT, reranker=ranker)
    (given,) = ranker.seen
    assert given.by_vector and given.by_keyword and set(given.texts) == set(given.ids())
    assert given.terms == ("harbour", "dredging", "silt")
    counts = [h.text.lower().count("silt") for h in hits]
    assert counts == sorted(counts, reverse=True) and counts[0] > 0
    assert [h.score for h in hits] == [float(c) for c in counts]
    assert {h.chunk_id for h in hits} <= set(given.ids())

    for mode in ("hybrid", "hybrid-rrf"):
        shipped = FusionReranker(active_fusion() if mode == "hybrid" else RRF)
        assert [(h.chunk_id, h.score) for h in search(opened, "kb", FUSION_QUERY, mode=mode, limit=LIMIT)] == [
            (h.chunk_id, h.score) for h in search(opened, "kb", FUSION_QUERY, mode=mode, limit=LIMIT, reranker=shipped)
        ]
    vector_only = search(opened, "kb", FUSION_QUERY, mode="vector", limit=LIMIT, reranker=_ByWordCount("silt"))
    assert vector_only == search(opened, "kb", FUSION_QUERY, mode="vector", limit=LIMIT)  # only hybrid reranks


def test_filters_alone_answer_as_a_listing_on_the_cli_and_mcp(opened: Quire, indexed: Path) -> None:
    """The answer says it is a listing (mode ``filter``), one hit per document with a snippet, newest first
    and cut at ``limit``; the CLI's text shows no relevance score for it."""
    result = quire_cli("--json", "search", "kb", "tag:dredging", data_dir=indexed)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["mode"] == "filter"
    assert [(h["item_name"], h["score"]) for h in answer["hits"]] == [("alpha.md", 1.0)]
    assert "harbour dredging" in answer["hits"][0]["snippet"]
    cut = quire_cli("--json", "search", "kb", "after:2024-01 before:2024-12", "--limit", "2", data_dir=indexed)
    assert [h["item_name"] for h in json.loads(cut.stdout)["hits"]] == ["epsilon.pdf", "delta.md"]
    text = quire_cli("search", "kb", "type:pdf", data_dir=indexed).stdout
    assert text.startswith(" 1. ") and "epsilon.pdf" in text.splitlines()[0] and "1.0000" not in text

    server = QuireMCP(opened, agent="claude").server
    answers: list[dict[str, object]] = []

    async def session() -> None:
        async with Client(server) as client:
            result = await client.call_tool("search", {"base": "kb", "query": "type:markdown after:2024-01"})
            answers.append(result.structured_content or json.loads(result.content[0].text))  # type: ignore[union-attr]

    run(session)
    assert answers[0]["mode"] == "filter"
    assert [h["item"]["name"] for h in answers[0]["hits"]] == ["delta.md", "alpha.md"]  # type: ignore[attr-defined]


def test_a_document_being_deleted_is_never_listed(indexed: Path, tmp_path: Path) -> None:
    """A delete committed (the worker has not removed the chunks yet) leaves the document out of a listing."""
    if os.environ.get(STORE_ENV):
        pytest.skip("a copy of the data directory shares the team store; the SQLite run deletes in its copy")
    data = shutil.copytree(indexed, tmp_path / "data")
    items = json.loads(quire_cli("--json", "items", "kb", data_dir=data).stdout)["items"]
    alpha = next(i["id"] for i in items if i["name"] == "alpha.md")
    deleted = quire_cli("--json", "delete", "kb", str(alpha), data_dir=data)
    assert json.loads(deleted.stdout)["statuses"] == {str(alpha): "deleting"}, deleted.stderr  # no worker runs here
    for query, names in (("tag:dredging", []), ("type:markdown", ["delta.md"])):
        result = quire_cli("--json", "search", "kb", query, data_dir=data)
        assert result.returncode == 0, result.stderr
        assert [h["item_name"] for h in json.loads(result.stdout)["hits"]] == names, query
