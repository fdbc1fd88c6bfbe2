"""Issue 17 (3): a run embeds a group of sources in one encoder call, and still commits one source per
transaction; what goes wrong with one source of a group stays that source's own outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.folder_runs import execute, group
from knowledge.folder_runs.group import GROUP_MAX_SOURCES
from knowledge.library import audit
from knowledge.runtime import Quire
from knowledge.search import search
from tests.folder_runs.helpers import (
    PERSON,
    assert_commit_entries_count_the_ledger,
    doc_text,
    drain,
    entries,
    make_base,
    make_docs,
    rows,
    scalar,
)
from tests.support.encoders import CountingEncoder, install
from tests.support.files import write_tree


@pytest.fixture
def counting(quire: Quire) -> CountingEncoder:
    base = make_base(quire)
    return install(quire, CountingEncoder(base.precision, refuse="belladonna"))


def dispositions(quire: Quire, run_id: int) -> dict[str, tuple[str, str | None]]:
    return {s.relative_path: (s.disposition, s.reason) for s in folder_runs.show_run(quire, run_id).sources}


def committed_per_source(quire: Quire, run_id: int) -> list[tuple[int, int, int]]:
    """(ordinal, batches, commit entries) per committed source, in manifest order."""
    return rows(
        quire,
        "SELECT s.ordinal, count(DISTINCT b.id), count(DISTINCT o.batch_id) FROM folder_run_sources s "
        "JOIN ingest_batches b ON b.source_id = s.id JOIN folder_run_outcomes o ON o.source_id = s.id "
        "WHERE s.run_id = :r GROUP BY s.id ORDER BY s.ordinal",
        r=run_id,
    )


def test_a_run_embeds_its_sources_a_group_at_a_time(quire: Quire, counting: CountingEncoder, tmp_path: Path) -> None:
    sources = GROUP_MAX_SOURCES + 8
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", sources), key="k")
    drain(quire)

    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.counts["committed"]) == ("completed", sources)
    # one call per group (each small document is one chunk), not one per source
    assert counting.sizes == [GROUP_MAX_SOURCES, 8]
    # and still one batch, one outcome and one commit entry per source: each its own transaction
    assert committed_per_source(quire, started.run_id) == [(n, 1, 1) for n in range(sources)]
    log = entries(quire, started.run_id)
    assert [e.action for e in log].count(audit.BATCH_COMMITTED) == sources
    commit_counts = [e.payload["counts"]["committed"] for e in log if e.action == audit.BATCH_COMMITTED]
    assert commit_counts == list(range(1, sources + 1))  # each entry saw the ledger one source further on
    assert assert_commit_entries_count_the_ledger(quire, started.run_id) == sources
    assert [h.item_name for h in search(quire, "kb", "marker37x", mode="keyword")] == ["doc037.txt"]
    assert [h.item_name for h in search(quire, "kb", doc_text(21), mode="vector", limit=1)] == ["doc021.txt"]


def test_cancelled_between_two_sources_of_a_group_keeps_the_earlier_ones_only(
    quire: Quire, counting: CountingEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 12), key="k")
    real_settle = execute._settle_source

    def settle(settling: Any, source: Any, **kw: Any) -> str:
        disposition = real_settle(settling, source, **kw)
        if source.ordinal == 4:  # a person cancels the run right after its fifth source committed
            with quire.db.write() as conn:
                quire.queue.cancel(conn, [started.job_id])
        return disposition

    monkeypatch.setattr(execute, "_settle_source", settle)
    drain(quire)

    assert counting.sizes == [12]  # all twelve were embedded together...
    assert committed_per_source(quire, started.run_id) == [(n, 1, 1) for n in range(5)]  # ...five committed
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == 5
    assert scalar(quire, "SELECT count(*) FROM chunks") == 5
    assert quire.queue.get(started.job_id).status == "cancelled"
    # the repair scans settle the run its cancelled job left (1) and sweep the owned copies the group wrote
    # for the seven sources that never committed (7 files no row records)
    assert quire.recover().repaired == 1 + 7
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.counts["committed"], summary.counts["pending"]) == ("failed", 5, 7)

    retry = folder_runs.retry_run(quire, PERSON, started.run_id)  # the rest on a new run, nothing twice
    monkeypatch.setattr(execute, "_settle_source", real_settle)
    drain(quire)
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "failed"
    summary = folder_runs.show_run(quire, retry.run_id).summary
    assert (summary.run.status, summary.counts["already_committed"], summary.counts["committed"]) == ("completed", 5, 7)
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == 12
    assert counting.sizes == [12, 7]


def test_a_bad_source_in_a_group_fails_only_itself(quire: Quire, counting: CountingEncoder, tmp_path: Path) -> None:
    good = {f"ok{n:02d}.txt": doc_text(n) for n in range(10)}
    folder = write_tree(
        tmp_path / "f",
        {
            **good,
            "fake.docx": b"this is not a zip at all",  # unparseable
            "gone.txt": doc_text(50),  # unreadable by the time the run reaches it
            "poison.txt": "This one mentions belladonna, which the encoder refuses.",
            "twin.txt": doc_text(3),  # the same bytes as ok03.txt, in the same group
        },
    )
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    (folder / "gone.txt").unlink()
    drain(quire)

    got = dispositions(quire, started.run_id)
    assert {k: v[0] for k, v in got.items() if k not in good} == {
        "fake.docx": "rejected",
        "gone.txt": "source_unavailable",
        "poison.txt": "rejected",
        "twin.txt": "already_covered",
    }
    assert got["poison.txt"][1] == "embedding_error: RuntimeError: the model cannot embed this text"
    assert (got["fake.docx"][1] or "").startswith("parse_error: ")
    assert {got[name][0] for name in good} == {"committed"}
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "completed"
    assert counting.sizes[0] == len(good) + 1  # one group: the good ones and the poison (the twin's text is one)
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file' AND status = 'completed'") == len(good)
    assert [h.item_name for h in search(quire, "kb", "marker7x", mode="keyword")] == ["ok07.txt"]


def test_a_fault_reading_a_source_settles_the_group_before_it_then_stops_the_run(
    quire: Quire, counting: CountingEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 6), key="k")
    real_read = group.read_source_work

    def read(tools: Any, root: Path, source: Any) -> Any:
        if source.ordinal == 3:
            raise sa_exc.OperationalError("SELECT ...", {}, Exception("disk I/O error"))
        return real_read(tools, root, source)

    monkeypatch.setattr(group, "read_source_work", read)
    drain(quire)

    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.run.error) == ("failed", "database error: disk I/O error")
    assert (summary.counts["committed"], summary.counts["pending"]) == (3, 3)  # as one source at a time did
    assert counting.sizes == [3]
    actions = [e.action for e in entries(quire, started.run_id)]
    assert actions == [audit.RUN_CREATED, audit.RUN_STARTED, *[audit.BATCH_COMMITTED] * 3, audit.RUN_FAILED]
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == 3
    with quire.db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM folder_run_outcomes")).scalar_one() == 3


def test_a_group_closes_at_its_chunk_limit_and_the_next_takes_the_parsed_rest(
    quire: Quire, counting: CountingEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.ingest.parse_worker import ParseWorker

    parsed: list[list[str]] = []
    real_parse = ParseWorker.parse_many

    def parse_many(self: ParseWorker, requests: list[Any], waiting: Any = None) -> Any:
        parsed.append([name for name, *_rest in requests])
        return real_parse(self, requests, waiting)

    monkeypatch.setattr(ParseWorker, "parse_many", parse_many)
    monkeypatch.setattr(group, "GROUP_MAX_CHUNKS", 5)  # each small document is one chunk
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 12), key="k")
    drain(quire)

    assert counting.sizes == [5, 5, 2]  # three encoder calls of at most five chunks...
    assert parsed == [[f"doc{n:03d}.txt" for n in range(12)]]  # ...from one parse request: none parsed twice
    assert committed_per_source(quire, started.run_id) == [(n, 1, 1) for n in range(12)]
    assert [h.item_name for h in search(quire, "kb", "marker11x", mode="keyword")] == ["doc011.txt"]
