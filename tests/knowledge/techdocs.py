"""The second judged retrieval set: Python standard-library documentation, questions a person would ask.

``data/techdocs.jsonl.gz`` holds 240 documents (0.5 M characters, 300 to 6,000 each), one per standard-library
module of Python 3.11 (its docstring, then each public function, class and method with its signature and the
first paragraph of its docstring; rebuilt by ``tests/benchmarks/techdocs_corpus.py``; PSF licence).
``data/techdocs_queries.jsonl`` holds the questions, each with graded judgements written by reading the
documents (2: the module that answers it, 1: one that answers part of it or documents the same thing from
another side; every other document 0). No model was in the loop.

The questions are split once, by their ``half`` field: ``tune`` may be read, searched and inspected while
working on ranking or fusion; ``held_out`` is what tests/knowledge/test_techdocs.py asserts on and must never
be used to choose or fit anything (weights, features, thresholds, stop words, chunking). A change that helps
only after looking at held-out results must be judged on new questions, not on these.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path

from knowledge.runtime import Quire
from knowledge.search import Hit, search

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "techdocs.jsonl.gz"
QUERIES = DATA / "techdocs_queries.jsonl"
MODES = ("keyword", "vector", "hybrid")


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    kind: str  # identifier | how-to | paraphrase
    half: str  # tune | held_out
    relevant: dict[str, int]


def documents() -> dict[str, str]:
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        return {d["id"]: d["text"] for d in map(json.loads, f)}


def questions(half: str | None = None) -> list[Question]:
    out = [Question(**json.loads(line)) for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [q for q in out if half is None or q.half == half]


def write_folder(folder: Path) -> int:
    """The corpus as one text file per module (``urllib.parse.txt``), as a person's folder would hold it."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = documents()
    for doc_id, text in docs.items():
        (folder / f"{doc_id}.txt").write_text(text, encoding="utf-8")
    return len(docs)


def ranked_documents(hits: list[Hit]) -> list[str]:
    """A ranked hit list's documents, first appearance only (a document ranks where its best chunk ranks)."""
    return list(dict.fromkeys(Path(h.item_name).stem for h in hits))


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    """Graded nDCG@10 (linear gains): discounted gain of the top ten over the ideal ordering's."""
    gain = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return gain / ideal


def rankings(quire: Quire, base: str, chosen: list[Question], limit: int = 30) -> dict[str, dict[str, list[str]]]:
    """Every question's ranked documents in every mode: {mode: {question id: [document id, ...]}}."""
    return {
        mode: {q.id: ranked_documents(search(quire, base, q.text, mode=mode, limit=limit)) for q in chosen}
        for mode in MODES
    }


def per_query(quire: Quire, base: str, chosen: list[Question], limit: int = 30) -> dict[str, dict[str, float]]:
    """nDCG@10 of every question in every mode: {mode: {question id: score}}."""
    return scored(rankings(quire, base, chosen, limit), chosen)


def scored(ranked: dict[str, dict[str, list[str]]], chosen: list[Question]) -> dict[str, dict[str, float]]:
    return {mode: {q.id: ndcg_at_10(ranked[mode][q.id], q.relevant) for q in chosen} for mode in ranked}


def means(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    return {mode: round(sum(s.values()) / len(s), 4) for mode, s in scores.items()}
