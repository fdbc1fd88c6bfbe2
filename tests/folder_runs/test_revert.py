"""Group revert: one audited transaction hides everything a completed run committed; cleanup purges it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.errors import Conflict, Forbidden
from knowledge.library import audit, blobs
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import search
from tests.folder_runs.helpers import AGENT, PERSON, doc_text, drain, entries, make_base, make_docs, rows, scalar


def hits(quire: Quire, query: str, mode: str) -> set[str]:
    return {h.item_name for h in search(quire, "kb", query, mode=mode, limit=50)}


def test_revert_hides_at_once_and_cleanup_purges(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    bystander = make_docs(tmp_path / "bystander", 1, prefix="other")  # not part of the run: must stay
    operations.add_items(quire, "kb", [operations.PathInput(bystander / "other000.txt")])
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 4, prefix="doc"), key="k")
    # other000.txt has the same bytes as doc000.txt and is indexed first: the run settles that one
    # already_covered and commits doc001..doc003.
    drain(quire)
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.counts["committed"], summary.counts["already_covered"]) == ("completed", 3, 1)
    run_items = [r[0] for r in rows(quire, "SELECT id FROM items WHERE run_id = :r", r=started.run_id)]
    shas = {
        r[0] for r in rows(quire, "SELECT blob_sha256 FROM items WHERE run_id = :r AND type = 'file'", r=started.run_id)
    }
    assert hits(quire, "marker2x", "keyword") == {"doc002.txt"}
    assert "doc003.txt" in hits(quire, doc_text(3), "vector")

    with pytest.raises(Forbidden):
        folder_runs.revert_run(quire, AGENT, started.run_id)
    result = folder_runs.revert_run(quire, PERSON, started.run_id)

    # from the moment the revert commits, nothing of the run is searchable
    assert result.deleting == len(run_items) and result.job_id is not None
    assert hits(quire, "marker2x", "keyword") == set()
    assert not {"doc001.txt", "doc002.txt", "doc003.txt"} & hits(quire, doc_text(3), "hybrid")
    assert hits(quire, "marker0x", "keyword") == {"other000.txt"}
    assert {r[0] for r in rows(quire, "SELECT status FROM items WHERE run_id = :r", r=started.run_id)} == {"deleting"}
    log = entries(quire, started.run_id)
    # a transition names the system; the person who asked for it appears only as its approver
    assert log[-1].action == audit.RUN_REVERTED and log[-1].actor == audit.SYSTEM_ACTOR
    assert log[-1].payload["approved_by"] == PERSON.label
    assert log[-1].payload["counts"]["committed"] == 3 and log[-1].payload["deleting"] == len(run_items)
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert summary.run.status == "reverted" and summary.run.reverted_by == PERSON.label

    with pytest.raises(Conflict, match="reverted"):
        folder_runs.revert_run(quire, PERSON, started.run_id)  # a second revert is refused

    drain(quire)  # the delete-subtree cleanup
    assert scalar(quire, "SELECT count(*) FROM items WHERE run_id = :r", r=started.run_id) == 0
    assert (
        scalar(
            quire,
            "SELECT count(*) FROM chunks c JOIN items i ON i.id = c.item_id WHERE i.run_id = :r",
            r=started.run_id,
        )
        == 0
    )
    for sha in shas - {r[0] for r in rows(quire, "SELECT blob_sha256 FROM items WHERE blob_sha256 IS NOT NULL")}:
        assert not blobs.blob_path(quire.blobs_dir, sha).exists()
        assert scalar(quire, "SELECT count(*) FROM blobs WHERE sha256 = :s", s=sha) == 0
    assert hits(quire, "marker0x", "keyword") == {"other000.txt"}
    # the ledger and the audit trail outlive the items
    assert len(folder_runs.show_run(quire, started.run_id).sources) == 4
    assert [e.action for e in entries(quire, started.run_id)].count(audit.RUN_REVERTED) == 1


def test_a_failed_run_is_not_revertible(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 2), key="k")
    with quire.db.write() as conn:  # a malformed payload: the run faults
        conn.execute(
            text("UPDATE jobs SET payload = json_set(payload, '$.base_id', 999) WHERE id = :j"), {"j": started.job_id}
        )
    drain(quire)
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "failed"
    before = len(entries(quire))
    with pytest.raises(Conflict, match="failed run is not revertible"):
        folder_runs.revert_run(quire, PERSON, started.run_id)
    assert len(entries(quire)) == before


def test_a_run_that_has_not_completed_is_not_revertible(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 1), key="k")
    with pytest.raises(Conflict, match="pending"):
        folder_runs.revert_run(quire, PERSON, started.run_id)


def test_reindexing_a_run_container_reindexes_its_sources_and_adds_nothing(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = make_docs(tmp_path / "f", 3, prefix="doc")
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    drain(quire)
    container = rows(quire, "SELECT id FROM items WHERE run_id = :r AND type = 'directory'", r=started.run_id)[0][0]
    before = sorted(r[0] for r in rows(quire, "SELECT id FROM items WHERE run_id = :r", r=started.run_id))
    (folder / "unapproved.txt").write_text("a file nobody approved for this run")

    operations.reindex_items(quire, "kb", [container])
    drain(quire)

    after = rows(quire, "SELECT id, status FROM items WHERE run_id = :r ORDER BY id", r=started.run_id)
    assert [r[0] for r in after] == before and {r[1] for r in after} == {"completed"}
    assert hits(quire, "nobody approved", "keyword") == set()
