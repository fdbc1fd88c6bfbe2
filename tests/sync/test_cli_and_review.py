"""The ``quire sync`` commands (real processes), review mode and dismissal, two reconcilers at once.

Review mode and the two reconcilers also run on a team store (ENGINES): the other processes reach it through
QUIRE_STORE, as a person's shell would (tests/support/engine_fixtures.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import sync
from knowledge.library import audit
from knowledge.runtime import Quire
from tests.conftest import REPO, quire_cli
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree
from tests.sync.helpers import drain, keyword_hits, live_paths, reconcile_now, synced_folder

FILES = {"one.txt": "The first file mentions wombatine.", "sub/two.txt": "The second mentions dugongish."}


def _age(path: Path) -> None:
    st = os.stat(path)
    os.utime(path, (st.st_atime - 10, st.st_mtime - 10))


# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_review_mode_changes_wait_until_applied_and_dismissal_sticks(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    _item, root = synced_folder(quire, folder, mode="review")
    (folder / "three.txt").write_text("A third file about okapiform.")
    (folder / "four.txt").write_text("A fourth file about tapirine.")
    _age(folder / "three.txt")
    _age(folder / "four.txt")
    (folder / "one.txt").unlink()

    out = reconcile_now(quire, root.id)
    assert out.pending == 3 and out.applied == 0
    drain(quire)
    assert keyword_hits(quire, "okapiform") == [] and keyword_hits(quire, "wombatine") == ["one.txt"]
    assert {p["path"] for p in sync.list_pending(quire, [root.id])} == {"three.txt", "four.txt", "one.txt"}

    assert sync.dismiss(quire, root.id, ["four.txt"], "person:tester") == 1
    reconcile_now(quire, root.id)  # a later scan does not bring a dismissed, unchanged file back
    assert {p["path"] for p in sync.list_pending(quire, [root.id])} == {"three.txt", "one.txt"}

    applied = reconcile_now(quire, root.id, apply_review=True, actor="person:tester")
    assert applied.applied == 2 and applied.pending == 0
    drain(quire)
    assert keyword_hits(quire, "okapiform") == ["three.txt"]
    assert keyword_hits(quire, "wombatine") == []
    assert keyword_hits(quire, "tapirine") == []  # dismissed: never entered the base
    entries = audit.list_entries(quire.db, actions=[audit.SYNC_BATCH_APPLIED])
    assert entries[-1].actor == "person:tester" and entries[-1].payload["mode"] == "review"
    assert entries[-1].payload["counts"] == {"added": 1, "removed": 1}  # what was applied, per kind

    (folder / "four.txt").write_text("A fourth file about tapirine, edited: it changed again.")
    _age(folder / "four.txt")
    reconcile_now(quire, root.id)
    assert [p["path"] for p in sync.list_pending(quire, [root.id])] == ["four.txt"]  # back once it changed


def test_cli_on_status_run_pending_and_add_sync(data_dir: Path, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    added = quire_cli("--json", "add", "kb", str(folder), "--sync", data_dir=data_dir)
    assert added.returncode == 0, added.stderr
    item = json.loads(added.stdout)["items"][0]
    assert item["sync"]["mode"] == "auto"
    worked = quire_cli("worker", "--until-idle", data_dir=data_dir)
    assert worked.returncode == 0, worked.stderr[-3000:]
    status = json.loads(quire_cli("--json", "sync", "status", "kb", data_dir=data_dir).stdout)
    assert [r["item_id"] for r in status["roots"]] == [item["id"]]
    (folder / "sub" / "five.txt").write_text("Five is about manateeish.")
    _age(folder / "sub" / "five.txt")
    run = quire_cli("--json", "sync", "run", "kb", str(item["id"]), data_dir=data_dir)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["counts"]["added"] == 1
    assert quire_cli("sync", "on", "kb", "999", data_dir=data_dir).returncode == 3
    assert quire_cli("sync", "on", "kb", str(item["id"]), "--mode", "nope", data_dir=data_dir).returncode == 2
    review = quire_cli("--json", "sync", "on", "kb", str(item["id"]), "--mode", "review", data_dir=data_dir)
    assert json.loads(review.stdout)["mode"] == "review"
    assert json.loads(quire_cli("--json", "sync", "pending", data_dir=data_dir).stdout) == {"pending": [], "next": None}
    off = quire_cli("--json", "sync", "off", "kb", str(item["id"]), data_dir=data_dir)
    assert json.loads(off.stdout)["was_synced"] is True
    assert json.loads(quire_cli("--json", "sync", "status", data_dir=data_dir).stdout) == {"roots": [], "next": None}


HOLDER = r"""
import os
import sys
from pathlib import Path
from knowledge import sync
from knowledge.compose import open_quire, open_team_quire
import importlib
rec = importlib.import_module("knowledge.sync.reconcile")

data_dir, root_id, gate = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
store = os.environ.get("QUIRE_STORE")  # a team store, as the CLI would take it
quire = open_team_quire(store, data_dir=data_dir) if store else open_quire(data_dir)
real_claim = rec.claim

def claim_then_wait(*a, **k):
    out = real_claim(*a, **k)
    (gate / "claimed").write_text("1")
    while not (gate / "release").exists():  # the test holds this reconcile between claim and apply
        import time; time.sleep(0.01)
    return out

rec.claim = claim_then_wait
outcome = sync.reconcile(quire, root_id, quire.db.write)
print(outcome.applied, outcome.stood_down)
"""


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_two_reconcilers_in_two_processes_exactly_one_applies(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    item_id, root = synced_folder(quire, folder)
    for n in range(5):
        (folder / f"new{n}.txt").write_text(f"New file {n} about sealionite.")
        _age(folder / f"new{n}.txt")
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(quire.data_dir), str(root.id), str(gate)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    from tests.conftest import wait_until

    wait_until(lambda: (gate / "claimed").exists() or holder.poll() is not None, timeout=120)
    assert (gate / "claimed").exists(), holder.communicate()
    second = quire_cli("--json", "sync", "run", "kb", str(item_id), data_dir=quire.data_dir)
    assert second.returncode == 4, second.stdout + second.stderr  # stood down, wrote nothing
    assert json.loads(second.stdout)["applied"] == 0
    (gate / "release").write_text("1")
    stdout, stderr = holder.communicate(timeout=120)
    assert holder.returncode == 0, stderr
    assert stdout.split() == ["5", "None"]
    with quire.db.read() as conn:
        names = conn.execute(text("SELECT relative_path FROM items WHERE relative_path LIKE 'new%'")).scalars().all()
        cursor = conn.execute(text("SELECT cursor_generation, scan_generation FROM sync_roots")).one()
    assert sorted(names) == [f"new{n}.txt" for n in range(5)]  # once each
    assert cursor[0] == cursor[1]


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_two_reconcilers_racing_freely_apply_once(quire: Quire, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", FILES)
    item_id, _root = synced_folder(quire, folder)
    for n in range(40):
        (folder / f"race{n}.txt").write_text(f"Race file {n} about dolphinate.")
        _age(folder / f"race{n}.txt")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [
        sys.executable,
        "-m",
        "app.cli",
        "--data-dir",
        str(quire.data_dir),
        "--json",
        "sync",
        "run",
        "kb",
        str(item_id),
    ]
    procs = [
        subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [p.communicate(timeout=180) for p in procs]
    applied = [json.loads(out)["applied"] for out, _err in results]
    assert sorted(applied) in ([0, 40],), results  # one applied everything; the other stood down or found nothing
    assert len([n for n in live_paths(quire) if n.startswith("race")]) == 40
