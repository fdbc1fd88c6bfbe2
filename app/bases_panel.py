"""The bases sidebar: list, create, rename, lock/unlock, delete (after a confirmation), export and import,
and reindex the stale items of a base (material made by an older parser, chunker or model:
``lifecycle.reindex_stale``).

Threading contract: main thread; every read and write goes through an ``Op`` and the answer comes
back on the main thread, where the shared ``AppContext`` is updated.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QProgressBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from app.resources import icon
from knowledge import lifecycle, preferences
from knowledge.errors import Conflict
from knowledge.library import Base, bases
from knowledge.lifecycle import Changes
from knowledge.portable import ExportResult, ImportResult
from knowledge.runtime import Quire

BaseIdRole = Qt.ItemDataRole.UserRole + 1


def create_default_base(quire: Quire, name: str) -> Base:
    """A base on the packaged default model with the Preferences' default precision, backend and chunk size
    (``auto``: what this machine does best), like ``quire base create``."""
    from knowledge.ingest import DEFAULT_MODEL_ID, chosen_encoder, model_spec

    spec = model_spec(DEFAULT_MODEL_ID)
    precision, backend = chosen_encoder(
        preferences.get(quire.db, "bases.default_precision"), preferences.get(quire.db, "bases.default_backend")
    )
    return bases.create_base(
        quire.db,
        name,
        model_id=spec.model_id,
        dimension=spec.dimension,
        precision=precision,
        backend=backend,
        chunk_size=preferences.get(quire.db, "bases.default_chunk_size"),
    )


def create_multilingual_base(quire: Quire, name: str) -> Base:
    """A base on the multilingual model (its only precision and backend), like ``quire base create --multilingual``:
    a query in one language finds documents in another."""
    from knowledge.ingest import MULTILINGUAL_MODEL_ID, model_encoding, model_spec

    spec = model_spec(MULTILINGUAL_MODEL_ID)
    precision, backend = model_encoding(spec.model_id)
    return bases.create_base(
        quire.db,
        name,
        model_id=spec.model_id,
        dimension=spec.dimension,
        precision=precision,
        backend=backend,
        chunk_size=preferences.get(quire.db, "bases.default_chunk_size"),
    )


def delete_base(quire: Quire, base_id: int) -> Base:
    return bases.delete_base(quire.db, quire.queue, base_id, quire.blobs_dir)


def export_base(quire: Quire, base_id: int, path: Path, progress: object) -> ExportResult:
    from knowledge.portable import export_base as export

    return export(quire, base_id, path, progress=progress)  # type: ignore[arg-type]


def import_base(quire: Quire, path: Path, name: str | None, progress: object) -> ImportResult:
    from knowledge.portable import import_base as import_

    return import_(quire, path, name=name, progress=progress)  # type: ignore[arg-type]


class _ProgressRelay(QObject):
    """Emitted from the Op's thread; delivered to the panel on the main thread (a queued connection)."""

    changed = Signal(str, int, int)


STAGE_WORDS = {"validate": "Checking", "items": "Items", "chunks": "Chunks", "blobs": "Files", "check": "Checking"}


def base_label(base: Base) -> str:
    marks = (("multilingual", base.multilingual), ("locked", base.locked), ("failed", base.status == "failed"))
    flags = [f for f, on in marks if on]
    return base.name + (f"  ({', '.join(flags)})" if flags else "")


def base_tip(base: Base) -> str:
    """What a base is made with; a multilingual one says it finds documents across languages."""
    if base.status_reason:
        return base.status_reason
    languages = "multilingual: a query in one language finds documents in another · " if base.multilingual else ""
    return f"{languages}{base.model_id} · {base.precision} · chunk {base.chunk_size}"


class BasesPanel(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.list = QListWidget()
        self.list.setObjectName("basesList")
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.new_button = self._tool("New", "Create a knowledge base", self.create_base)
        self.rename_button = self._tool("Rename", "Rename the selected base", self.rename_base)
        self.lock_button = self._tool("Lock", "Lock or unlock the selected base (read-only)", self.toggle_lock)
        self.delete_button = self._tool("Delete", "Delete the selected base and everything in it", self.delete_base)
        self.export_button = self._tool(
            "Export…", "Write the selected base, with its vectors, to one file", self.export_base
        )
        self.import_button = self._tool("Import…", "Make a new base from an exported file", self.import_base)
        self.progress = QProgressBar()
        self.progress.setObjectName("portableProgress")
        self.progress.setVisible(False)
        self._relay = _ProgressRelay(self)
        self._relay.changed.connect(self._show_progress)
        self.stale_button = self._tool(
            "Reindex stale", "Re-derive the items made by an older parser, chunker or model", self.reindex_stale
        )
        self._layout()
        ctx.bases_changed.connect(self._show_bases)
        ctx.base_changed.connect(self._show_selection)
        ctx.ready_changed.connect(lambda _ready: self._update_buttons())
        self._update_buttons()

    def _tool(self, text: str, tip: str, slot: object) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def _layout(self) -> None:
        title = QLabel("Knowledge bases")
        title.setObjectName("panelTitle")
        buttons = QHBoxLayout()
        for b in (self.new_button, self.rename_button, self.lock_button, self.delete_button, self.stale_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        portable = QHBoxLayout()
        for b in (self.export_button, self.import_button):
            portable.addWidget(b)
        portable.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(title)
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        layout.addLayout(portable)
        layout.addWidget(self.progress)

    # -- showing ------------------------------------------------------------------------------

    def _show_bases(self, found: list[Base]) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for base in found:
            entry = QListWidgetItem(icon(self._icon_name(base)), base_label(base))
            entry.setData(BaseIdRole, base.id)
            entry.setToolTip(base_tip(base))
            self.list.addItem(entry)
        self.list.blockSignals(False)
        self._show_selection(self.ctx.base)

    @staticmethod
    def _icon_name(base: Base) -> str:
        return "warning" if base.status == "failed" else ("lock" if base.locked else "base")

    def _show_selection(self, base: Base | None) -> None:
        self.list.blockSignals(True)
        for row in range(self.list.count()):
            entry = self.list.item(row)
            if base is not None and entry.data(BaseIdRole) == base.id:
                self.list.setCurrentRow(row)
        self.list.blockSignals(False)
        self._update_buttons()

    def _current_changed(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        base = None if current is None else self.ctx.base_by_id(int(current.data(BaseIdRole)))
        self.ctx.select_base(base)

    def _update_buttons(self) -> None:
        base = self.ctx.base
        self.new_button.setEnabled(self.ctx.ready)
        self.import_button.setEnabled(self.ctx.ready)
        for b in (self.rename_button, self.lock_button, self.delete_button, self.export_button, self.stale_button):
            b.setEnabled(self.ctx.ready and base is not None)
        self.lock_button.setText("Unlock" if base is not None and base.locked else "Lock")

    def _context_menu(self, pos: QPoint) -> None:
        menu = QMenu(self)
        menu.addAction("New…", self.create_base)
        menu.addAction("New multilingual…", self.create_multilingual_base)
        if self.ctx.base is not None:
            menu.addAction("Rename…", self.rename_base)
            menu.addAction(self.lock_button.text(), self.toggle_lock)
            menu.addAction("Delete…", self.delete_base)
            menu.addAction("Export base…", self.export_base)
            menu.addAction("Reindex stale items", self.reindex_stale)
        menu.addAction("Import base…", self.import_base)
        menu.popup(self.list.mapToGlobal(pos))

    # -- actions ------------------------------------------------------------------------------

    def refresh(self, select_id: int | None = None) -> None:
        if self.ctx.quire is None:
            return
        Op(bases.list_bases, self.ctx.quire.db).bound_to(self).on_success(
            lambda found: self._refreshed(found, select_id)
        ).run()

    def _refreshed(self, found: list[Base], select_id: int | None) -> None:
        self.ctx.set_bases(found)
        if select_id is not None:
            self.ctx.select_base(self.ctx.base_by_id(select_id))
        elif self.ctx.base is None and found:
            self.ctx.select_base(found[0])

    def create_base(self) -> None:
        quire = self.ctx.quire
        name = self.ctx.prompter.ask_text(self, "New knowledge base", "Name:") if quire else None
        if quire is None or not name or not name.strip():
            return
        Op(create_default_base, quire, name).bound_to(self).on_success(self._created).on_failure(self.ctx.fail).run()

    def create_multilingual_base(self) -> None:
        quire = self.ctx.quire
        name = self.ctx.prompter.ask_text(self, "New multilingual knowledge base", "Name:") if quire else None
        if quire is None or not name or not name.strip():
            return
        Op(create_multilingual_base, quire, name).bound_to(self).on_success(self._created).on_failure(
            self.ctx.fail
        ).run()

    def _created(self, base: Base) -> None:
        self.ctx.info(f"Created knowledge base {base.name!r}.")
        self.refresh(select_id=base.id)

    def rename_base(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        name = self.ctx.prompter.ask_text(self, "Rename knowledge base", "New name:", base.name)
        if not name or name.strip() == base.name:
            return
        Op(bases.rename_base, quire.db, base.id, name).bound_to(self).on_success(
            lambda b: self.refresh(select_id=b.id)
        ).on_failure(self.ctx.fail).run()

    def toggle_lock(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        Op(bases.set_locked, quire.db, base.id, not base.locked).bound_to(self).on_success(
            lambda b: self.refresh(select_id=b.id)
        ).on_failure(self.ctx.fail).run()

    def reindex_stale(self) -> None:
        quire, base = self.ctx.quire, self.ctx.base
        if quire is None or base is None:
            return
        Op(lifecycle.reindex_stale, quire, base.id).bound_to(self).on_success(self._stale_queued).on_failure(
            self.ctx.fail
        ).run()

    def _stale_queued(self, changes: Changes) -> None:
        self.ctx.announce(changes)
        self.ctx.info("Nothing is stale." if changes.noop else "Reindexing the stale items.")

    def delete_base(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        question = (
            f"Delete the knowledge base {base.name!r} and everything in it?\n\n"
            "Its index and the copies it keeps are removed; your original files are not touched."
        )
        if not self.ctx.prompter.confirm(self, "Delete knowledge base", question):
            return
        Op(delete_base, quire, base.id).bound_to(self).on_success(self._deleted).on_failure(self.ctx.fail).run()

    def _deleted(self, base: Base) -> None:
        self.ctx.info(f"Deleted knowledge base {base.name!r}.")
        if self.ctx.base is not None and self.ctx.base.id == base.id:
            self.ctx.select_base(None)
        self.refresh()

    # -- export and import ----------------------------------------------------------------------

    def _show_progress(self, stage: str, done: int, total: int) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))
        self.progress.setFormat(f"{STAGE_WORDS.get(stage, stage.capitalize())} %p%")

    def _progress_done(self) -> None:
        self.progress.setVisible(False)

    def export_base(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        path = self.ctx.prompter.choose_save_file(self, "Export knowledge base", f"{base.name}.quirebase")
        if path is None:
            return
        self._show_progress("validate", 0, 1)
        Op(export_base, quire, base.id, path, self._relay.changed.emit).bound_to(self).on_success(
            self._exported
        ).on_failure(self._portable_failed).run()

    def _exported(self, result: ExportResult) -> None:
        self._progress_done()
        note = (
            f" {result.active_items} item(s) were still being indexed and were exported as they stand."
            if result.active_items
            else ""
        )
        self.ctx.info(
            f"Exported {result.base!r}: {result.items} items, {result.chunks} chunks, {result.blobs} files "
            f"to {Path(result.path).name}.{note}"
        )

    def import_base(self, path: Path | None = None, name: str | None = None) -> None:
        quire = self.ctx.quire
        if quire is None:
            return
        path = path or self.ctx.prompter.choose_open_file(self, "Import knowledge base")
        if path is None:
            return
        self._show_progress("validate", 0, 1)
        Op(import_base, quire, path, name, self._relay.changed.emit).bound_to(self).on_success(
            self._imported
        ).on_failure(lambda exc: self._import_failed(exc, path)).run()

    def _import_failed(self, exc: BaseException, path: Path) -> None:
        self._progress_done()
        if isinstance(exc, Conflict) and "already exists" in str(exc):
            name = self.ctx.prompter.ask_text(
                self, "Import knowledge base", "A knowledge base of that name exists. Import it as:"
            )
            if name and name.strip():
                self.import_base(path, name.strip())
                return
        self.ctx.fail(exc)

    def _imported(self, result: ImportResult) -> None:
        self._progress_done()
        reindex = f" {result.marked_for_reindex} item(s) need a reindex." if result.marked_for_reindex else ""
        self.ctx.info(
            f"Imported {result.name!r}: {result.items} items, {result.chunks} chunks, searchable now.{reindex}"
        )
        self.refresh(select_id=result.base_id)

    def _portable_failed(self, exc: BaseException) -> None:
        self._progress_done()
        self.ctx.fail(exc)
