"""How leaves are grouped into index-documents jobs, and a job's leaves into batches (one fenced transaction
each): by count and by source bytes, in order."""

from __future__ import annotations

from knowledge.lifecycle.admission import _group_for_scheduling
from knowledge.lifecycle.operations import INDEX_JOB_BYTES, INDEX_JOB_LEAVES, UNKNOWN_SIZE
from knowledge.lifecycle.scheduling import INDEX_BATCH, INDEX_BATCH_BYTES, split_batches


def leaves(n: int, start: int = 1) -> list[tuple[int, str, tuple[str, str] | None]]:
    return [(i, "file", None) for i in range(start, start + n)]


def test_small_files_fill_a_job_up_to_the_count() -> None:
    n = INDEX_JOB_LEAVES * 2 + 3
    groups = _group_for_scheduling(leaves(n), {i: 100 for i in range(1, n + 1)})
    assert [len(g) for g in groups] == [INDEX_JOB_LEAVES, INDEX_JOB_LEAVES, 3]
    assert [e[0] for g in groups for e in g] == list(range(1, n + 1))


def test_large_files_fill_a_job_up_to_the_byte_budget_and_a_huge_one_goes_alone() -> None:
    sizes = {1: INDEX_JOB_BYTES // 2, 2: INDEX_JOB_BYTES // 2, 3: 10, 4: INDEX_JOB_BYTES * 40, 5: 10}
    groups = _group_for_scheduling(leaves(5), sizes)
    assert [[e[0] for e in g] for g in groups] == [[1, 2], [3], [4], [5]]


def test_unknown_sizes_count_as_medium_files_and_folders_and_invalid_items_stand_alone() -> None:
    per_job = INDEX_JOB_BYTES // UNKNOWN_SIZE
    accepted = [
        *leaves(per_job + 1),
        (100, "directory", None),
        (101, "file", ("unsupported_type", "x")),
        *leaves(2, 200),
    ]
    groups = _group_for_scheduling(accepted, {})
    assert [len(g) for g in groups] == [per_job, 1, 1, 1, 2]
    assert groups[2] == [(100, "directory", None)]


def test_a_job_splits_into_batches_by_count_and_bytes_in_order() -> None:
    by_count = split_batches([100] * (INDEX_BATCH * 2 + 3))
    assert [len(b) for b in by_count] == [INDEX_BATCH, INDEX_BATCH, 3]
    assert [i for b in by_count for i in b] == list(range(INDEX_BATCH * 2 + 3))
    half = INDEX_BATCH_BYTES // 2
    assert [list(b) for b in split_batches([half, half, 10, INDEX_BATCH_BYTES * 40, 10])] == [[0, 1], [2], [3], [4]]
    unknown = INDEX_BATCH_BYTES // UNKNOWN_SIZE
    assert [len(b) for b in split_batches([None] * (unknown + 1))] == [unknown, 1]
    assert split_batches([]) == []
