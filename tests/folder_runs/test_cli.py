"""`quire run …` and `quire audit` in real processes: JSON on every command, stable exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import quire_cli
from tests.folder_runs.helpers import make_docs
from tests.support.files import write_tree


def ok(*args: str, data_dir: Path) -> Any:
    result = quire_cli("--json", *args, data_dir=data_dir)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def refused(code: int, *args: str, data_dir: Path) -> dict[str, Any]:
    result = quire_cli("--json", *args, data_dir=data_dir)
    assert result.returncode == code, (args, result.returncode, result.stdout, result.stderr)
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    return error


def test_run_commands_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = make_docs(tmp_path / "folder", 3)
    write_tree(folder, {"picture.bin": b"\x00"})
    ok("base", "create", "kb", data_dir=data)

    preview = ok("--as-agent", "helper", "run", "preview", "kb", str(folder), data_dir=data)  # agents may preview
    assert [e["path"] for e in preview["eligible"]] == ["doc000.txt", "doc001.txt", "doc002.txt"]
    assert preview["ineligible"] == [
        {
            "path": "picture.bin",
            "kind": "file",
            "size": 1,
            "sha256": None,
            "eligible": False,
            "reason": "unsupported file type .bin",
        }
    ]
    assert preview["walked"] == 4 and preview["cap"] == 200

    assert refused(5, "--as-agent", "helper", "run", "start", "kb", str(folder), data_dir=data)["code"] == "forbidden"
    assert refused(3, "run", "start", "kb", str(tmp_path / "nowhere"), data_dir=data)["message"] == "folder not found"
    assert refused(4, "run", "start", "no-such-kb", str(tmp_path / "nowhere"), data_dir=data)["code"] == "conflict"

    created = ok("run", "start", "kb", str(folder), "--key", "k1", data_dir=data)
    replayed = ok("run", "start", "kb", str(folder), "--key", "k1", data_dir=data)
    assert created["outcome"] == "created" and replayed["outcome"] == "replayed"
    assert (created["run_id"], created["job_id"]) == (replayed["run_id"], replayed["job_id"])
    assert set(created) == {"outcome", "run_id", "job_id", "key"}
    other = make_docs(tmp_path / "other", 1)
    assert refused(4, "run", "start", "kb", str(other), "--key", "k1", data_dir=data)["code"] == "conflict"

    ok("worker", "--until-idle", data_dir=data)

    run_id = created["run_id"]
    shown = ok("run", "show", str(run_id), data_dir=data)
    assert shown["status"] == "completed" and shown["progress"] == {"settled": 3, "total": 3}
    assert [(s["relative_path"], s["disposition"]) for s in shown["sources"]] == [
        ("doc000.txt", "committed"),
        ("doc001.txt", "committed"),
        ("doc002.txt", "committed"),
    ]
    assert shown["created_at"] <= shown["started_at"] <= shown["finished_at"]
    by_folder = ok("run", "list", "--folder", str(folder), data_dir=data)["runs"]
    by_base = ok("--as-agent", "helper", "run", "list", "--base", "kb", data_dir=data)["runs"]
    assert [r["id"] for r in by_folder] == [r["id"] for r in by_base] == [run_id]
    assert by_folder[0]["counts"]["committed"] == 3

    trail = ok("audit", "--run", str(run_id), data_dir=data)["entries"]
    assert [e["action"] for e in trail] == [
        "ingest.folder_run.created",
        "ingest.folder_run.started",
        *["ingest.batch.committed"] * 3,
        "ingest.folder_run.completed",
    ]
    assert trail[0]["actor"].startswith("person:") and trail[-1]["actor"] == "system"

    assert refused(5, "--as-agent", "helper", "run", "revert", str(run_id), data_dir=data)["code"] == "forbidden"
    reverted = ok("run", "revert", str(run_id), data_dir=data)
    assert reverted["status"] == "reverted" and reverted["deleting"] == 4
    assert refused(4, "run", "revert", str(run_id), data_dir=data)["code"] == "conflict"
    assert refused(3, "run", "show", "999", data_dir=data)["code"] == "not_found"
    assert quire_cli("run", "list", data_dir=data).returncode == 2  # --folder or --base is required
    assert ok("audit", data_dir=data)["entries"][-1]["action"] == "ingest.folder_run.reverted"


def test_too_large_a_folder_is_refused_with_exit_5(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = write_tree(tmp_path / "big", {f"f{n:03d}.txt": f"{n}\n" for n in range(201)})
    ok("base", "create", "kb", data_dir=data)
    error = refused(5, "run", "preview", "kb", str(folder), data_dir=data)
    assert error["code"] == "folder_too_large" and "more than 200" in error["message"]
    assert ok("run", "list", "--base", "kb", data_dir=data) == {"runs": [], "next": None}


def test_run_start_over_several_folders_starts_one_run_each_and_replays(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first, second = make_docs(tmp_path / "first", 2), make_docs(tmp_path / "second", 3)
    ok("base", "create", "kb", data_dir=data)

    started = ok("run", "start", "kb", str(first), str(second), data_dir=data)["runs"]
    assert [r["outcome"] for r in started] == ["created", "created"]
    assert len({r["run_id"] for r in started}) == 2
    again = ok("run", "start", "kb", str(first), str(second), data_dir=data)["runs"]
    assert [(r["outcome"], r["run_id"]) for r in again] == [("replayed", r["run_id"]) for r in started]

    error = refused(2, "run", "start", "kb", str(first), str(second), "--key", "k", data_dir=data)
    assert "one FOLDER" in error["message"]

    ok("worker", "--until-idle", data_dir=data)
    sizes = [ok("run", "show", str(r["run_id"]), data_dir=data)["progress"] for r in started]
    assert sizes == [{"settled": 2, "total": 2}, {"settled": 3, "total": 3}]
