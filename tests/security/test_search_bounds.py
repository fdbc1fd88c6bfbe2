"""Searches are bounded: a query over 1,000 characters or 64 distinct terms is refused before anything runs
— by the operation, the CLI (exit 2), an agent's MCP call and the window — and the per-base term-count
cache never grows past its bound, whatever the queries.

Crafted inputs: a 1,100-character query, a query of 65 distinct words, 70 queries of 64 new words each.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mcp import Client
from pytestqt.qtbot import QtBot

from app.cli.main import exit_code_for
from knowledge.agents.server import QuireMCP
from knowledge.errors import InvalidInput
from knowledge.ingest.embedding import Encoder
from knowledge.library import index
from knowledge.library.index import ChunkRow
from knowledge.library.tree import NewItem, create_item
from knowledge.runtime import Quire
from knowledge.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, MODES, search, term_stats
from knowledge.search.keyword_index import KeywordIndex
from tests.agents.helpers import error_text, run
from tests.app.conftest import WindowFactory, create_base, open_window, prompter  # noqa: F401 - fixtures
from tests.conftest import quire_cli
from tests.knowledge.helpers import make_base
from tests.support.fswatch import tree_state

LONG = "lighthouse " * 100  # 1,100 characters, one term
WIDE = " ".join(f"word{n}" for n in range(MAX_QUERY_TERMS + 1))  # 65 distinct terms, ~500 characters


def _fill(quire: Quire, texts: list[str], base_id: int = 1) -> None:
    rng = np.random.default_rng(0)
    with quire.db.write() as conn:
        for n, body in enumerate(texts):
            item = create_item(conn, NewItem(base_id, "note", f"n{n}", "completed", note_text=body))
            vector = rng.normal(size=(1, 384)).astype(np.float32)
            chunk = ChunkRow(0, body, 0, len(body), None, 1, 1, 3, f"h{base_id}-{n}")
            index.write_item_material(conn, base_id, item, [chunk], vector)


@pytest.fixture
def base_with_text(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A base whose keyword searches consult the term counts (the cache is used on every query)."""
    make_base(quire, "kb")
    fillers = [f"filler number {n}" for n in range(30)]  # so that the words below are rare, not common
    _fill(quire, ["the lighthouse keeper logged the tide", "word1 word2 word3", "sourdough bread", *fillers])
    monkeypatch.setattr(term_stats, "EXACT_UP_TO", 0)
    asked: list[str] = []

    def no_encoder(choice: object, query: bool) -> Encoder:
        asked.append(str(choice))
        raise AssertionError("a refused query must never reach an encoder")

    quire.encoder_factory = no_encoder
    return asked


def test_the_operation_refuses_before_anything_runs(quire: Quire, base_with_text: list[str]) -> None:
    for mode in MODES:
        with pytest.raises(InvalidInput, match=f"at most {MAX_QUERY_CHARS:,}") as long:
            search(quire, "kb", LONG, mode=mode)
        with pytest.raises(
            InvalidInput, match=f"65 different words; a query may have at most {MAX_QUERY_TERMS}"
        ) as wide:
            search(quire, "kb", WIDE, mode=mode)
        assert exit_code_for(long.value) == exit_code_for(wide.value) == 2
    assert base_with_text == [] and quire.terms.size() == (0, 0)  # no encoder asked, no term counted
    # at the bounds a query runs: 64 distinct words, 1,000 characters; repeats and stopwords are not terms
    at_bound = " ".join(f"word{n}" for n in range(MAX_QUERY_TERMS))
    assert search(quire, "kb", at_bound, mode="keyword")[0].text == "word1 word2 word3"
    with _ranked_by_fts5(quire):  # the term counts are FTS5's ranker's (the keyword index prunes by itself)
        assert search(quire, "kb", at_bound, mode="keyword")[0].text == "word1 word2 word3"
    assert quire.terms.size() == (1, MAX_QUERY_TERMS)
    repeated = ("the lighthouse " * 67)[:MAX_QUERY_CHARS]
    assert search(quire, "kb", repeated, mode="keyword")[0].text.startswith("the lighthouse")


def test_cli_refuses_with_exit_2_and_mcp_with_an_error(
    quire: Quire, base_with_text: list[str], data_dir: Path, tmp_path: Path
) -> None:
    before = tree_state(tmp_path, skip=data_dir)
    for query, says in ((LONG, "at most 1,000"), (WIDE, f"at most {MAX_QUERY_TERMS}")):
        done = quire_cli("search", "kb", query, "--mode", "keyword", data_dir=data_dir)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
        as_json = quire_cli("--json", "search", "kb", query, data_dir=data_dir)
        error = json.loads(as_json.stdout)["error"]
        assert as_json.returncode == 2 and error["code"] == "invalid_input" and error["exit_code"] == 2
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "q1", "text": WIDE}) + "\n")
    before[queries.name] = tree_state(tmp_path, skip=data_dir)[queries.name]
    assert quire_cli("search", "kb", "--queries-file", str(queries), data_dir=data_dir).returncode == 2
    assert tree_state(tmp_path, skip=data_dir) == before  # nothing outside the data directory touched

    server = QuireMCP(quire, agent="claude").server

    async def session() -> list[str]:
        async with Client(server) as client:
            return [
                error_text(await client.call_tool("search", {"base": "kb", "query": q, "mode": "keyword"}))
                for q in (LONG, WIDE)
            ]

    long, wide = run(session)
    assert "invalid_input: the query is 1,100 characters long; a query may have at most 1,000" in long
    assert f"invalid_input: the query has 65 different words; a query may have at most {MAX_QUERY_TERMS}" in wide
    assert base_with_text == [] and quire.terms.size() == (0, 0)


def test_the_window_shows_the_message_and_runs_nothing(
    qtbot: QtBot,
    open_window: WindowFactory,  # noqa: F811 - the fixture imported above
    data_dir: Path,
) -> None:
    create_base(data_dir, "notes")
    window = open_window()
    qtbot.waitUntil(lambda: window.ctx.base is not None, timeout=10_000)
    panel = window.search_panel
    ran: list[str] = []
    panel.search_fn = lambda quire, base, text, **kw: ran.append(text) or []  # type: ignore[assignment,func-returns-value]
    for query, says in (
        (WIDE, f"a query may have at most {MAX_QUERY_TERMS}"),
        (LONG, "a query may have at most 1,000"),
    ):
        panel.query.setText(query)
        panel.run_search()
        assert says in panel.status.text() and not panel.searching
    assert ran == []
    panel.query.setText("lighthouse")  # a query within bounds does run
    qtbot.waitUntil(lambda: ran == ["lighthouse"], timeout=10_000)


@contextlib.contextmanager
def _ranked_by_fts5(quire: Quire) -> Iterator[None]:
    """Searches rank with FTS5, as where a base has no usable keyword index (one too large to build on the
    spot, or another process rebuilding it): the ranker whose common-term cut counts terms in the cache."""
    kept = quire.keywords
    quire.keywords = KeywordIndex()  # no index files: FTS5 ranks
    try:
        yield
    finally:
        quire.keywords = kept


def test_the_term_cache_never_exceeds_its_bound(quire: Quire, base_with_text: list[str]) -> None:
    with _ranked_by_fts5(quire):
        _fill_the_term_cache(quire)


def _fill_the_term_cache(quire: Quire) -> None:
    batches = 70  # 70 x 64 new words: more than the 4,096 terms a base keeps
    for batch in range(batches):
        words = " ".join(f"w{batch}x{n}" for n in range(MAX_QUERY_TERMS))
        search(quire, "kb", words, mode="keyword")
        bases_kept, terms_kept = quire.terms.size()
        assert bases_kept == 1 and terms_kept == min((batch + 1) * MAX_QUERY_TERMS, term_stats.MAX_TERMS)
    # the most recent query's counts are the ones kept (least recently used go first)
    assert search(quire, "kb", "word1 word2", mode="keyword")[0].text == "word1 word2 word3"
    # and across bases: a small bound, more bases than it keeps
    stats = term_stats.TermStats(max_bases=2, max_terms=3)
    for n in range(4):
        other = make_base(quire, f"other{n}")
        _fill(quire, [f"a{n} b{n}", f"c{n} d{n}"], base_id=other.id)
        with quire.db.read() as conn:
            assert stats.rare_terms(conn, other, [f"a{n}", f"b{n}", f"c{n}", f"d{n}"])
        assert stats.size() == (min(n + 1, 2), 3)
