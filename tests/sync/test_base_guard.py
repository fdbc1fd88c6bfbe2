"""A synced root whose base is locked or failed writes nothing into it: each batch judges the base in its own
write transaction (also when the base is locked while the scan runs), the root shows why it waits, and the
first reconcile after the base takes writes again applies what is still there."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge import sync
from knowledge.library import bases
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.knowledge.helpers import integrity_ok
from tests.support.files import write_tree
from tests.sync.helpers import drain, keyword_hits, live_paths, reconcile_now, synced_folder

reconcile_module = importlib.import_module("knowledge.sync.reconcile")  # the package exports a function of that name


def _lock(quire: Quire) -> None:
    bases.set_locked(quire.db, "kb", True)


def _fail(quire: Quire) -> None:
    with quire.db.write() as conn:
        conn.execute(text("UPDATE bases SET status = 'failed', status_reason = 'model missing' WHERE name = 'kb'"))


def _unlock(quire: Quire) -> None:
    bases.set_locked(quire.db, "kb", False)


def _heal(quire: Quire) -> None:
    with quire.db.write() as conn:
        conn.execute(text("UPDATE bases SET status = 'ok', status_reason = NULL WHERE name = 'kb'"))


def _new_file(folder: Path) -> None:
    path = folder / "late.txt"
    path.write_text("A late file about the quetzalcoatlus.")
    st = os.stat(path)
    os.utime(path, (st.st_atime - 10, st.st_mtime - 10))  # older than the quiet period


def _root(quire: Quire, root_id: int) -> sync.SyncRoot | None:
    return next((r for r in sync.list_roots(quire.db) if r.id == root_id), None)


def _jobs_and_items(quire: Quire) -> tuple[int, int]:
    with quire.db.read() as conn:
        return (
            conn.execute(text("SELECT count(*) FROM jobs WHERE type = 'knowledge.index-documents'")).scalar_one(),
            conn.execute(text("SELECT count(*) FROM items")).scalar_one(),
        )


@pytest.mark.parametrize(
    ("block", "unblock", "why"), [(_lock, _unlock, "locked"), (_fail, _heal, "model missing")]
)
def test_a_blocked_base_takes_nothing_and_the_root_says_why(
    quire: Quire,
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    block: Callable[[Quire], None],
    unblock: Callable[[Quire], None],
    why: str,
) -> None:
    folder = write_tree(tmp_path / "f", {"first.txt": "The first file mentions the archaeopteryx."})
    _item, root = synced_folder(quire, folder)
    _new_file(folder)
    before, start = _jobs_and_items(quire), _root(quire, root.id)
    assert start is not None
    real_scan = reconcile_module.scan

    def scan_while_the_base_is_blocked(*args: Any, **kwargs: Any) -> Any:
        diff = real_scan(*args, **kwargs)
        block(quire)  # a person locks the base (or it fails) after the scan, before the first batch
        return diff

    monkeypatch.setattr(reconcile_module, "scan", scan_while_the_base_is_blocked)
    outcome = reconcile_now(quire, root.id)
    monkeypatch.setattr(reconcile_module, "scan", real_scan)

    assert outcome.stood_down is not None and why in outcome.stood_down
    assert _jobs_and_items(quire) == before and "late.txt" not in live_paths(quire)
    waiting = _root(quire, root.id)
    assert waiting is not None and waiting.state == "waiting" and why in (waiting.waiting_for or "")
    assert waiting.scan_owner is None and waiting.cursor_generation == start.cursor_generation
    shown = quire_cli("sync", "status", data_dir=data_dir)
    assert shown.returncode == 0 and "waiting" in shown.stdout and why in shown.stdout, shown.stdout

    again = reconcile_now(quire, root.id)  # still blocked: still nothing
    assert again.stood_down is not None and _jobs_and_items(quire) == before

    unblock(quire)
    applied = reconcile_now(quire, root.id)
    assert applied.stood_down is None and applied.counts.get("added") == 1
    drain(quire)
    assert keyword_hits(quire, "quetzalcoatlus") == ["late.txt"]
    healed = _root(quire, root.id)
    assert healed is not None and healed.waiting_for is None and healed.state != "waiting"
    assert integrity_ok(quire)
