"""A team store's BM25 counts are kept by the server in the writing transaction and always equal a recount of
the rows; keyword search that scores only the rows that can still reach the top (MaxScore) returns exactly what
scoring every matching row returns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from knowledge.compose import open_team_quire
from knowledge.library import index, index_postgres
from knowledge.library.index import ChunkRow, fts_table
from knowledge.library.tree import NewItem, create_item
from knowledge.runtime import Quire
from knowledge.search.keyword_query import fts_query
from knowledge.store import migrations, pg_term_counts
from tests.knowledge.helpers import make_base

pytestmark = pytest.mark.engines

FTS = fts_table(1)
VOCABULARY = [f"word{n}x" for n in range(300)]


@pytest.fixture
def team(postgres_url: str, tmp_path: Path) -> Iterator[Quire]:
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "local")
    yield quire
    quire.close()


def zipf_texts(count: int, seed: int = 5) -> list[str]:
    """Texts whose words follow a Zipf law: a few words in most rows, most words in a few."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCABULARY) + 1)
    weights /= weights.sum()
    return [" ".join(rng.choice(VOCABULARY, size=int(rng.integers(3, 25)), p=weights)) for _ in range(count)]


def fill(quire: Quire, texts: list[str]) -> list[int]:
    items = []
    rng = np.random.default_rng(0)
    with quire.db.write() as conn:
        for n, body in enumerate(texts):
            item = create_item(conn, NewItem(1, "note", f"n{n}", "completed", note_text=body))
            row = ChunkRow(0, body, 0, len(body), None, 1, 1, 3, f"h{n}")
            index.write_item_material(conn, 1, item, [row], rng.normal(size=(1, 384)).astype(np.float32))
            items.append(item)
    return items


def kept_counts(quire: Quire) -> dict[str, tuple[int, int]]:
    with quire.db.read() as conn:
        rows = conn.execute(text(f"SELECT lexeme, df, words FROM {index_postgres.terms_table(FTS)}")).all()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows if r[1] != 0}


def recount(quire: Quire) -> dict[str, tuple[int, int]]:
    with quire.db.read() as conn:
        words = conn.execute(text(f"SELECT u.lexeme, count(*) FROM {FTS}, unnest(tsv) AS u GROUP BY 1")).all()
        total = conn.execute(text(f"SELECT count(*), coalesce(sum(words), 0) FROM {FTS}")).one()
    found = {r[0]: (int(r[1]), 0) for r in words}
    if total[0]:
        found[""] = (int(total[0]), int(total[1]))
    return found


def every_row_scored(conn: Connection, tsq: str, limit: int) -> list[tuple[int, float]]:
    """BM25's top ``limit`` over every row matching ``tsq`` (no row left unscored)."""
    stats = index_postgres._bm25_stats(conn, FTS, index_postgres.query_lexemes(tsq))
    return index_postgres._scored(conn, FTS, tsq, stats, None, limit)


def test_the_counts_follow_every_write_and_clear(team: Quire) -> None:
    make_base(team)
    items = fill(team, zipf_texts(120))
    assert kept_counts(team) == recount(team)
    with team.db.write() as conn:
        index.clear_items_material(conn, 1, items[:40])
    assert kept_counts(team) == recount(team)
    with team.db.write() as conn:  # a reindex: the item's rows replaced
        row = ChunkRow(0, "word1x word299x word299x", 0, 10, None, 1, 1, 3, "new")
        index.write_item_material(conn, 1, items[50], [row], np.ones((1, 384), dtype=np.float32))
    assert kept_counts(team) == recount(team)
    with team.db.write() as conn:  # cleared to nothing
        index.clear_items_material(conn, 1, items[40:])
    assert kept_counts(team) == recount(team) == {}


def test_a_rolled_back_write_leaves_the_counts_as_they_were(team: Quire) -> None:
    make_base(team)
    fill(team, zipf_texts(30))
    before = kept_counts(team)
    with pytest.raises(RuntimeError), team.db.write() as conn:
        fill_in(conn, "word0x word7x")
        raise RuntimeError("the transaction fails after the write")
    assert kept_counts(team) == before == recount(team)


def fill_in(conn: object, body: str) -> None:
    item = create_item(conn, NewItem(1, "note", "late", "completed", note_text=body))  # type: ignore[arg-type]
    row = ChunkRow(0, body, 0, len(body), None, 1, 1, 3, "late")
    index.write_item_material(conn, 1, item, [row], np.ones((1, 384), dtype=np.float32))  # type: ignore[arg-type]


def test_keyword_rows_are_never_updated_in_place(team: Quire) -> None:
    make_base(team)
    fill(team, ["word1x word2x"])
    with pytest.raises(IntegrityError), team.db.write() as conn:
        conn.execute(text(f"UPDATE {FTS} SET text = 'word3x'"))


def test_a_store_made_before_the_counts_gets_them_counted(team: Quire) -> None:
    make_base(team)
    fill(team, zipf_texts(60))
    with team.db.write() as conn:  # the base as a store made before migration 0027 has it
        pg_term_counts.drop_term_counts(conn, FTS)
        assert conn.execute(text("SELECT to_regclass(:t)"), {"t": index_postgres.terms_table(FTS)}).scalar() is None
        migrations._keyword_term_counts_postgres(conn)
    assert kept_counts(team) == recount(team)


def test_scoring_only_the_rows_that_can_reach_the_top_ranks_as_scoring_all(
    team: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(team)
    fill(team, zipf_texts(600))
    monkeypatch.setattr(index_postgres, "MAX_SCORE_FIRST_ROWS", 10)
    tries: list[list[str] | None] = []
    scored = index_postgres._scored

    def spy(conn, fts, tsq, stats, essential, limit):  # type: ignore[no-untyped-def]
        tries.append(essential)
        return scored(conn, fts, tsq, stats, essential, limit)

    rng = np.random.default_rng(11)
    pruned = 0
    for _ in range(25):
        words = [str(w) for w in rng.choice(VOCABULARY[:120], size=int(rng.integers(2, 6)), replace=False)]
        match = fts_query(" ".join(words))
        assert match is not None
        for limit in (5, 20):
            with team.db.read() as conn:
                tries.clear()
                monkeypatch.setattr(index_postgres, "_scored", spy)
                found = index_postgres.keyword_matches(conn, FTS, match, limit)
                monkeypatch.setattr(index_postgres, "_scored", scored)
                tsq = index_postgres.build_tsquery(conn, match)
                assert tsq is not None
                every = every_row_scored(conn, tsq, limit)
            assert [c for c, _s in found] == [c for c, _s in every]
            assert np.allclose([s for _c, s in found], [s for _c, s in every])
            pruned += tries[-1] is not None  # the answer came before every matching row was scored
    assert pruned >= 10


def test_a_single_words_count_is_read_from_the_counts_and_equals_counting_the_rows(team: Quire) -> None:
    make_base(team)
    fill(team, [*zipf_texts(200), "word1x-word2x hyphenated"])
    with team.db.read() as conn:
        for term in ["word0x", "word42x", "word299x", "absentword", "word1x-word2x"]:
            match = fts_query(term)
            assert match is not None
            counted = index_postgres.build_tsquery(conn, match)
            rows = 0
            if counted is not None:
                sql = f"SELECT count(*) FROM ({index_postgres.matching_sql(FTS)}) AS m"
                rows = int(conn.execute(text(sql), {"q": counted}).scalar_one())
            assert index_postgres.count_matching(conn, FTS, match) == rows


def test_past_the_row_cap_the_best_of_the_rows_read_are_returned_and_enough_of_them(
    team: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(team)
    fill(team, zipf_texts(600))
    monkeypatch.setattr(index_postgres, "MAX_SCORE_FIRST_ROWS", 10)
    monkeypatch.setattr(index_postgres, "MAX_SCORED_ROWS", 40)
    match = fts_query("word0x word1x word2x word90x")
    assert match is not None
    with team.db.read() as conn:
        found = index_postgres.keyword_matches(conn, FTS, match, 20)
        tsq = index_postgres.build_tsquery(conn, match)
        assert tsq is not None
        every = dict(every_row_scored(conn, tsq, 10_000))
    assert len(found) == 20  # as many as asked, though not every matching row was read
    assert all(np.isclose(score, every[chunk]) for chunk, score in found)  # each scored exactly
    assert [s for _c, s in found] == sorted((s for _c, s in found), reverse=True)
