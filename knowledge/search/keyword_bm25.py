"""FTS5's ``bm25()`` for chosen chunks, computed exactly from the rows of the search's own snapshot.

Why. The keyword index picks candidates fast, but its own scores depend on its history: tantivy keeps a deleted
or replaced document in its statistics (the document count, the mean length, each term's document frequency)
until a merge rewrites the segment that held it, and every append replaces the index's stamp document the same
way. A long-lived index, one synced after deletes, and one built afresh (an import, a rebuild) then score the
same rows differently (its BM25 is not FTS5's either: idf ln(1 + x) for FTS5's ln x, lengths in one-byte
buckets). So the index only chooses the candidates (:mod:`knowledge.search.keyword`), and each is scored here as
FTS5's ``bm25()`` scores it, from the rows in the search's snapshot: the numbers FTS5 gives when it ranks the
same query itself (a base without a usable index, one another process is writing), whatever the index's past.

What FTS5 computes (``fts5_aux.c``, ``fts5Bm25Function``) and where each input comes from here:

* N and the total length in tokens: the table's averages record (``<table>_data`` row 1: the varint N, then each
  column's total), which FTS5's xRowCount and xColumnTotalSize read (:func:`table_totals`);
* per phrase of the match expression, in order (the required phrases, then the alternatives:
  :meth:`~knowledge.search.keyword_query.KeywordQuery.fts5`), nHit, how many rows hold it: counted by the caller;
* per row, each phrase's instances and the row's length: counted in the chunk's text cut by FTS5's own tokenizer
  (:func:`~knowledge.library.keyword_schema.analyze`), the tokens FTS5 stored for it.

``idf = ln((N - nHit + 0.5) / (nHit + 0.5))``, at least 1e-6; ``score = Σ idf · f(k1 + 1) / (f + k1(1 - b + b·D /
avgdl))`` with k1 = 1.2 and b = 0.75, in FTS5's order of operations, so the same double.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, text

from knowledge.library.index import fts_table
from knowledge.library.keyword_schema import analyze

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's idf for a phrase in more than half the rows


@dataclass(frozen=True)
class Totals:
    """The keyword table's rows and tokens, as FTS5's averages record holds them."""

    rows: int
    tokens: int


def table_totals(conn: Connection, base_id: int) -> Totals:
    """N and the total of tokens of the base's FTS5 table in ``conn``'s snapshot (an empty table: zeros)."""
    row = conn.execute(text(f"SELECT block FROM {fts_table(base_id)}_data WHERE id = 1")).first()
    if row is None or not row[0]:
        return Totals(0, 0)
    block = bytes(row[0])
    rows, at = _varint(block, 0)
    tokens = 0
    while at < len(block):  # one total per column (the table has one)
        count, at = _varint(block, at)
        tokens += count
    return Totals(rows, tokens)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at``: seven bits a byte, high bit set on all but the last; a ninth byte holds eight."""
    value = 0
    for n in range(8):
        byte = data[at + n]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + n + 1
    return (value << 8) | data[at + 8], at + 9


def phrase_tokens(phrases: Sequence[str]) -> list[tuple[str, ...]]:
    """Each phrase cut as FTS5 cuts a quoted query string."""
    return [tuple(analyze(p, query=True)) for p in phrases]


def idfs(hits: Sequence[int], totals: Totals) -> list[float]:
    """FTS5's idf of each phrase, from how many rows hold it."""
    out = []
    for n_hit in hits:
        idf = math.log((totals.rows - n_hit + 0.5) / (n_hit + 0.5)) if totals.rows else 0.0
        out.append(idf if idf > 0.0 else IDF_FLOOR)
    return out


def scores(
    texts: Mapping[int, str], phrases: Sequence[tuple[str, ...]], hits: Sequence[int], totals: Totals
) -> dict[int, float]:
    """``bm25()`` of each chunk in ``texts`` (chunk id → its text) for the match expression's ``phrases``
    (tokens, in the expression's order) held by ``hits`` rows each; higher is better (FTS5 negates it)."""
    if totals.rows == 0 or totals.tokens == 0:
        return dict.fromkeys(texts, 0.0)
    weights = idfs(hits, totals)
    avgdl = float(totals.tokens) / float(totals.rows)
    out: dict[int, float] = {}
    for chunk_id, body in texts.items():
        tokens = analyze(body)
        length = float(len(tokens))
        score = 0.0
        for phrase, idf in zip(phrases, weights, strict=True):
            freq = float(_instances(tokens, phrase))
            score += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * length / avgdl)))
        out[chunk_id] = score
    return out


def _instances(tokens: list[str], phrase: tuple[str, ...]) -> int:
    """How many times ``phrase`` occurs in ``tokens`` at consecutive positions (overlaps count, as in FTS5).
    Found with list.count / list.index, which run in C: a Python loop over every token of every candidate cost
    two thirds of a keyword search at 300,000 chunks (cProfile)."""
    if not phrase:
        return 0
    first = phrase[0]
    if len(phrase) == 1:
        return tokens.count(first)
    rest, span = list(phrase[1:]), len(phrase)
    found, at = 0, -1
    while True:
        try:
            at = tokens.index(first, at + 1)
        except ValueError:
            return found
        if tokens[at + 1 : at + span] == rest:
            found += 1
