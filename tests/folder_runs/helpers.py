"""Helpers for folder-run tests: a base, a folder of small documents, ledger and audit readers."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import text

from knowledge.folder_runs import Principal
from knowledge.library import audit, bases
from knowledge.library.bases import Base
from knowledge.runtime import Quire
from tests.support.files import write_tree

PERSON = Principal.person("ada")
OTHER_PERSON = Principal.person("grace")
AGENT = Principal.agent("mcp-bot")

TABLES = ("folder_runs", "folder_run_sources", "folder_run_outcomes", "ingest_batches", "audit_log", "jobs")

# Distinct words so every document has its own content (and its own keyword hits).
_WORD_TEXT = (
    "amber basalt cobalt dune ember fjord garnet harbor iris jasper kelp lagoon mesa nectar onyx prairie quartz "
    "reef sierra tundra umber violet willow xenon yarrow zephyr anchor beacon canyon delta estuary fern glacier "
    "heath inlet juniper knoll larch marsh nettle orchard pebble quarry ridge spruce thicket upland vale wharf"
)
WORDS = _WORD_TEXT.split(" ")


def make_base(quire: Quire, name: str = "kb") -> Base:
    from knowledge.ingest.models import default_precision, model_spec

    spec = model_spec("all-MiniLM-L6-v2")
    return bases.create_base(
        quire.db, name, model_id=spec.model_id, dimension=spec.dimension, precision=default_precision()
    )


def doc_text(n: int) -> str:
    """A short, unique document: a marker word pair plus a sentence."""
    a, b = WORDS[n % len(WORDS)], WORDS[(n * 7 + 3) % len(WORDS)]
    return f"Note {n} marker{n}x about {a} and {b}. The {a} lies beyond the {b} in record {n}.\n"


def make_docs(folder: Path, count: int, prefix: str = "doc") -> Path:
    return write_tree(folder, {f"{prefix}{n:03d}.txt": doc_text(n) for n in range(count)})


def drain(quire: Quire, timeout: float = 300) -> int:
    return quire.make_worker(poll_interval=0.01).run(until_idle=True, timeout=timeout)


def row_counts(quire: Quire) -> dict[str, int]:
    with quire.db.read() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}


def entries(quire: Quire, run_id: int | None = None) -> list[audit.Entry]:
    return audit.list_entries(quire.db, run_id=run_id, limit=10_000)


def actions(quire: Quire, run_id: int | None = None) -> list[str]:
    return [e.action for e in entries(quire, run_id)]


def scalar(quire: Quire, sql: str, **params: Any) -> Any:
    with quire.db.read() as conn:
        return conn.execute(text(sql), params).scalar_one()


def rows(quire: Quire, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    with quire.db.read() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params).all()]


def assert_commit_entries_count_the_ledger(quire: Quire, run_id: int) -> int:
    """Each ``ingest.batch.committed`` entry's counts are the ledger's as its own transaction left it: the run's
    outcomes up to and including its source's (outcome ids follow commit order: writers hold the write lock).
    Answers how many entries were checked."""
    size = scalar(quire, "SELECT declared_size FROM folder_runs WHERE id = :r", r=run_id)
    outcomes = rows(quire, "SELECT id, disposition FROM folder_run_outcomes WHERE run_id = :r ORDER BY id", r=run_id)
    commits = [e for e in entries(quire, run_id) if e.action == audit.BATCH_COMMITTED]
    committed_ids = [oid for oid, disposition in outcomes if disposition == "committed"]
    assert len(commits) == len(committed_ids)
    for entry, own in zip(commits, committed_ids, strict=True):
        ledger = Counter(disposition for oid, disposition in outcomes if oid <= own)
        counts = entry.payload["counts"]
        # "skipped" in counts is every source not ingested by design (the ledger's skipped among them)
        assert {d: counts[d] for d in ledger if d != "skipped"} == {d: n for d, n in ledger.items() if d != "skipped"}
        not_ingested = ledger.total() - ledger["committed"] - ledger["rejected"] - ledger["quarantined"]
        assert (counts["skipped"], counts["settled"], counts["pending"]) == (
            not_ingested,
            ledger.total(),
            size - ledger.total(),
        ), (entry.id, counts, ledger)
        assert entry.payload["size"] == size
    return len(commits)


def chmod_unreadable_check(path: Path) -> bool:
    """A stand-in for ``knowledge.ingest.walk.is_readable_dir`` that behaves as for a non-root user.

    Tests run as root, and root reads a chmod-000 folder anyway (CAP_DAC_OVERRIDE), so ``os.access``
    says yes. The walk decides readability in that one function; the tests swap in this one, which
    calls a folder without any permission bits unreadable, exactly as it would be for its owner.
    """
    try:
        return (os.stat(path).st_mode & 0o777) != 0
    except OSError:
        return False
