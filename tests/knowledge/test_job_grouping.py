"""How leaves are grouped into index-documents jobs: by count and by source bytes, in order."""

from __future__ import annotations

from knowledge.lifecycle.operations import INDEX_BATCH, INDEX_BATCH_BYTES, UNKNOWN_SIZE, _group_for_scheduling


def leaves(n: int, start: int = 1) -> list[tuple[int, str, tuple[str, str] | None]]:
    return [(i, "file", None) for i in range(start, start + n)]


def test_small_files_fill_a_job_up_to_the_count() -> None:
    groups = _group_for_scheduling(leaves(INDEX_BATCH * 2 + 3), {i: 1000 for i in range(1, 1000)})
    assert [len(g) for g in groups] == [INDEX_BATCH, INDEX_BATCH, 3]
    assert [e[0] for g in groups for e in g] == list(range(1, INDEX_BATCH * 2 + 4))


def test_large_files_fill_a_job_up_to_the_byte_budget_and_a_huge_one_goes_alone() -> None:
    sizes = {1: INDEX_BATCH_BYTES // 2, 2: INDEX_BATCH_BYTES // 2, 3: 10, 4: INDEX_BATCH_BYTES * 40, 5: 10}
    groups = _group_for_scheduling(leaves(5), sizes)
    assert [[e[0] for e in g] for g in groups] == [[1, 2], [3], [4], [5]]


def test_unknown_sizes_count_as_medium_files_and_folders_and_invalid_items_stand_alone() -> None:
    per_job = INDEX_BATCH_BYTES // UNKNOWN_SIZE
    accepted = [
        *leaves(per_job + 1),
        (100, "directory", None),
        (101, "file", ("unsupported_type", "x")),
        *leaves(2, 200),
    ]
    groups = _group_for_scheduling(accepted, {})
    assert [len(g) for g in groups] == [per_job, 1, 1, 1, 2]
    assert groups[2] == [(100, "directory", None)]
