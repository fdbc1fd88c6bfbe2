"""The window on a team store: File ▸ "Connect to a team store…", add a folder, a worker on another machine
indexes it, the search panel finds it; the window's own worker learns the store from its environment.

Real PostgreSQL (pgvector) and Redis on loopback (tests/support/servers.py), real ``quire worker`` processes with
the real model; the window walks and uploads the folder itself, as ``quire add`` does, so the worker on
``server`` reads only the copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from pytestqt.qtbot import QtBot
from sqlalchemy import text

from app.connect_dialog import ConnectDialog
from app.team_store import TeamStore
from app.window import MainWindow
from knowledge import paths
from knowledge.compose import open_team_quire
from knowledge.ingest.embedding import DEFAULT_MODEL_ID
from knowledge.ingest.models import model_spec
from knowledge.library import bases
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, load_all, tree_items
from tests.conftest import REPO
from tests.engines.test_team_cli import secret_of
from tests.support.files import write_tree
from tests.support.servers import RedisServer

pytestmark = pytest.mark.engines

NOTES = {
    "anvil.md": "A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.\n",
    "deep/quartz.txt": "Quartz crystals oscillate at a steady frequency inside wristwatches.\n",
}


def team_store_with_a_base(url: str, local: Path) -> None:
    """``quire store init`` and ``base create`` done beforehand, as another member of the team would."""
    store = open_team_quire(url, data_dir=local)
    try:
        spec = model_spec(DEFAULT_MODEL_ID)
        bases.create_base(store.db, "team", model_id=spec.model_id, dimension=spec.dimension, precision="fp32")
    finally:
        store.close()


def without_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = (f"{parts.username}@" if parts.username else "") + f"{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def worker_elsewhere(url: str, queue: str, local: Path) -> subprocess.CompletedProcess[str]:
    """``quire worker --until-idle`` on another machine (``QUIRE_HOST=server``), the store in its environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUIRE_STORE": url, "QUIRE_QUEUE": queue, "QUIRE_HOST": "server"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(local), "--json", "worker", "--until-idle"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_window_connects_to_a_team_store_adds_a_folder_and_finds_it(
    qtbot: QtBot,
    open_window: WindowFactory,
    postgres_url: str,
    redis_server: RedisServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = secret_of(postgres_url)
    team_store_with_a_base(postgres_url, tmp_path / "colleague")
    monkeypatch.setenv("QUIRE_HOST", "laptop")
    window = open_window()  # this machine's own data directory first
    assert window.store is None and window.menus.act_connect.isEnabled()

    dialog = window.menus.open_connect()
    assert isinstance(dialog, ConnectDialog)
    dialog.url.setText(without_password(postgres_url))
    dialog.password.setText(secret)  # typed, never echoed, never remembered
    dialog.queue.setText(redis_server.url)
    with qtbot.waitSignal(dialog.opened, timeout=30_000) as reopened:
        dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    team: MainWindow = reopened.args[0]
    qtbot.addWidget(team)
    try:
        qtbot.waitUntil(lambda: team.ctx.ready and [b.name for b in team.ctx.bases] == ["team"], timeout=30_000)
        assert team.store is not None and secret not in team.windowTitle() and "***" in team.windowTitle()
        assert not team.backup_menu.backup_action.isEnabled()  # pg_dump's job
        remembered = json.loads(paths.config_file().read_text())["team_store"]
        assert remembered["url"] == without_password(postgres_url) and secret not in json.dumps(remembered)
        assert remembered["queue"] == without_password(redis_server.url)

        folder = write_tree(tmp_path / "home" / "notes", NOTES)
        team.add_paths([folder])
        db = team.ctx.quire.db  # type: ignore[union-attr]

        def uploaded() -> bool:
            with db.read() as conn:
                copies = conn.execute(
                    text(
                        "SELECT count(*) FROM items i JOIN blob_contents c ON c.sha256 = i.blob_sha256 "
                        "WHERE i.type = 'file'"
                    )
                ).scalar_one()
                walk = conn.execute(text("SELECT status FROM jobs WHERE type = 'knowledge.prepare-root'")).scalar()
            return copies == len(NOTES) and walk == "completed"

        qtbot.waitUntil(uploaded, timeout=60_000)  # the window walks the folder and uploads its files
        with db.read() as conn:
            walk = conn.execute(text("SELECT host, status FROM jobs WHERE type = 'knowledge.prepare-root'")).one()
            owners = {r[0] for r in conn.execute(text("SELECT owner FROM items"))}
        assert tuple(walk) == ("laptop", "completed")  # walked here, on the person's machine
        assert owners == {"person:postgres"}  # the database role that connected, not this machine's user

        done = worker_elsewhere(postgres_url, redis_server.url, tmp_path / "server")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["jobs_finished"] >= 1

        def settled() -> bool:
            load_all(qtbot, team.model)
            found = tree_items(team.model)
            return len(found) == 4 and {i.status for i in found} == {"completed"}  # notes, deep and two files

        qtbot.waitUntil(settled, timeout=WORKER_TIMEOUT_MS)
        panel = team.search_panel
        panel.query.setText("horseshoes on an anvil")
        panel.mode.setCurrentText("hybrid")
        with qtbot.waitSignal(panel.searched, timeout=WORKER_TIMEOUT_MS) as searched:
            panel.run_search()
        hits = searched.args[0]
        assert hits and Path(hits[0].source_path).name == "anvil.md"
    finally:
        team.shutdown()
        team.close()


def test_the_windows_worker_gets_the_store_from_its_environment_never_its_arguments(
    qtbot: QtBot, data_dir: Path, postgres_url: str, tmp_path: Path
) -> None:
    from tests.support.prompters import ScriptedPrompter

    secret = secret_of(postgres_url)
    team_store_with_a_base(postgres_url, tmp_path / "colleague")
    window = MainWindow(data_dir, prompter=ScriptedPrompter(), start_worker=True, store=TeamStore(postgres_url))
    qtbot.addWidget(window)
    window.show()
    try:
        with qtbot.waitSignal(window.started, timeout=30_000):
            window.start()
        pid = window.worker.pid
        assert pid is not None

        def argv() -> list[str]:  # the launcher execs into `quire … worker` in the same process
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            return [a.decode() for a in raw.split(b"\0") if a]

        qtbot.waitUntil(lambda: "worker" in argv(), timeout=30_000)
        assert not any(secret in a for a in argv()), argv()
        assert "--store" not in argv() and not any("postgresql" in a for a in argv())
        environ = dict(
            e.decode().partition("=")[::2] for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if e
        )
        assert environ["QUIRE_STORE"] == postgres_url and "QUIRE_QUEUE" not in environ

        db = window.ctx.quire.db  # type: ignore[union-attr]

        def registered() -> bool:  # the worker opened the team store itself: its session is there
            with db.read() as conn:
                found = conn.execute(
                    text("SELECT count(*) FROM worker_sessions WHERE pid = :p AND ended_at IS NULL"), {"p": pid}
                ).scalar_one()
            return bool(found)

        qtbot.waitUntil(registered, timeout=WORKER_TIMEOUT_MS)
    finally:
        window.shutdown()
        window.close()


def test_a_refused_login_is_said_in_the_dialog_and_the_window_keeps_its_data(
    qtbot: QtBot, open_window: WindowFactory, postgres_url: str, tmp_path: Path
) -> None:
    team_store_with_a_base(postgres_url, tmp_path / "colleague")
    window = open_window()
    dialog = window.menus.open_connect()
    dialog.url.setText(without_password(postgres_url))
    dialog.password.setText("not-the-password")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: dialog.buttons.isEnabled() and "refused" in dialog.error.text(), timeout=30_000)
    assert "not-the-password" not in dialog.error.text() and dialog.isVisible()
    assert window.isVisible() and window.store is None and window.ctx.ready
    assert "team_store" not in (paths.config_file().read_text() if paths.config_file().exists() else "")
