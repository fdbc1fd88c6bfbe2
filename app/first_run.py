"""What an empty window shows: how Quire works, in three steps, and a sample base to try it on.

Shown in place of the Items page while there is no knowledge base. "Create a sample base" makes a base
named "Sample" and adds the few public-domain documents bundled in ``resources/sample`` (an ``Op``);
the worker then indexes them and the search works on them within a minute.

Threading contract: main thread; the base and its items are created in an ``Op``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.bases_panel import create_default_base
from app.context import AppContext
from app.ops import Op
from app.resources import resources_dir
from app.startup import person
from knowledge import lifecycle
from knowledge.library import Base, bases
from knowledge.lifecycle import Changes, PathInput
from knowledge.runtime import Quire

SAMPLE_NAME = "Sample"
WELCOME = """<h2>Welcome to Quire</h2>
<p>Quire keeps searchable knowledge bases of your own documents, on this computer only.</p>
<ol>
<li><b>Create a knowledge base</b> — a named collection (left, <i>New</i>).</li>
<li><b>Drop a folder or files</b> on it, or use <i>File → Add folder…</i>. Your files stay where they are.</li>
<li><b>Quire reads and indexes them</b> in the background — the status bar shows progress, and
<i>Tools → Pause indexing</i> stops it for a while. Then search as you type in the <i>Search</i> tab;
each hit opens at its page or line.</li>
</ol>
<p>Or try it first on a few short sample documents.</p>"""


def sample_files() -> list[Path]:
    return sorted(p for p in (resources_dir() / "sample").iterdir() if p.is_file())


def create_sample_base(quire: Quire) -> tuple[Base, Changes]:
    """A base named "Sample" (or "Sample 2", …) holding the bundled documents."""
    taken = {b.name for b in bases.list_bases(quire.db)}
    name = next(n for n in (SAMPLE_NAME, *(f"{SAMPLE_NAME} {i}" for i in range(2, 100))) if n not in taken)
    base = create_default_base(quire, name)
    changes = lifecycle.add_items(quire, base.id, [PathInput(p) for p in sample_files()], owner=person())
    return base, changes


class FirstRunPage(QWidget):
    """See the module docstring. ``create_base`` asks the sidebar for a new base."""

    create_base = Signal()
    sample_created = Signal(object)  # Base

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("firstRun")
        text = QLabel(WELCOME)
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.RichText)
        text.setAccessibleName("How Quire works")
        self.new_button = QPushButton("Create a knowledge base…")
        self.new_button.setAccessibleName("Create a knowledge base")
        self.new_button.clicked.connect(self.create_base)
        self.sample_button = QPushButton("Create a sample base")
        self.sample_button.setAccessibleName("Create a sample base from bundled documents")
        self.sample_button.clicked.connect(self.create_sample)
        buttons = QHBoxLayout()
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.sample_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 24, 24, 24)
        layout.addWidget(text)
        layout.addLayout(buttons)
        layout.addStretch(1)

    def create_sample(self) -> None:
        quire = self.ctx.quire
        if quire is None:
            return
        self.sample_button.setEnabled(False)
        Op(create_sample_base, quire).bound_to(self).on_success(self._created).on_failure(self._failed).run()

    def _created(self, result: tuple[Base, Changes]) -> None:
        base, changes = result
        self.sample_button.setEnabled(True)
        self.ctx.set_bases([*self.ctx.bases, base])
        self.ctx.select_base(base)
        self.ctx.announce(changes)
        self.ctx.info(f"Created {base.name!r} with {len(sample_files())} sample documents; indexing them now.")
        self.sample_created.emit(base)

    def _failed(self, exc: BaseException) -> None:
        self.sample_button.setEnabled(True)
        self.ctx.fail(exc)
