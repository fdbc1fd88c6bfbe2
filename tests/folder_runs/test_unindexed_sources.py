"""A run's failed and skipped sources have no item; `quire items --status failed|skipped` lists them beside the
items, with their reasons, and a source a later run committed is no longer listed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from knowledge import folder_runs
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.folder_runs.helpers import PERSON, doc_text, drain, make_base
from tests.sources.builders import make_pdf
from tests.support.files import write_tree


def items_json(data_dir: Path, *args: str) -> dict[str, Any]:
    result = quire_cli("--json", "items", "kb", *args, data_dir=data_dir)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def by_path(answer: dict[str, Any]) -> dict[str, tuple[str, str]]:
    rows = answer["run_outcomes"]
    assert len({r["relative_path"] for r in rows}) == len(rows)  # each source once: its latest run speaks
    return {r["relative_path"]: (r["disposition"], r["reason"]) for r in rows}


def run_folder(quire: Quire, folder: Path, key: str) -> int:
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key=key)
    drain(quire)
    return started.run_id


def make_folder(root: Path) -> Path:
    return write_tree(
        root / "papers",
        {
            "good.txt": doc_text(1),
            "notes/binary.txt": b"\x00\x01\x02 not text \x00\xff\xfe" * 40,  # named text, holds bytes
            "picture.bin": b"\x00\x01",  # refused by the preview: never in the manifest
            "empty.txt": "",
            "broken.pdf": random.Random(7).randbytes(4096),  # a PDF that cannot be parsed
        },
    )


def test_items_lists_a_runs_failed_and_skipped_sources_with_reasons(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    make_base(quire)
    folder = make_folder(tmp_path)
    first = run_folder(quire, folder, "first")

    skipped = items_json(data_dir, "--status", "skipped")
    assert skipped["items"] == [] and skipped["run_outcomes_next"] is None
    assert by_path(skipped) == {
        "notes/binary.txt": ("skipped", "binary: file looks binary, not text (it contains NUL bytes)"),
        "empty.txt": ("skipped", "empty: file is empty"),
    }
    assert all(r["run_id"] == first and r["reason"] for r in skipped["run_outcomes"])
    failed = items_json(data_dir, "--status", "failed")
    assert failed["items"] == [] and list(by_path(failed)) == ["broken.pdf"]
    assert failed["run_outcomes"][0]["disposition"] == "rejected" and failed["run_outcomes"][0]["run_id"] == first
    assert "PDF" in failed["run_outcomes"][0]["reason"]
    for row in skipped["run_outcomes"] + failed["run_outcomes"]:
        assert str(tmp_path) not in row["reason"] and "/papers" not in row["reason"]

    text = quire_cli("items", "kb", "--status", "failed", data_dir=data_dir)
    assert text.returncode == 0 and "broken.pdf" in text.stdout and "rejected" in text.stdout
    assert "no items" in text.stdout  # the items themselves: none failed
    completed = items_json(data_dir, "--status", "completed")
    assert "run_outcomes" not in completed  # only failed and skipped have run sources

    page = items_json(data_dir, "--status", "skipped", "--limit", "1")
    assert len(page["run_outcomes"]) == 1 and page["run_outcomes_next"] == page["run_outcomes"][0]["outcome_id"]
    rest = items_json(
        data_dir, "--status", "skipped", "--limit", "1", "--sources-after", str(page["run_outcomes_next"])
    )
    assert [r["relative_path"] for r in page["run_outcomes"] + rest["run_outcomes"]] == [
        r["relative_path"] for r in skipped["run_outcomes"]
    ]


def test_a_source_a_later_run_committed_is_no_longer_failed(data_dir: Path, tmp_path: Path) -> None:
    from knowledge.compose import open_quire

    folder = make_folder(tmp_path)
    quire = open_quire(data_dir)
    try:
        make_base(quire)
        run_folder(quire, folder, "first")
        assert [s.relative_path for s in folder_runs.list_unindexed_sources(quire, "kb", "failed")] == ["broken.pdf"]
        (folder / "broken.pdf").write_bytes(make_pdf([["garnet harbor iris, fixed at last"]]))
        second = run_folder(quire, folder, "second")
    finally:
        quire.close()
    assert items_json(data_dir, "--status", "failed")["run_outcomes"] == []
    assert "broken.pdf" in [i["name"] for i in items_json(data_dir, "--status", "completed")["items"]]
    skipped = items_json(data_dir, "--status", "skipped")  # skipped again by the second run: listed once
    assert set(by_path(skipped)) == {"notes/binary.txt", "empty.txt"}
    assert {r["run_id"] for r in skipped["run_outcomes"]} == {second}
