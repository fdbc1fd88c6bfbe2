"""File ▸ "Connect to a team store…": a dialog taking the store's URL (and its queue's), and the window reopened
on that store; File ▸ "Use this machine's data" goes back.

The password: best none here at all — ``~/.pgpass`` or ``PGPASSWORD`` give it to the driver, as to every
``quire`` command. One typed in the password field (never echoed) stays in this process's memory and reaches
the window's worker through its environment (``app.team_store``); the dialog remembers the URLs in this
machine's per-user config without any password (``knowledge.paths.remember_team_store``), and shows a store
only redacted. The store is opened once in an ``Op`` before the window leaves what it has, so a wrong address,
a refused login or a database without Quire's schema is said in the dialog, which stays open.

Threading contract: main thread; the store is only reached in ``Op``s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout

from app import ops
from app.accessibility import name_controls
from app.cli.base import QUEUE_SCHEMES
from app.ops import Op
from app.team_store import TeamStore, check_store
from knowledge.errors import KnowledgeError
from knowledge.paths import remember_team_store, remembered_team_store
from knowledge.store.postgres import is_store_url, redacted

if TYPE_CHECKING:
    from app.window_face import WindowFace

_open_windows: list[WindowFace] = []  # windows opened here, kept alive until they close


def store_from_fields(url: str, password: str, queue: str) -> TeamStore:
    """The store the fields name; the typed password joins the URL in memory only. Refuses what is not a
    PostgreSQL URL (or not a Redis one for the queue) with a sentence, never echoing a password."""
    url, queue = url.strip(), queue.strip()
    if not is_store_url(url):
        raise ValueError(f"A team store is a PostgreSQL URL (postgresql://user@host/database), not {redacted(url)!r}.")
    if queue and urlsplit(queue).scheme.lower() not in QUEUE_SCHEMES:
        raise ValueError(f"The queue is a Redis URL (redis://host:6379/0), not {redacted(queue)!r}.")
    if password:
        parts = urlsplit(url)
        if parts.password is None:
            user = quote(parts.username or "", safe="")
            netloc = f"{user}:{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
            url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return TeamStore(url, queue or None)


class ConnectDialog(QDialog):
    """See the module docstring. ``opened`` carries the window reopened on the store (tests wait on it)."""

    opened = Signal(object)  # the new MainWindow

    def __init__(self, window: WindowFace) -> None:
        super().__init__(window)
        self.main_window = window
        self.setWindowTitle("Connect to a team store")
        self.setObjectName("connectDialog")
        self.url = QLineEdit()
        self.url.setPlaceholderText("postgresql://me@db.example.org/quire")
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("leave empty to use ~/.pgpass or PGPASSWORD")
        self.queue = QLineEdit()
        self.queue.setPlaceholderText("redis://db.example.org:6379/0 (optional: without it workers poll)")
        remembered = remembered_team_store()
        if remembered is not None:
            self.url.setText(remembered[0])
            self.queue.setText(remembered[1] or "")
        self.error = QLabel("")
        self.error.setObjectName("connectError")
        self.error.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.connect_store)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Store URL:", self.url)
        form.addRow("Password:", self.password)
        form.addRow("Queue URL:", self.queue)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("The store's database and, if the team runs one, its Redis queue:"))
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        name_controls(self)

    def connect_store(self) -> None:
        try:
            store = store_from_fields(self.url.text(), self.password.text(), self.queue.text())
        except ValueError as exc:
            self.error.setText(str(exc))
            return
        self.error.setText(f"Connecting to {store.shown}…")
        self.buttons.setEnabled(False)
        Op(check_store, self.main_window.ctx.data_dir, store).bound_to(self).on_success(
            lambda _shown: self._reached(store)
        ).on_failure(self._refused).run()

    def _refused(self, exc: BaseException) -> None:
        self.buttons.setEnabled(True)
        said = str(exc) if isinstance(exc, KnowledgeError) else f"Could not open the store: {type(exc).__name__}"
        self.error.setText(said)

    def _reached(self, store: TeamStore) -> None:
        remember_team_store(store.url, store.queue)
        self.password.clear()
        self.accept()
        self.opened.emit(reopen(self.main_window, store))


def reopen(window: WindowFace, store: TeamStore | None) -> WindowFace:
    """A new window on ``store`` (``None``: this machine's data directory) in place of ``window``: the new one
    shows first (the application never runs out of windows), the old one stops its worker and closes its
    store, then the new one starts."""
    new = window.sibling(store)
    _open_windows.append(new)
    new.destroyed.connect(lambda *_: _open_windows.remove(new) if new in _open_windows else None)
    new.setGeometry(window.geometry())
    new.show()
    window.hide()
    window.shutdown()
    ops.set_default_failure_handler(new.ctx.fail)  # the old window's shutdown cleared it
    window.close()  # hidden, its store closed and its worker stopped; freed with the last reference to it
    new.start()
    return new


def open_connect_dialog(window: WindowFace) -> ConnectDialog:
    dialog = ConnectDialog(window)
    dialog.show()
    dialog.raise_()
    return dialog
