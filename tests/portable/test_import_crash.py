"""SIGKILL an import at random points; after a restart no partial base is visible and a rerun succeeds.

The import runs in a real child process (``knowledge.portable.import_`` through a small driver that
prints each progress event); the test kills it after a random number of events — each event follows a
committed transaction, and the kill lands wherever the child is in the work that follows.
"""

from __future__ import annotations

import random
import signal
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.errors import NotFound
from knowledge.library import bases
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc
from tests.portable.helpers import base_content, synthetic_base, table_counts

DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from knowledge.portable.import_ import import_base
    from knowledge.compose import open_quire

    quire = open_quire(Path(sys.argv[1]))
    def progress(stage, done, total):
        print(stage, done, total, flush=True)
    import_base(quire, Path(sys.argv[2]), progress=progress)
    print("finished", flush=True)
    """
)


@pytest.fixture(scope="module")
def export_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("source")
    quire = open_quire(root / "data")
    try:
        # enough pages of items and chunks that kills land in every stage
        synthetic_base(quire, "kb", files=700, chunks_per_file=6)
        file = root / "kb.quirebase"
        export_base(quire, "kb", file)
        return file, base_content(quire, "kb")
    finally:
        quire.close()


def _kill_import_after(data_dir: Path, file: Path, seed: int, low: int = 2) -> list[str]:
    """Kill after a random one of the ~16 progress events, a random few milliseconds into what follows."""
    rng = random.Random(seed)
    events = rng.randint(low, 14)
    proc = python_proc("-c", DRIVER, str(data_dir), str(file))
    seen: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line.strip())
        if len(seen) >= events:
            time.sleep(rng.uniform(0, 0.03))  # not a wait for anything: it moves the kill point
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else proc.returncode
    return seen


def _assert_nothing_visible(quire: Quire) -> None:
    assert bases.list_bases(quire.db) == []
    with pytest.raises(NotFound):
        bases.get_base(quire.db, "kb")
    with pytest.raises(NotFound):
        search(quire, "kb", "protein", mode="keyword")


@pytest.mark.parametrize("seed", [1, *(pytest.param(s, marks=pytest.mark.soak) for s in (2, 3, 4))])
def test_killed_import_resumes_on_rerun(tmp_path: Path, export_file: tuple[Path, dict[str, object]], seed: int) -> None:
    file, expected = export_file
    data_dir = tmp_path / "data"
    seen = _kill_import_after(data_dir, file, seed)
    assert "finished" not in seen, "the import ended before the kill; use a larger base"
    quire = open_quire(data_dir)
    try:
        _assert_nothing_visible(quire)
        result = import_base(quire, file)
        if any(s.startswith(("items", "chunks", "blobs")) for s in seen):
            assert result.resumed  # the hidden base existed: the rerun took it up where it stopped
        assert base_content(quire, "kb") == expected
        with quire.db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM base_imports")).scalar_one() == 0
    finally:
        quire.close()


@pytest.mark.parametrize("seed", [5, pytest.param(6, marks=pytest.mark.soak)])
def test_killed_import_is_cleaned_up_at_the_next_start(
    tmp_path: Path, export_file: tuple[Path, dict[str, object]], seed: int
) -> None:
    file, expected = export_file
    data_dir = tmp_path / "data"
    empty = open_quire(data_dir)
    before = table_counts(empty)
    empty.close()
    seen = _kill_import_after(data_dir, file, seed, low=3)  # after the first page of items: a partial base
    assert "finished" not in seen
    quire = open_quire(data_dir)
    try:
        _assert_nothing_visible(quire)
        with quire.db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM base_imports")).scalar_one() == 1
            assert conn.execute(text("SELECT count(*) FROM items")).scalar_one() > 0
        quire.recover()  # what a worker or the window does at start
        after = table_counts(quire)
        after.pop("blob_files")
        before.pop("blob_files", None)
        assert after == before
        assert not [p for p in quire.blobs_dir.rglob("*") if p.is_file() and not p.name.startswith(".")]
        result = import_base(quire, file)
        assert not result.resumed
        assert base_content(quire, "kb") == expected
    finally:
        quire.close()
