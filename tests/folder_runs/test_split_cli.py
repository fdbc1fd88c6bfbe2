"""`quire run preview` shows the split plan of a folder over the cap; `quire run start --split` starts it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import quire_cli
from tests.folder_runs.helpers import doc_text
from tests.folder_runs.test_cli import ok, refused
from tests.support.files import write_tree


def _capped(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    ok("base", "create", "kb", data_dir=data)
    ok("config", "set", "folder_runs.max_descendants", "4", data_dir=data)
    files = {"top.txt": doc_text(0), "a/1.txt": doc_text(1), "a/2.txt": doc_text(2)}
    files.update({f"b/f{n}.txt": doc_text(10 + n) for n in range(5)})
    return data, write_tree(tmp_path / "tree", files)


def test_preview_over_the_cap_is_refused_with_the_plan_in_json_and_text(tmp_path: Path) -> None:
    data, tree = _capped(tmp_path)
    error = refused(5, "run", "preview", "kb", str(tree), data_dir=data)
    assert error["code"] == "folder_too_large" and "more than 4" in error["message"]
    plan = error["split"]
    assert plan["over_cap"] and plan["run_count"] == 4
    assert [(r["label"], r["files"]) for r in plan["runs"]] == [
        (". (its own files)", 1),
        ("a", 2),
        ("b (its own files, part 1 of 2)", 4),
        ("b (its own files, part 2 of 2)", 1),
    ]
    text = quire_cli("run", "preview", "kb", str(tree), data_dir=data)
    assert text.returncode == 5
    assert "would start 4 runs of at most 4" in text.stderr and "  a: 2 file(s), 2 walked" in text.stderr
    assert ok("run", "list", "--base", "kb", data_dir=data) == {"runs": [], "next": None}


def test_start_split_starts_every_run_and_replays_them(tmp_path: Path) -> None:
    data, tree = _capped(tmp_path)
    started = ok("run", "start", "kb", str(tree), "--split", data_dir=data)
    assert started["split"]["run_count"] == 4
    assert [(r["outcome"], r["label"]) for r in started["runs"]] == [
        ("created", ". (its own files)"),
        ("created", "a"),
        ("created", "b (its own files, part 1 of 2)"),
        ("created", "b (its own files, part 2 of 2)"),
    ]
    again = ok("run", "start", "kb", str(tree), "--split", data_dir=data)
    assert [(r["outcome"], r["run_id"]) for r in again["runs"]] == [("replayed", r["run_id"]) for r in started["runs"]]
    text = quire_cli("run", "start", "kb", str(tree), "--split", data_dir=data)
    assert text.returncode == 0 and "over the cap of 4: 4 runs, started in one transaction" in text.stdout
    ok("worker", "--until-idle", data_dir=data)
    runs = ok("run", "list", "--base", "kb", data_dir=data)["runs"]
    assert sorted(r["size"] for r in runs) == [1, 1, 2, 4]
    assert {r["status"] for r in runs} == {"completed"}


def test_start_split_within_the_cap_is_one_run_and_bad_arguments_exit_2(tmp_path: Path) -> None:
    data, tree = _capped(tmp_path)
    error = refused(2, "run", "start", "kb", str(tree / "a"), str(tree / "b"), "--split", data_dir=data)
    assert "one FOLDER" in error["message"]
    assert "no --key" in refused(2, "run", "start", "kb", str(tree), "--split", "--key", "k", data_dir=data)["message"]
    fits = quire_cli("--json", "run", "start", "kb", str(tree / "a"), "--split", data_dir=data)
    assert fits.returncode == 0, fits.stderr
    answer = json.loads(fits.stdout)
    assert not answer["split"]["over_cap"] and [r["outcome"] for r in answer["runs"]] == ["created"]
    single = ok("run", "start", "kb", str(tree / "a"), data_dir=data)
    assert (single["outcome"], single["run_id"]) == ("replayed", answer["runs"][0]["run_id"])
    text = quire_cli("run", "start", "kb", str(tree / "a"), "--split", data_dir=data)
    assert "fits in one run (nothing to split)" in text.stdout
