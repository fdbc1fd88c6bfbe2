"""Keyword ranking parity between the engines on the whole SciFact corpus and all 809 training queries.

``python -m tests.benchmarks.bench_keyword_parity`` writes ``results/keyword_parity.json``. It isolates what
differs between the engines' keyword search — the analyzer and the ranking — from everything that does
not (chunking, embedding): each document (title and abstract) is one row of a real base's keyword table on
a SQLite store (FTS5, porter unicode61, BM25) and on a team store (PostgreSQL from its wheel, loopback),
filled with the same texts; every query goes through Quire's own match-string builder
(``search.keyword_query.fts_query``) and each engine's own ranking function. PostgreSQL is ranked two ways in
the same run: ``ts_rank_cd`` and Quire's BM25 (``index_postgres.keyword_matches``). The local store's
keyword index (tantivy over FTS5's own tokens, ``knowledge.library.keyword_file``) is ranked in the same run
from the same texts and the same :class:`~knowledge.search.keyword_query.KeywordQuery`, so the analyzer and
BM25 differences between it and FTS5 are measured without a model. No model is loaded.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import tantivy
from sqlalchemy import text

from knowledge.ingest.models import model_spec
from knowledge.library import bases, index_postgres
from knowledge.library.index import fts_table
from knowledge.library.keyword_schema import SCHEMA, Opened, Stamp, analyze, prepared
from knowledge.library.vector_format import BaseKey
from knowledge.search.keyword import ranked_matches
from knowledge.search.keyword_index import KeywordIndex
from knowledge.search.keyword_query import fts_query, keyword_query
from knowledge.store.database import Database
from knowledge.store.migrations import migrate
from knowledge.store.postgres import PostgresDatabase
from tests.benchmarks import corpus, metrics
from tests.benchmarks.common import Result, log, run_benchmark, target
from tests.support.servers import start_postgres

LIMIT = 100
PARITY = 0.01
INDEX_PARITY = 0.005  # the local store's keyword index replaces FTS5's ranking: held closer


def fill(db: Database, data: corpus.SciFact) -> tuple[Any, dict[int, str]]:
    """A base on ``db`` whose keyword table holds one row per document; (the base, row id → document id)."""
    migrate(db)
    spec = model_spec("all-MiniLM-L6-v2")
    base = bases.create_base(db, "scifact", model_id=spec.model_id, dimension=spec.dimension, precision="fp32")
    ids = {n + 1: doc for n, doc in enumerate(data.docs)}
    with db.write() as conn:
        conn.execute(
            text(f"INSERT INTO {fts_table(base.id)} (rowid, text) VALUES (:id, :t)"),
            [{"id": n, "t": data.body(doc)} for n, doc in ids.items()],
        )
    return base, ids


def keyword_index(folder: Path, data: corpus.SciFact) -> tuple[Opened, dict[int, str]]:
    """The same rows as ``fill`` in a tantivy index as the local store keeps it (FTS5's tokens, whitespace-split)."""
    ids = {n + 1: doc for n, doc in enumerate(data.docs)}
    folder.mkdir()
    index = prepared(tantivy.Index(SCHEMA, str(folder), reuse=False))
    writer = index.writer(256_000_000, 2)
    for n, doc in ids.items():
        writer.add_document(tantivy.Document(id=n, item=n, text=" ".join(analyze(data.body(doc)))))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return Opened(index, Stamp(BaseKey(1, 0.0, 384), 1, len(ids))), ids


def rank_index(opened: Opened, data: corpus.SciFact, ids: dict[int, str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for qid, query in data.queries:
        asked = keyword_query(query)
        rows = [] if asked is None else KeywordIndex.top(opened, asked, LIMIT)
        found[qid] = metrics.dedupe(ids[r[0]] for r in rows)
    return found


def rank(db: Database, ranker: Any, base: Any, data: corpus.SciFact, ids: dict[int, str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    with db.read() as conn:
        for qid, query in data.queries:
            match = fts_query(query)
            rows = [] if match is None else ranker(conn, base, match)
            found[qid] = metrics.dedupe(ids[r[0]] for r in rows)
    return found


def sqlite_fts5(conn: Any, base: Any, match: str) -> list[tuple[int, float]]:
    return ranked_matches(conn, SimpleNamespace(id=base.id), match, LIMIT)  # type: ignore[arg-type]


def pg_ts_rank_cd(conn: Any, base: Any, match: str) -> list[tuple[int, float]]:
    tsq = index_postgres.build_tsquery(conn, match)
    if tsq is None:
        return []
    sql = (
        f"SELECT rowid, ts_rank_cd(tsv, q) AS s FROM {fts_table(base.id)}, CAST(:q AS tsquery) q "
        "WHERE tsv @@ q ORDER BY s DESC, rowid LIMIT :n"
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(text(sql), {"q": tsq, "n": LIMIT})]


def pg_bm25(conn: Any, base: Any, match: str) -> list[tuple[int, float]]:
    return index_postgres.keyword_matches(conn, fts_table(base.id), match, LIMIT)


def run() -> Result:
    return run_benchmark("keyword_parity", False, _run)


def _run(result: Result) -> None:
    data = corpus.load(False)
    scores: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lite = Database.in_dir(Path(tmp) / "data")
        base, ids = fill(lite, data)
        started = time.monotonic()
        scores["sqlite_fts5_bm25"] = metrics.evaluate(rank(lite, sqlite_fts5, base, data, ids), data.qrels)
        seconds["sqlite_fts5_bm25"] = time.monotonic() - started
        lite.dispose()
        started = time.monotonic()
        opened, ids = keyword_index(Path(tmp) / "keywords", data)
        seconds["tantivy_index_build"] = time.monotonic() - started
        started = time.monotonic()
        scores["tantivy_bm25"] = metrics.evaluate(rank_index(opened, data, ids), data.qrels)
        seconds["tantivy_bm25"] = time.monotonic() - started
    server = start_postgres()
    try:
        pg = PostgresDatabase(server.create_database("parity"))
        base, ids = fill(pg, data)
        for name, ranker in (("postgresql_ts_rank_cd", pg_ts_rank_cd), ("postgresql_bm25", pg_bm25)):
            started = time.monotonic()
            scores[name] = metrics.evaluate(rank(pg, ranker, base, data, ids), data.qrels)
            seconds[name] = time.monotonic() - started
        pg.dispose()
    finally:
        server.stop()
    for name, s in scores.items():
        log(f"{name}: nDCG@10 {s['ndcg@10']:.4f} R@100 {s['recall@100']:.4f} ({seconds[name]:.1f} s)")
    result.data.update(
        documents=len(data.docs),
        queries=len(data.queries),
        scores=scores,
        seconds_for_all_queries={k: round(v, 1) for k, v in seconds.items()},
    )
    reference = scores["sqlite_fts5_bm25"]["ndcg@10"]
    for name in ("postgresql_ts_rank_cd", "postgresql_bm25"):
        gap = abs(scores[name]["ndcg@10"] - reference)
        result.targets.append(target(f"|nDCG@10 {name} - SQLite FTS5 BM25| (keyword)", gap, at_most=PARITY))
    gap = abs(scores["tantivy_bm25"]["ndcg@10"] - reference)
    result.targets.append(target("|nDCG@10 keyword index (tantivy) - FTS5 BM25| (keyword)", gap, at_most=INDEX_PARITY))


if __name__ == "__main__":
    run()
    sys.exit(0)
