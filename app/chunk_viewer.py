"""The chunk viewer: a completed item's chunks in order, with their locations, one shown in full.

Opened from the item tree ("View chunks") or from a search hit ("Show in document", focused on that
chunk). Non-modal. Threading contract: main thread; the chunks are read by an ``Op``
(``lifecycle.list_item_chunks``, which applies the service's guards) and shown when they arrive.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op, describe_error
from knowledge import lifecycle
from knowledge.library import Location

ChunkRole = Qt.ItemDataRole.UserRole + 1
MAX_SHOWN = 2000


def chunk_label(chunk: dict[str, Any], with_item: bool) -> str:
    prefix = f"{chunk['item_name']} · " if with_item else ""
    ocr = " · OCR" if chunk.get("ocr") else ""  # text read from a scan or an image: it may hold misreadings
    return f"{prefix}#{chunk['ordinal'] + 1} · {Location.of(chunk).describe()}{ocr} · {chunk['token_count']} tokens"


class ChunkViewer(QDialog):
    def __init__(
        self,
        ctx: AppContext,
        base_id: int,
        item_id: int,
        title: str,
        focus_chunk_id: int | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("chunkViewer")
        self.setWindowTitle(f"Chunks — {title}")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.ctx, self.base_id, self.item_id = ctx, base_id, item_id
        self.focus_chunk_id = focus_chunk_id
        self.chunks: list[dict[str, Any]] = []
        self.loaded = False
        self.header = QLabel(f"Loading the chunks of {title}…")
        self.header.setWordWrap(True)
        self.list = QListWidget()
        self.list.currentItemChanged.connect(self._show_current)
        self.text = QTextBrowser()
        self.text.setObjectName("chunkText")
        splitter = QSplitter()
        splitter.addWidget(self.list)
        splitter.addWidget(self.text)
        splitter.setSizes([300, 520])
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(splitter, 1)
        self.resize(900, 560)

    def load(self) -> None:
        quire = self.ctx.quire
        if quire is None:
            return
        Op(lifecycle.list_item_chunks, quire, self.base_id, self.item_id).bound_to(self).on_success(
            self._loaded
        ).on_failure(self._failed).run()

    def _loaded(self, chunks: list[dict[str, Any]]) -> None:
        total = len(chunks)
        focus = next((n for n, c in enumerate(chunks) if c["chunk_id"] == self.focus_chunk_id), 0)
        start = max(0, min(focus - MAX_SHOWN // 2, total - MAX_SHOWN))
        chunks = chunks[start : start + MAX_SHOWN]  # a folder's chunks can be many: show a window of them
        self.chunks, self.loaded = chunks, True
        many_items = len({c["item_id"] for c in chunks}) > 1
        source = chunks[0]["source_path"] if chunks and not many_items else None
        count = f"{total} chunk{'s' if total != 1 else ''}"
        if total > len(chunks):
            count += f" (showing {start + 1}-{start + len(chunks)})"
        self.header.setText(f"{count}" + (f" · {source}" if source else ""))
        focus_row = 0
        for row, chunk in enumerate(chunks):
            entry = QListWidgetItem(chunk_label(chunk, many_items))
            entry.setData(ChunkRole, row)
            self.list.addItem(entry)
            if chunk["chunk_id"] == self.focus_chunk_id:
                focus_row = row
        if chunks:
            self.list.setCurrentRow(focus_row)

    def _failed(self, exc: BaseException) -> None:
        self.loaded = True
        self.header.setText(describe_error(exc))

    def current_chunk(self) -> dict[str, Any] | None:
        entry = self.list.currentItem()
        return None if entry is None else self.chunks[int(entry.data(ChunkRole))]

    def _show_current(self, entry: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        chunk = self.current_chunk() if entry is not None else None
        if chunk is None:
            self.text.clear()
            return
        self.text.setPlainText(chunk["text"])
