"""Private from the first second: a new data directory is owner-only before anything is created in it, and
every file in it — the GUI lock, the worker's rotated log, the database, the MCP token — is 0600, whatever
the umask; a token file that holds no usable token is replaced whole, never recursed on.

Crafted inputs: a desktop's umask (022), an existing world-readable lock file and log, a token file that
is empty, holds bytes that are not a token, cannot be read, or is a FIFO.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.main import acquire_instance_lock
from app.worker_launch import worker_argv
from knowledge.agents import tokens
from knowledge.compose import open_quire
from knowledge.errors import DataDirInUse
from knowledge.instance_lock import LOCK_NAME, GuiInstanceLock
from knowledge.store.private_log import LOG_BACKUPS, MAX_LOG_BYTES, WORKER_LOG, worker_log_handler
from tests.conftest import quire_cli
from tests.support.fswatch import tree_state
from tests.support.unprivileged import as_nobody, chown_tree


@pytest.fixture(autouse=True)
def desktop_umask() -> Iterator[None]:
    """A desktop's usual umask: without care, new files would be readable by every local user."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _assert_owner_only(root: Path) -> None:
    for rel, mode in _modes(root).items():
        expected = 0o700 if (root / rel).is_dir() else 0o600
        assert mode == expected, f"{rel} is {oct(mode)}, not {oct(expected)}"


def test_a_data_dir_made_by_the_cli_is_owner_only_throughout(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "data"  # neither exists yet
    before = tree_state(tmp_path)
    assert quire_cli("base", "create", "kb", "--precision", "fp32", data_dir=data_dir).returncode == 0
    assert quire_cli("mcp", "--enable", data_dir=data_dir).returncode == 0
    _assert_owner_only(tmp_path / "new")
    assert {"quire.sqlite3", "agents", "agents/mcp-token"} <= set(_modes(data_dir))
    created = set(tree_state(tmp_path)) - set(before)
    assert all(p == "new" or p.startswith("new/") for p in created)  # nothing outside the new tree


def test_open_quire_makes_the_directory_private_before_anything_is_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "fresh"
    seen: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: str | bytes | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object) -> int:
        if Path(os.fsdecode(path)).parent == data_dir:  # the first files made in the data directory
            seen.append((Path(os.fsdecode(path)).name, stat.S_IMODE(data_dir.stat().st_mode)))
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    quire = open_quire(data_dir)
    try:
        monkeypatch.undo()
        tokens.ensure_token(data_dir)
        _assert_owner_only(data_dir)  # while open: -wal and -shm too
        assert {"quire.sqlite3-wal", "quire.sqlite3-shm"} <= set(_modes(data_dir))
    finally:
        quire.close()
    assert seen and seen[0][0] == "quire.sqlite3" and {mode for _name, mode in seen} == {0o700}


def test_the_gui_lock_is_made_in_an_owner_only_directory_and_is_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "a" / "data"
    mode_when_locked: list[int] = []
    real_open = os.open

    def spy(path: str | bytes | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object) -> int:
        if os.fsdecode(path).endswith(LOCK_NAME):
            mode_when_locked.append(stat.S_IMODE(data_dir.stat().st_mode))
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    lock, refusal = acquire_instance_lock(data_dir)  # what the window does first
    monkeypatch.undo()
    assert lock is not None and refusal is None
    try:
        assert mode_when_locked == [0o700]  # the directory was private before the lock file existed
        _assert_owner_only(tmp_path / "a")
        with pytest.raises(DataDirInUse):
            GuiInstanceLock(data_dir).acquire()
    finally:
        lock.release()
    # a lock file left world-readable by an older version is made owner-only when taken
    (data_dir / LOCK_NAME).chmod(0o644)
    again = GuiInstanceLock(data_dir)
    again.acquire()
    again.release()
    assert stat.S_IMODE((data_dir / LOCK_NAME).stat().st_mode) == 0o600


def test_worker_log_is_rotated_and_every_file_stays_0600(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    assert (MAX_LOG_BYTES, LOG_BACKUPS) == (10 * 1024 * 1024, 3)
    assert worker_argv(str(data_dir))[-4:-2] == ["worker", "--log"]  # the window's worker logs there
    (data_dir / WORKER_LOG).write_text("from an older version\n")
    (data_dir / WORKER_LOG).chmod(0o644)
    before = tree_state(tmp_path, skip=data_dir)
    handler = worker_log_handler(data_dir, max_bytes=2_000, backups=LOG_BACKUPS)
    logger = logging.getLogger("quire.test.rotation")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(400):
            logger.warning("line %d of a long-running worker's log, padded to a realistic length", n)
    finally:
        logger.removeHandler(handler)
        handler.close()
    logs = sorted(p.name for p in data_dir.iterdir() if p.name.startswith(WORKER_LOG))
    assert logs == [WORKER_LOG, f"{WORKER_LOG}.1", f"{WORKER_LOG}.2", f"{WORKER_LOG}.3"]  # no .4: three kept
    _assert_owner_only(data_dir)
    assert all((data_dir / name).stat().st_size <= 2_000 for name in logs)
    assert "line 399" in (data_dir / WORKER_LOG).read_text()
    assert tree_state(tmp_path, skip=data_dir) == before

    # the real worker process, as the window starts it: its log exists and is owner-only
    done = quire_cli("worker", "--until-idle", "--log", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    _assert_owner_only(data_dir)


@pytest.mark.parametrize("crafted", ["empty", "not ascii", "oversized", "unreadable", "fifo"])
def test_a_token_file_without_a_usable_token_is_replaced_whole(tmp_path: Path, data_dir: Path, crafted: str) -> None:
    path = tokens.token_path(data_dir)
    path.parent.mkdir(mode=0o700)
    if crafted == "fifo":
        os.mkfifo(path, 0o600)
    else:
        contents = {"empty": b"", "not ascii": b"\xff\xfe\x00", "oversized": b"t" * 5000, "unreadable": b"old-token"}
        path.write_bytes(contents[crafted])
        path.chmod(0o000 if crafted == "unreadable" else 0o600)
    if crafted == "unreadable" and os.access(path, os.R_OK):
        _an_unreadable_token_is_replaced_for_nobody()  # root reads a 000 file: the check runs as nobody
        return
    before = tree_state(tmp_path, skip=data_dir)
    token = tokens.ensure_token(data_dir)  # the old code recursed here until RecursionError
    assert len(token) >= 40 and path.read_text() == token
    assert stat.S_ISREG(path.lstat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tokens.ensure_token(data_dir) == token  # stable once there
    assert sorted(p.name for p in path.parent.iterdir()) == [tokens.TOKEN_FILE]  # no temporary left behind
    assert tree_state(tmp_path, skip=data_dir) == before


def _an_unreadable_token_is_replaced_for_nobody() -> None:
    folder = Path(tempfile.mkdtemp(prefix="quire-token-"))  # pytest's tmp_path is root-only (0700)
    try:
        folder.chmod(0o755)
        data_dir = folder / "data"
        path = tokens.token_path(data_dir)
        path.parent.mkdir(mode=0o700, parents=True)
        path.write_bytes(b"old-token")
        path.chmod(0o000)
        chown_tree(data_dir)

        def replace() -> dict[str, object]:
            assert not os.access(path, os.R_OK)  # the kernel refuses nobody, unlike root
            token = tokens.ensure_token(data_dir)
            return {
                "token": token,
                "file": path.read_text(),
                "mode": stat.S_IMODE(path.stat().st_mode),
                "again": tokens.ensure_token(data_dir),
                "names": sorted(p.name for p in path.parent.iterdir()),
            }

        got = as_nobody(replace)
        assert "child failed" not in got, got
        assert len(got["token"]) >= 40 and got["file"] == got["token"] == got["again"]
        assert got["mode"] == 0o600 and got["names"] == [tokens.TOKEN_FILE]
    finally:
        shutil.rmtree(folder)


def test_the_cli_replaces_an_empty_token_file(data_dir: Path) -> None:
    assert quire_cli("mcp", "--enable", data_dir=data_dir).returncode == 0
    tokens.token_path(data_dir).write_bytes(b"")
    shown = quire_cli("--json", "mcp", "--print-config", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    token = tokens.read_token(data_dir)
    assert token and f"Bearer {token}" in shown.stdout
