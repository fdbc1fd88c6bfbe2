"""A base's search tables on a team store (PostgreSQL + pgvector): the statements that differ from SQLite's.

``knowledge.library.index`` and the search room pick these through ``for_conn``-style checks of the
connection's dialect in one place each; everything else about a base's material (``chunks``, its float16
copies, the version stamps, the chunk-id counter) is the same SQL on both engines.

* ``vec_base_{id}``: ``rowid bigint`` (a chunk id, named as SQLite's implicit key so joins read the same) and
  ``embedding vector(dim)``. Vectors travel as ``real[]`` both ways (cast to and from ``vector``), so
  callers keep handing float32 arrays.
* ``fts_base_{id}``: ``rowid``, ``text`` and a stored ``tsvector`` generated with the ``english``
  configuration (Snowball stemming: "proteins" finds "protein", as FTS5's porter tokenizer does), under a GIN
  index. Ranking is ``ts_rank_cd`` — not BM25: keyword quality parity with FTS5 is not yet measured, so
  a team store's keyword and hybrid rankings may differ from the desktop's until it is.
* An HNSW index on cosine for large bases is a later step (build after bulk load, iterative scan for
  filtered queries); today vector search reads the float16 copies into memory on both engines.
"""

from __future__ import annotations

import re

import numpy as np
from sqlalchemy import Connection, text

TS_CONFIG = "english"
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def create_base_tables(conn: Connection, vec: str, fts: str, dimension: int) -> None:
    conn.exec_driver_sql(f"CREATE TABLE {vec} (rowid bigint PRIMARY KEY, embedding vector({int(dimension)}) NOT NULL)")
    conn.exec_driver_sql(
        f"CREATE TABLE {fts} (rowid bigint PRIMARY KEY, text text NOT NULL, "
        f"tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}', text)) STORED)"
    )
    conn.exec_driver_sql(f"CREATE INDEX {fts}_tsv ON {fts} USING gin (tsv)")


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


def keyword_sql(fts: str) -> str:
    """Chunks matching ``:q`` (a tsquery built by ``build_tsquery``), best first, with a score (higher is better)."""
    return (
        f"SELECT rowid, ts_rank_cd(tsv, q) AS s FROM {fts}, CAST(:q AS tsquery) q WHERE tsv @@ q "
        "ORDER BY s DESC, rowid LIMIT :n"
    )


def matching_sql(fts: str) -> str:
    return f"SELECT rowid FROM {fts} WHERE tsv @@ CAST(:q AS tsquery)"


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
