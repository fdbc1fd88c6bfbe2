"""File ▸ "Connect to a team store…" without a server: what the dialog refuses, what it remembers (never a
password), and a window on a data directory whose worker never follows a store from the environment.
The connection itself, against real servers, is tests/app/test_team_window.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.connect_dialog import store_from_fields
from app.team_store import TeamStore
from app.worker_process import WorkerProcess
from knowledge import paths
from tests.app.conftest import WindowFactory


def test_the_dialog_refuses_what_is_not_a_store_and_the_window_stays(qtbot: QtBot, open_window: WindowFactory) -> None:
    window = open_window()
    assert [a.text() for a in window.menuBar().actions()[0].menu().actions() if "team store" in a.text()] == [
        "Connect to a team store…"
    ]
    dialog = window.menus.open_connect()
    dialog.url.setText(str(Path.home() / "my-data"))
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert "PostgreSQL URL" in dialog.error.text() and dialog.isVisible()
    dialog.url.setText("postgresql://me@db.example.org/quire")
    dialog.queue.setText("http://db.example.org/queue")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert "Redis URL" in dialog.error.text() and window.isVisible() and window.store is None


def test_a_typed_password_joins_the_url_in_memory_only() -> None:
    store = store_from_fields("postgresql://me@db.example.org:5433/quire", "p@ss:w/rd", "")
    assert store.url == "postgresql://me:p%40ss%3Aw%2Frd@db.example.org:5433/quire" and store.queue is None
    assert "p%40ss" not in repr(store) and "p%40ss" not in store.shown and "***" in store.shown
    assert store.worker_environment() == {"QUIRE_STORE": store.url}
    kept = store_from_fields("postgresql://me:given@db/quire", "typed", "redis://:q@db:6379/0")
    assert kept.url == "postgresql://me:given@db/quire"  # the URL's own password wins over the field
    assert kept.worker_environment()["QUIRE_QUEUE"] == "redis://:q@db:6379/0"


def test_a_remembered_store_has_no_password() -> None:
    paths.remember_team_store("postgresql://me:secret@db.example.org/quire", "redis://:qsecret@db.example.org:6379/0")
    assert paths.remembered_team_store() == ("postgresql://me@db.example.org/quire", "redis://db.example.org:6379/0")
    assert "secret" not in paths.config_file().read_text()
    assert json.loads(paths.config_file().read_text())["team_store"]["url"] == "postgresql://me@db.example.org/quire"
    paths.remember_team_store(None)
    assert paths.remembered_team_store() is None


def test_a_local_windows_worker_never_follows_a_store_from_the_environment(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_STORE", "postgresql://me:secret@db.example.org/quire")
    monkeypatch.setenv("QUIRE_QUEUE", "redis://db.example.org:6379/0")
    local = WorkerProcess(data_dir)._environment()
    assert not local.contains("QUIRE_STORE") and not local.contains("QUIRE_QUEUE")
    team = WorkerProcess(data_dir, store=TeamStore("postgresql://me:other@db/q"))._environment()
    assert team.value("QUIRE_STORE") == "postgresql://me:other@db/q" and not team.contains("QUIRE_QUEUE")
