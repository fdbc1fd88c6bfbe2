"""A `quire add` process SIGKILLed at known points inside its transactions leaves no half-state, and run
again converges to exactly one copy of every source.

The child (`tests.support.cli_paused`) announces the point it stopped at through a marker file and waits
there; the test kills it only after reading the marker, so every kill is proven to land mid-command."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from tests.conftest import python_proc, quire_cli, wait_until
from tests.support.files import write_tree

FOLDERS, FILES_PER_FOLDER, LOOSE = 4, 3, 24


def _sources(root: Path) -> list[Path]:
    inputs: list[Path] = []
    for f in range(FOLDERS):
        files = {f"doc{n}.txt": f"Folder {f} file {n} on basalt." for n in range(FILES_PER_FOLDER)}
        inputs.append(write_tree(root / f"folder{f}", files))
    for n in range(LOOSE):
        path = root / f"loose{n}.md"
        path.write_text(f"# Loose {n}\n\nA loose note about granite number {n}.")
        inputs.append(path)
    return inputs


def _kill_at(data_dir: Path, tmp_path: Path, point: str, count: int, inputs: list[str]) -> None:
    """Run ``quire add`` until it stops at the ``count``-th ``point``, then SIGKILL it there."""
    marker = tmp_path / f"paused-{point}-{count}"
    proc = python_proc(
        "-m", "tests.support.cli_paused", point, str(count), str(marker), "--data-dir", str(data_dir), "add", "kb",
        *inputs,
    )
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, timeout=120)
        assert marker.exists(), f"the add finished without reaching {point} #{count}: {proc.communicate()}"
        proc.send_signal(signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert stdout == ""  # killed before it could answer: the command never finished


def _state(data_dir: Path) -> dict[str, object]:
    quire = open_quire(data_dir)
    try:
        with quire.db.read() as conn:
            roots = conn.execute(
                text("SELECT source_path, job_id FROM items WHERE parent_id IS NULL AND status != 'deleting'")
            ).all()
            return {
                "integrity": conn.execute(text("PRAGMA integrity_check")).scalar_one(),
                "roots": roots,
                "items": conn.execute(text("SELECT count(*) FROM items")).scalar_one(),
                "jobs": conn.execute(text("SELECT count(*) FROM jobs")).scalar_one(),
                # a job no item points at, or an item pointing at no job: a scheduling step half-kept
                "orphan_jobs": conn.execute(
                    text(
                        "SELECT count(*) FROM jobs WHERE id NOT IN (SELECT job_id FROM items WHERE job_id IS NOT NULL)"
                    )
                ).scalar_one(),
                "dangling": conn.execute(
                    text("SELECT count(*) FROM items WHERE job_id IS NOT NULL AND job_id NOT IN (SELECT id FROM jobs)")
                ).scalar_one(),
                "leaves": conn.execute(text("SELECT count(*) FROM items WHERE type = 'file'")).scalar_one(),
                "parked": conn.execute(text("SELECT count(*) FROM items WHERE status != 'completed'")).scalar_one(),
            }
    finally:
        quire.close()


# the inputs schedule as one prepare-root job per folder, in order, then one index job for the loose files
@pytest.mark.parametrize("scheduled", [2, FOLDERS])
def test_a_killed_add_rerun_converges_to_one_copy(tmp_path: Path, data_dir: Path, scheduled: int) -> None:
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    inputs = [str(p) for p in _sources(tmp_path / "src")]

    _kill_at(data_dir, tmp_path, "create", 17, inputs)  # 17 items written, the creating transaction open
    state = _state(data_dir)
    assert state["integrity"] == "ok"
    assert (state["items"], state["jobs"]) == (0, 0)  # the open transaction left nothing behind

    _kill_at(data_dir, tmp_path, "enqueue", scheduled + 1, inputs)  # inside the next scheduling transaction
    state = _state(data_dir)
    assert state["integrity"] == "ok"
    assert len(state["roots"]) == len(inputs)  # the creating transaction committed every root
    assert state["jobs"] == scheduled  # the groups before the kill kept their jobs, the one in flight none
    assert state["orphan_jobs"] == 0 and state["dangling"] == 0
    with_a_job = [r for r in state["roots"] if r.job_id is not None]
    assert len(with_a_job) == scheduled and all(Path(r.source_path).name.startswith("folder") for r in with_a_job)

    done = quire_cli("--json", "add", "kb", *inputs, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)["outcomes"]
    assert len(outcomes) == len(inputs)
    assert {o["outcome"] for o in outcomes} == {"already_present"}  # nothing made twice
    # the roots the kill left without a job are exactly the ones the re-run schedules again
    assert sum(bool(o.get("refreshed")) for o in outcomes) == len(inputs) - scheduled

    worker = quire_cli("worker", "--until-idle", data_dir=data_dir, timeout=600)
    assert worker.returncode == 0, worker.stderr
    state = _state(data_dir)
    assert state["integrity"] == "ok"
    per_source = Counter(r.source_path for r in state["roots"])
    assert set(per_source) == {str(Path(p).resolve()) for p in inputs}
    assert max(per_source.values()) == 1  # exactly one copy of every source
    assert state["leaves"] == FOLDERS * FILES_PER_FOLDER + LOOSE
    assert state["parked"] == 0


def test_add_answers_outcomes_in_json_and_text_and_refuses_a_missing_path(tmp_path: Path, data_dir: Path) -> None:
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    folder = write_tree(tmp_path / "lib", {"a.txt": "Alpha about quartz.", "b.txt": "Beta about mica."})

    missing = quire_cli("--json", "add", "kb", str(folder / "a.txt"), str(tmp_path / "nope.txt"), data_dir=data_dir)
    assert missing.returncode == 3
    assert json.loads(missing.stdout)["error"]["code"] == "not_found"

    first = json.loads(quire_cli("--json", "add", "kb", str(folder), data_dir=data_dir).stdout)
    again = quire_cli("--json", "add", "kb", str(folder), str(folder / "b.txt"), data_dir=data_dir)
    assert again.returncode == 0, again.stderr
    root = first["outcomes"][0]["item_id"]
    assert [(o["outcome"], o["item_id"]) for o in json.loads(again.stdout)["outcomes"]] == [
        ("already_present", root),
        ("already_covered", root),
    ]
    text_out = quire_cli("add", "kb", str(folder / "b.txt"), data_dir=data_dir).stdout
    assert "already covered" in text_out and "b.txt" in text_out
    quire = open_quire(data_dir)
    try:
        with quire.db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM items")).scalar_one() == 1  # the folder, not yet walked
    finally:
        quire.close()
