"""A base's search tables on a team store (PostgreSQL + pgvector): the statements that differ from SQLite's.

``knowledge.library.index`` and the search room pick these through ``for_conn``-style checks of the
connection's dialect in one place each; everything else about a base's material (``chunks``, its float16
copies, the version stamps, the chunk-id counter) is the same SQL on both engines.

* ``vec_base_{id}``: ``rowid bigint`` (a chunk id, named as SQLite's implicit key so joins read the same) and
  ``embedding vector(dim)``. Vectors travel as ``real[]`` both ways (cast to and from ``vector``), so
  callers keep handing float32 arrays.
* ``fts_base_{id}``: ``rowid``, ``text`` and a stored ``tsvector`` generated with the ``english``
  configuration (Snowball stemming: "proteins" finds "protein", as FTS5's porter tokenizer does), under a GIN
  index, and ``words`` (the chunk's length for BM25). Ranking is BM25 with FTS5's constants, computed in
  SQL (``keyword_matches``): ``ts_rank_cd`` missed FTS5's keyword nDCG@10 by 0.19 on SciFact.
* Vector search runs in the server (``nearest``): an exact scan of ``vec_base_{id}`` while the base is small,
  and an HNSW index on cosine (``{vec}_hnsw``) once it holds ``HNSW_MIN_ROWS`` rows, built after the rows
  are loaded (``create_hnsw_sql``, by :mod:`knowledge.library.vector_indexes`) and walked with iterative scan, so
  an over-fetched search (hits hidden by a filter or a delete) reads on past ``ef_search``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, text

from knowledge.store.pg_term_counts import create_term_counts, terms_table

TS_CONFIG = "english"
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


# A chunk's length in words for BM25's length normalisation: its last word position. The parser numbers every
# word, stopwords included, so this counts what FTS5 counts as a row's tokens (a stored generated column
# needs an immutable function: this one only reads its argument).
WORDS_FUNCTION = (
    "CREATE OR REPLACE FUNCTION quire_tsv_words(tsvector) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE "
    "AS $$ SELECT coalesce(max(p), 0)::integer FROM unnest($1) AS u, unnest(u.positions) AS p $$"
)


def create_base_tables(conn: Connection, vec: str, fts: str, dimension: int) -> None:
    conn.exec_driver_sql(f"CREATE TABLE {vec} (rowid bigint PRIMARY KEY, embedding vector({int(dimension)}) NOT NULL)")
    if conn.exec_driver_sql("SELECT to_regprocedure('quire_tsv_words(tsvector)')").scalar() is None:
        conn.exec_driver_sql(WORDS_FUNCTION)  # once: replacing it needs its owner, and admins make bases too
    conn.exec_driver_sql(
        f"CREATE TABLE {fts} (rowid bigint PRIMARY KEY, text text NOT NULL, "
        f"tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}', text)) STORED, "
        f"words integer GENERATED ALWAYS AS (quire_tsv_words(to_tsvector('{TS_CONFIG}', text))) STORED)"
    )
    conn.exec_driver_sql(f"CREATE INDEX {fts}_tsv ON {fts} USING gin (tsv)")
    create_term_counts(conn, fts, fill=False)


def existing_tables(conn: Connection, names: tuple[str, ...]) -> set[str]:
    rows = conn.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename IN (:a, :b)"),
        {"a": names[0], "b": names[1]},
    ).all()
    return {r[0] for r in rows}


def insert_vectors(conn: Connection, vec: str, ids: list[int], floats: np.ndarray) -> None:
    conn.execute(
        text(f"INSERT INTO {vec} (rowid, embedding) VALUES (:id, CAST(CAST(:e AS real[]) AS vector))"),
        [{"id": cid, "e": floats[n].tolist()} for n, cid in enumerate(ids)],
    )


def embedding_column(alias: str) -> str:
    """How a select reads a vector: as ``real[]`` (a list of floats, see ``as_array``)."""
    return f"CAST({alias}.embedding AS real[])"


def as_array(value: object) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def as_blob(value: object) -> bytes:
    """A vector read back, as the float32 bytes ``vector_cache.embedding`` keeps on both engines."""
    return as_array(value).tobytes()


def tsquery(match: str) -> str:
    """An FTS5 match string as Quire builds it (``"a" OR "b c"``, ``(… AND …) AND (…)``) as a tsquery text:
    each quoted phrase becomes a phrase of lexemes (``<->``), OR/AND become ``|``/``&``. Only Quire's own
    quoting reaches here (``knowledge.search.query.fts_query``), and every word goes through
    ``plainto_tsquery``-style lexing in SQL (``phrase_sql``), so no person's text is parsed as tsquery syntax."""
    return _QUOTED.sub(lambda m: _phrase_placeholder(m.group(1).replace('""', '"')), match)


def _phrase_placeholder(phrase: str) -> str:
    return "\x00" + phrase + "\x00"


# FTS5's bm25() constants (k1, b) and its floor for a term in more than half the rows
BM25_K1, BM25_B, BM25_MIN_IDF = 1.2, 0.75, 1e-6
_LEXEME = re.compile(r"'((?:[^']|'')*)'")


def keyword_matches(conn: Connection, fts: str, match: str, limit: int) -> list[tuple[int, float]]:
    """Up to ``limit`` (chunk id, score) pairs for an FTS5-style match string, best first, ranked by BM25
    exactly as FTS5 computes it: idf = ln((N - df + 0.5) / (df + 0.5)) (floored at 1e-6), term frequency
    saturated by k1 = 1.2, lengths normalised by b = 0.75 against the base's mean chunk length. N, df and
    the mean length are the snapshot's own (the counts table, kept in the writing transactions). Only chunks
    matching the whole query (its required phrases) rank; each lexeme of the query scores as one term (FTS5
    scores a quoted phrase as one unit).

    Not every matching row is scored (:func:`_max_score`): rows holding one of the rarest lexemes are, and
    the rest only when they could still reach the top — the same ``limit`` rows, found by reading far fewer."""
    tsq = build_tsquery(conn, match)
    if tsq is None:
        return []
    stats = _bm25_stats(conn, fts, query_lexemes(tsq))
    return _max_score(conn, fts, tsq, stats, limit)


def query_lexemes(tsq: str) -> list[str]:
    """The distinct lexemes of a tsquery text, in order (each scores as one BM25 term)."""
    return list(dict.fromkeys(m.replace("''", "'") for m in _LEXEME.findall(tsq)))


@dataclass(frozen=True)
class _Bm25Stats:
    idf: dict[str, float]
    df: dict[str, int]
    avgdl: float
    rows: int


def _bm25_stats(conn: Connection, fts: str, lexemes: list[str]) -> _Bm25Stats:
    rows = conn.execute(
        text(f"SELECT lexeme, df, words FROM {terms_table(fts)} WHERE lexeme = ANY(CAST(:l AS text[]))"),
        {"l": ["", *lexemes]},
    ).all()
    found = {str(r[0]): (int(r[1]), int(r[2])) for r in rows}
    n, words = found.get("", (0, 0))
    df = {lex: found.get(lex, (0, 0))[0] for lex in lexemes}
    idf = {lex: max(math.log((n - d + 0.5) / (d + 0.5)), BM25_MIN_IDF) for lex, d in df.items()}
    return _Bm25Stats(idf, df, max(words / n, 1.0) if n else 1.0, n)


# Rows holding one of the rarest lexemes first, up to this many of them (by their df), before any bound is tried
MAX_SCORE_FIRST_ROWS = 5_000
# A query whose top is not proven by then ranks the best of the rows read so far, once they are enough: reading
# every row a common-ish term holds costs seconds at a million chunks (recall@10 against the exact ranking at
# 1,000,000 chunks in docs/BENCHMARKS.md, "Search at scale on a team store")
MAX_SCORED_ROWS = 20_000


def _max_score(conn: Connection, fts: str, tsq: str, stats: _Bm25Stats, limit: int) -> list[tuple[int, float]]:
    """BM25's top ``limit`` by MaxScore: a lexeme adds less than (k1 + 1) x its idf to any row's score, so once
    the ``limit``-th best score among the rows holding one of the "essential" lexemes (the rarest) is at least
    the sum of that bound over the others, no row holding only the others can reach the top. Essential lexemes
    are added rarest first until that holds (all of them: every matching row scored), or until the next try
    would read more than ``MAX_SCORED_ROWS`` rows while this one found ``limit``: then its top is the answer
    (never on a base of fewer rows: its ranking is exact)."""
    order = sorted(stats.df, key=lambda lex: (stats.df[lex], lex))
    count, budget = max(1, _rarest_within(order, stats.df, MAX_SCORE_FIRST_ROWS)), MAX_SCORE_FIRST_ROWS
    while True:
        essential, rest = order[:count], order[count:]
        rows = _scored(conn, fts, tsq, stats, essential if rest else None, limit)
        bound = sum((BM25_K1 + 1) * stats.idf[lex] for lex in rest)
        if not rest or (len(rows) >= limit and rows[limit - 1][1] >= bound):
            return rows[:limit]
        budget *= 4  # each try reads about four times the rows of the one before: a few tries at most
        following = max(count + 1, _rarest_within(order, stats.df, budget))
        reading = min(sum(stats.df[lex] for lex in order[:following]), stats.rows)  # a base's rows at most
        if len(rows) >= limit and reading > MAX_SCORED_ROWS:
            return rows[:limit]
        count = following


def _rarest_within(order: list[str], df: dict[str, int], budget: int) -> int:
    """How many of the rarest lexemes (``order``) hold at most ``budget`` rows between them."""
    seen = 0
    for n, lex in enumerate(order):
        seen += df[lex]
        if seen > budget:
            return n
    return len(order)


def _scored(
    conn: Connection, fts: str, tsq: str, stats: _Bm25Stats, essential: list[str] | None, limit: int
) -> list[tuple[int, float]]:
    """The ``limit`` best rows matching ``tsq`` (and holding an ``essential`` lexeme, when given), scored over
    every query lexeme."""
    lexemes = list(stats.idf)
    params: dict[str, object] = {
        "q": tsq,
        "lexemes": lexemes,
        "weights": [stats.idf[lex] for lex in lexemes],
        "avgdl": stats.avgdl,
        "n": limit,
    }
    narrow = ""
    if essential is not None:
        narrow = (
            " AND m.tsv @@ CAST(array_to_string(ARRAY(SELECT quote_literal(e) FROM unnest(CAST(:essential AS text[]))"
            " AS e), ' | ') AS tsquery)"
        )
        params["essential"] = essential
    rows = conn.execute(text(_bm25_sql(fts, narrow)), params).all()
    return [(int(r[0]), float(r[1])) for r in rows]


# Each matching row yields one tuple per query lexeme it holds, not one per lexeme it holds: setweight marks
# the query's lexemes 'A' (a stored to_tsvector carries weight D throughout) and ts_filter keeps only those, in
# C, before unnest. Unnesting whole rows was 70 % of a query on SciFact (~108 lexemes a row, ~1.5 of them the
# query's); the scores are the same.
def _bm25_sql(fts: str, narrow: str) -> str:
    k1, b = BM25_K1, BM25_B
    return f"""
SELECT m.rowid,
       sum(idf.w * (cardinality(u.positions) * {k1 + 1})
           / (cardinality(u.positions) + {k1} * (1 - {b} + {b} * m.words / CAST(:avgdl AS float8)))) AS s
  FROM {fts} AS m
 CROSS JOIN LATERAL unnest(ts_filter(setweight(m.tsv, 'A', CAST(:lexemes AS text[])), '{{a}}'))
       AS u(lexeme, positions, weights)
  JOIN unnest(CAST(:lexemes AS text[]), CAST(:weights AS float8[])) AS idf(lex, w) ON idf.lex = u.lexeme
 WHERE m.tsv @@ CAST(:q AS tsquery){narrow}
 GROUP BY m.rowid
 ORDER BY s DESC, m.rowid
 LIMIT :n"""


def matching_sql(fts: str) -> str:
    return f"SELECT rowid FROM {fts} WHERE tsv @@ CAST(:q AS tsquery)"


def count_matching(conn: Connection, fts: str, match: str) -> int:
    """How many rows of ``fts`` match an FTS5-style match string (0 when every word is a stopword): a single
    lexeme's count is read from the counts table, anything else (a phrase, an OR) is counted."""
    query = build_tsquery(conn, match)
    if query is None:
        return 0
    single = _LEXEME.fullmatch(query.strip("() "))
    if single is not None:
        lexeme = single.group(1).replace("''", "'")
        found = conn.execute(text(f"SELECT df FROM {terms_table(fts)} WHERE lexeme = :l"), {"l": lexeme}).scalar()
        return int(found or 0)
    return int(conn.execute(text(f"SELECT count(*) FROM ({matching_sql(fts)}) AS m"), {"q": query}).scalar_one())


def build_tsquery(conn: Connection, match: str) -> str | None:
    """The tsquery text for an FTS5-style match string: phrases lexed by PostgreSQL itself
    (``phraseto_tsquery``), joined with the match string's own AND/OR. None when nothing is left
    (every word a stopword)."""
    parts = tsquery(match).split("\x00")
    out: list[str] = []
    for n, part in enumerate(parts):
        if n % 2 == 1:
            lexed = conn.execute(
                text(f"SELECT CAST(phraseto_tsquery('{TS_CONFIG}', :p) AS text)"), {"p": part}
            ).scalar_one()
            out.append(f"({lexed})" if lexed else "")
        else:
            out.append(part.replace(" OR ", " | ").replace(" AND ", " & "))
    joined = "".join(out)
    return _drop_empty(joined)


def _drop_empty(query: str) -> str | None:
    """Remove operands that lexed to nothing (stopwords) and the operators left dangling around them."""
    cleaned = query
    for _ in range(8):
        before = cleaned
        cleaned = re.sub(r"\(\s*\)", "", cleaned)
        cleaned = re.sub(r"^\s*[|&]\s*|\s*[|&]\s*$", "", cleaned)
        cleaned = re.sub(r"([|&(])\s*[|&]", r"\1", cleaned)
        cleaned = re.sub(r"[|&]\s*\)", ")", cleaned)
        if cleaned == before:
            break
    return cleaned.strip() or None


# -- vector search ------------------------------------------------------------------------------------

HNSW_MIN_ROWS = 20_000  # below this an exact scan answers (as EXACT_SCAN_MAX on the local engine)
# Measured at 1,000,000 chunks (docs/BENCHMARKS.md, "Search at scale on a team store"): recall@10 against the
# exact scan 0.64 with pgvector's defaults (m 16, ef_construction 64, ef_search 100), 0.94 at ef_search 1000;
# with m 32 and ef_construction 128 (2.9x the build: 476 s) 0.81 at ef_search 100 and 0.966 at 1000, ~14 ms.
HNSW_M, HNSW_EF_CONSTRUCTION = 32, 128
EF_SEARCH = 1000  # pgvector's most; the graph's walk is a few ms of a search that waits on keyword ranking


def hnsw_name(vec: str) -> str:
    return f"{vec}_hnsw"


def nearest(conn: Connection, vec: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows of ``vec`` nearest ``query`` as (chunk id, cosine distance), nearest first: through the
    HNSW index when the base has one, else an exact scan. Iterative scan in relaxed order lets a ``k`` above
    ``ef_search`` keep walking the graph; the few hits it leaves out of order are sorted here (ties by chunk
    id, as the local engine breaks them). Sequential scans are off for this one statement: on a base that
    has its index the planner's cost estimate may still prefer a scan of every row (a small base, statistics
    not gathered yet after a bulk load), and without an index the scan is the only plan left anyway."""
    conn.execute(
        text(
            "SELECT set_config('hnsw.ef_search', :ef, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('enable_seqscan', 'off', true)"
        ),
        {"ef": str(EF_SEARCH)},
    )
    try:
        rows = conn.execute(
            text(f"SELECT rowid, embedding <=> CAST(CAST(:q AS real[]) AS vector) AS d FROM {vec} ORDER BY d LIMIT :k"),
            {"q": np.asarray(query, dtype=np.float32).tolist(), "k": k},
        ).all()
    finally:  # the rest of the caller's transaction plans as always
        conn.execute(text("SELECT set_config('enable_seqscan', 'on', true)"))
    return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda pair: (pair[1], pair[0]))


def hnsw_state(conn: Connection, vec: str) -> str | None:
    """``"valid"``, ``"invalid"`` (a concurrent build that did not finish) or None (no index)."""
    valid = conn.execute(
        text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"), {"name": hnsw_name(vec)}
    ).scalar()
    return None if valid is None else ("valid" if valid else "invalid")


def create_hnsw_sql(vec: str) -> str:
    """Built concurrently (outside a transaction): writes and searches go on while it is built."""
    return (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {hnsw_name(vec)} ON {vec} USING hnsw (embedding vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
    )


def drop_hnsw_sql(vec: str) -> str:
    return f"DROP INDEX CONCURRENTLY IF EXISTS {hnsw_name(vec)}"


def hnsw_builder_name(base_id: int) -> str:
    """The application name a build's connection carries, so a base's delete can find and cancel it."""
    return f"quire hnsw base {int(base_id)}"


def cancel_hnsw_builds(conn: Connection, base_id: int) -> None:
    """Cancel this role's builds of the base's index (before its tables are dropped: ``DROP TABLE`` would wait
    for a build under the store's write lock); another role's build is left to finish (cancelling it needs
    rights this role may not have)."""
    conn.execute(
        text(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = :name AND usename = session_user AND pid <> pg_backend_pid()"
        ),
        {"name": hnsw_builder_name(base_id)},
    )
