"""SciFact as files on disk, its training queries and relevance judgements.

Each document becomes one UTF-8 file ``<doc id>.txt`` holding ``title + "\\n\\n" + text``, in
sub-folders of at most 200 files (``part-000/``, …) so that the very same tree can be ingested with one
``quire add`` of the root and with one folder run per sub-folder (a run's default cap is 200).

``--quick`` uses 1,000 documents: every document judged relevant to the first 150 training queries
that have judgements, filled up with other documents in corpus order; only those queries are scored.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.common import scifact_dir

PER_FOLDER = 200
QUICK_DOCS = 1000
QUICK_QUERIES = 150


@dataclass(frozen=True)
class SciFact:
    docs: dict[str, dict[str, str]]  # id -> {"title", "text"}, in corpus order
    queries: list[tuple[str, str]]  # (id, text) of training queries with judgements
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade}

    def body(self, doc_id: str) -> str:
        doc = self.docs[doc_id]
        return f"{doc['title']}\n\n{doc['text']}"


def load(quick: bool = False) -> SciFact:
    root = scifact_dir()
    corpus: dict[str, dict[str, str]] = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                corpus[str(d["_id"])] = {"title": d.get("title", ""), "text": d.get("text", "")}
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate((root / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if n == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue  # header
        qid, doc, score = parts[0], parts[1], int(parts[2])
        qrels.setdefault(qid, {})[doc] = score
    queries = []
    with (root / "queries.train.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                if str(q["_id"]) in qrels:
                    queries.append((str(q["_id"]), str(q["text"])))
    full = SciFact(corpus, queries, {q: qrels[q] for q, _t in queries})
    return subset(full, QUICK_QUERIES, QUICK_DOCS) if quick else full


def subset(data: SciFact, queries: int, docs: int) -> SciFact:
    """The first ``queries`` training queries with judgements, every document judged for them, filled up to
    ``docs`` documents with the others in corpus order (the distractors); documents keep corpus order."""
    chosen = data.queries[:queries]
    wanted: dict[str, None] = {}
    for qid, _text in chosen:
        for doc in data.qrels[qid]:
            if doc in data.docs:
                wanted[doc] = None
    for doc in data.docs:
        if len(wanted) >= docs:
            break
        wanted.setdefault(doc, None)
    kept = {d: data.docs[d] for d in data.docs if d in wanted}
    return SciFact(kept, chosen, {q: data.qrels[q] for q, _t in chosen})


def write_tree(data: SciFact, folder: Path) -> list[Path]:
    """Write the documents as files (fresh), ``PER_FOLDER`` to a sub-folder; return the sub-folders."""
    if folder.exists():
        shutil.rmtree(folder)
    parts: list[Path] = []
    for n, doc_id in enumerate(data.docs):
        if n % PER_FOLDER == 0:
            parts.append(folder / f"part-{n // PER_FOLDER:03d}")
            parts[-1].mkdir(parents=True)
        (parts[-1] / f"{doc_id}.txt").write_text(data.body(doc_id), encoding="utf-8")
    return parts


def doc_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("part-*/*.txt"))


def write_queries(data: SciFact, path: Path, limit: int | None = None, warmup: int = 0) -> list[str]:
    """The queries as ``quire search --queries-file`` lines; ``warmup`` extra lines (ids ``warmup-N``) first."""
    chosen = data.queries if limit is None else data.queries[:limit]
    lines = [{"id": f"warmup-{n}", "text": chosen[n % len(chosen)][1]} for n in range(warmup)]
    lines += [{"id": qid, "text": text} for qid, text in chosen]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return [qid for qid, _t in chosen]


SMALL_FOLDER_FILES = 30


def write_small_folder(data: SciFact, folder: Path, docs_per_file: int) -> list[Path]:
    """A small folder as people add them: ``SMALL_FOLDER_FILES`` Markdown files, each a section per abstract
    (``docs_per_file`` of them), taken from the END of the corpus (fresh)."""
    import shutil

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ids = list(data.docs)[-SMALL_FOLDER_FILES * docs_per_file :]
    paths = []
    for n in range(SMALL_FOLDER_FILES):
        chosen = ids[n * docs_per_file : (n + 1) * docs_per_file]
        sections = [f"## {data.docs[d]['title']}\n\n{data.docs[d]['text']}\n" for d in chosen]
        path = folder / f"notes-{n:02d}.md"
        path.write_text(f"# Reading notes {n + 1}\n\n" + "\n".join(sections), encoding="utf-8")
        paths.append(path)
    return paths
