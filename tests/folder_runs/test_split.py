"""A folder over the cap taken in one gesture: the split plan, and every run started in one transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge import folder_runs
from knowledge.errors import Conflict, Forbidden
from knowledge.folder_runs import FolderTooLarge, start
from knowledge.library import audit
from knowledge.runtime import Quire
from tests.folder_runs.helpers import AGENT, PERSON, doc_text, drain, entries, make_base, row_counts, rows, scalar
from tests.support.files import write_tree

CAP = 5


def _tree(root: Path) -> Path:
    """Loose files at the top; a sub-folder that fits; one over the cap with sub-folders of its own; one with
    more files directly in it than the cap; an empty one; a log file the top's ignore file excludes."""
    files: dict[str, str | bytes] = {
        ".quireignore": "*.log\n",
        "top.txt": doc_text(0),
        "notes.md": doc_text(1),
        "small/a.txt": doc_text(2),
        "small/b.txt": doc_text(3),
        "small/debug.log": "a log a run over small alone would read\n",
        "big/x/1.txt": doc_text(4),
        "big/x/2.txt": doc_text(5),
        "big/x/3.txt": doc_text(6),
        "big/y/1.txt": doc_text(7),
        "big/own.txt": doc_text(8),
        "big/picture.bin": b"\x00\x01",
    }
    files.update({f"flat/f{n:02d}.txt": doc_text(20 + n) for n in range(12)})
    folder = write_tree(root, files)
    (folder / "empty").mkdir()
    return folder


def _manifest(quire: Quire, top: Path) -> list[str]:
    """Every started run's sources, as paths below ``top`` (a list: a source in two runs shows twice)."""
    found = rows(
        quire,
        "SELECT r.folder, s.relative_path FROM folder_run_sources s JOIN folder_runs r ON r.id = s.run_id",
    )
    return sorted((Path(folder) / rel).relative_to(top).as_posix() for folder, rel in found)


@pytest.fixture
def capped(quire: Quire) -> Quire:
    folder_runs.set_descendant_cap(quire, CAP)
    return quire


def test_the_plan_splits_recursively_chunks_own_files_and_skips_what_has_no_file(capped: Quire, tmp_path: Path) -> None:
    top = _tree(tmp_path / "tree")
    with pytest.raises(FolderTooLarge):
        folder_runs.preview(capped, PERSON, make_base(capped).id, top)
    plan = folder_runs.plan_split(capped, top)
    assert plan.over_cap and plan.cap == CAP
    assert [(r.label, r.walked, r.files) for r in plan.runs] == [
        (". (its own files)", 2, 2),  # the ignore file is not an entry; the empty folder has no run
        ("big (its own files)", 2, 2),
        ("big/x", 3, 3),
        ("big/y", 1, 1),
        ("flat (its own files, part 1 of 3)", 5, 5),
        ("flat (its own files, part 2 of 3)", 5, 5),
        ("flat (its own files, part 3 of 3)", 2, 2),
        ("small", 3, 3),
    ]
    assert all(r.walked <= CAP for r in plan.runs)


def test_start_split_takes_every_source_of_the_tree_once_each_run_within_the_cap(capped: Quire, tmp_path: Path) -> None:
    base = make_base(capped)
    top = _tree(tmp_path / "tree")
    started = folder_runs.start_split(capped, PERSON, base.id, top)
    assert [r.outcome for r in started.runs] == ["created"] * 8
    assert all(w <= CAP for (w,) in rows(capped, "SELECT walked FROM folder_runs"))
    taken = _manifest(capped, top)
    assert len(taken) == len(set(taken))  # nothing counted twice
    folder_runs.set_descendant_cap(capped, 10_000)  # the whole tree as one run would take it
    whole = folder_runs.preview(capped, PERSON, base.id, top)
    assert taken == sorted(e.relative for e in whole.eligible)  # nothing left out, nothing the rules exclude
    assert "small/debug.log" not in taken and "big/picture.bin" not in taken
    created = [e for e in entries(capped) if e.action == audit.RUN_CREATED]
    assert len(created) == 8 and all(e.payload["split_of"] == str(top) for e in created)
    assert {e.actor for e in created} == {PERSON.label}

    folder_runs.set_descendant_cap(capped, CAP)
    again = folder_runs.start_split(capped, PERSON, base.id, top)  # the same gesture replays every run
    assert [(r.outcome, r.run_id) for r in again.runs] == [("replayed", r.run_id) for r in started.runs]
    assert scalar(capped, "SELECT count(*) FROM folder_runs") == 8


def test_the_runs_of_a_split_ingest_just_their_own_sources(capped: Quire, tmp_path: Path) -> None:
    base = make_base(capped)
    top = write_tree(
        tmp_path / "tree",
        {"own.txt": doc_text(1), "sub/a.txt": doc_text(2), **{f"flat/f{n}.txt": doc_text(10 + n) for n in range(6)}},
    )
    started = folder_runs.start_split(capped, PERSON, base.id, top)
    assert [r.label for r in started.plan.runs] == [
        ". (its own files)",
        "flat (its own files, part 1 of 2)",
        "flat (its own files, part 2 of 2)",
        "sub",
    ]
    drain(capped)
    statuses = rows(capped, "SELECT status, declared_size FROM folder_runs ORDER BY id")
    assert statuses == [("completed", 1), ("completed", 5), ("completed", 1), ("completed", 1)]
    committed = rows(capped, "SELECT count(*) FROM folder_run_outcomes WHERE disposition = 'committed'")
    assert committed == [(8,)]


def test_either_every_run_starts_or_none(capped: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = make_base(capped)
    top = _tree(tmp_path / "tree")
    before = row_counts(capped)
    real, calls = start.create_run, []

    def third_refused(*args: object, **kwargs: object) -> int:
        calls.append(1)
        if len(calls) == 3:
            raise Conflict("a guard refuses the third run")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(start, "create_run", third_refused)
    with pytest.raises(Conflict, match="third run"):
        folder_runs.start_split(capped, PERSON, base.id, top)
    assert len(calls) == 3  # two runs were written before the refusal, and rolled back with it
    assert row_counts(capped) == before


def test_a_folder_within_the_cap_is_the_one_run_start_run_makes(capped: Quire, tmp_path: Path) -> None:
    base = make_base(capped)
    top = write_tree(tmp_path / "fits", {"a.txt": doc_text(1), "sub/b.txt": doc_text(2)})
    started = folder_runs.start_split(capped, PERSON, base.id, top)
    assert not started.plan.over_cap and [r.label for r in started.plan.runs] == ["."]
    single = folder_runs.start_run(capped, PERSON, base.id, top)
    assert (single.outcome, single.run_id) == ("replayed", started.runs[0].run_id)
    created = [e for e in entries(capped) if e.action == audit.RUN_CREATED]
    assert len(created) == 1 and "split_of" not in created[0].payload


def test_an_agent_may_plan_but_not_start_a_split(capped: Quire, tmp_path: Path) -> None:
    base = make_base(capped)
    top = _tree(tmp_path / "tree")
    before = row_counts(capped)
    with pytest.raises(Forbidden, match="an agent may not"):
        folder_runs.start_split(capped, AGENT, base.id, top)
    assert row_counts(capped) == before


def test_too_many_runs_or_a_cap_of_zero_is_refused_with_the_reason(
    capped: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = _tree(tmp_path / "tree")
    monkeypatch.setattr("knowledge.folder_runs.split_plan.MAX_SPLIT_RUNS", 3)
    with pytest.raises(FolderTooLarge, match="more than 3 runs"):
        folder_runs.plan_split(capped, top)
    monkeypatch.undo()
    folder_runs.set_descendant_cap(capped, 0)
    with pytest.raises(FolderTooLarge, match="cap of 0"):
        folder_runs.plan_split(capped, top)
