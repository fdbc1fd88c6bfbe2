"""A `quire add` process SIGKILLed at random points and run again converges to exactly one copy."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.job_types import open_quire
from tests.conftest import python_proc, quire_cli
from tests.support.files import write_tree


def _sources(root: Path) -> list[Path]:
    inputs: list[Path] = []
    for f in range(4):
        files = {f"doc{n}.txt": f"Folder {f} file {n} on basalt." for n in range(3)}
        inputs.append(write_tree(root / f"folder{f}", files))
    for n in range(24):
        path = root / f"loose{n}.md"
        path.write_text(f"# Loose {n}\n\nA loose note about granite number {n}.")
        inputs.append(path)
    return inputs


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_a_killed_add_rerun_converges_to_one_copy(tmp_path: Path, data_dir: Path, seed: int) -> None:
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    inputs = [str(p) for p in _sources(tmp_path / "src")]
    rng = random.Random(seed)
    for _round in range(2):  # two kills at random points, then a clean run
        proc = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "add", "kb", *inputs)
        time.sleep(rng.uniform(0.3, 2.5))  # the kill point (not synchronisation): anywhere in the command
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    done = quire_cli("--json", "add", "kb", *inputs, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)["outcomes"]
    assert len(outcomes) == len(inputs)
    assert {o["outcome"] for o in outcomes} <= {"created", "already_present"}

    worker = quire_cli("worker", "--until-idle", data_dir=data_dir, timeout=600)
    assert worker.returncode == 0, worker.stderr
    quire = open_quire(data_dir)
    try:
        with quire.db.read() as conn:
            rows = conn.execute(
                text("SELECT source_path, status FROM items WHERE parent_id IS NULL AND status != 'deleting'")
            ).all()
            per_source = Counter(r.source_path for r in rows)
            leaves = conn.execute(text("SELECT count(*) FROM items WHERE type = 'file'")).scalar_one()
            parked = conn.execute(text("SELECT count(*) FROM items WHERE status != 'completed'")).scalar_one()
    finally:
        quire.close()
    assert set(per_source) == {str(Path(p).resolve()) for p in inputs}
    assert max(per_source.values()) == 1  # exactly one copy of every source
    assert leaves == 4 * 3 + 24
    # a root the kill left without a job was scheduled again by the re-run, so nothing stays parked
    assert parked == 0


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
