"""The item tree of one base as a lazy Qt model that is updated in place, never reloaded.

* **Lazy.** Each level is read in pages (``knowledge.lifecycle.children_page``, keyset cursor) when the
  view asks (``canFetchMore``/``fetchMore``) — a top level on first show, a folder when it is expanded,
  more rows when the view scrolls to the end. The page is read by an ``Op`` off the main thread and
  appended when it arrives.
* **Updated in place by item id.** The window feeds it what changed: an operation's ``Changes``
  (``apply_changes``) and the rows the poll found updated since its cursor (``apply_items``). A known
  row is updated (``dataChanged``), a ``deleting`` row is removed with everything under it, a new row
  is inserted at its sorted place when its level is loaded that far (otherwise a later page brings it).
  A container whose ``generation`` moved on (a reindex reset it) drops its loaded children and pages
  them in again. Container rows summarise their direct children (``apply_summaries``).

What a row shows in each column and role is :mod:`app.item_rows`'s.

Threading contract: every method runs on the Qt main thread. The model never reads the database
itself; page reads go through ``Op`` and come back on the main thread.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal

from app.item_rows import COLUMNS, ROW_FLAGS, row_data
from app.ops import Op, report_failure
from knowledge import lifecycle
from knowledge.library import Item
from knowledge.lifecycle import Changes, SortKey, sort_key
from knowledge.runtime import Quire

PAGE = 200
ROOT = 0

AnyIndex = QModelIndex | QPersistentModelIndex


@dataclass(eq=False)
class Node:
    id: int
    item: Item | None  # None for the invisible root
    parent: Node | None
    children: list[Node] = field(default_factory=list)
    row: int = 0
    rows_dirty: bool = False
    loaded_all: bool = False
    fetching: bool = False
    cursor: SortKey | None = None  # sort key of the last row a page brought
    epoch: int = 0  # bumped when the children are dropped: late pages for the old ones are ignored
    summary: dict[str, int] = field(default_factory=dict)

    @property
    def is_container(self) -> bool:
        return self.item is None or self.item.is_container


class ItemTreeModel(QAbstractItemModel):
    """See the module docstring. ``statuses_changed`` fires after any row's status changed."""

    statuses_changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._quire: Quire | None = None
        self._base_id: int | None = None
        self._session = 0
        self._root = Node(ROOT, None, None)
        self._nodes: dict[int, Node] = {ROOT: self._root}
        self._summary_wanted: set[int] = set()
        self._partial: list[Node] = []
        # Ids seen ``deleting``: that state is terminal, so a poll read before the delete (arriving
        # after it) must not bring the row back, even for one poll interval.
        self._gone: set[int] = set()
        self._hidden: tuple[str, ...] = ()  # statuses not shown ("Hide skipped"); filtered where pages are read

    # -- source -------------------------------------------------------------------------------

    @property
    def base_id(self) -> int | None:
        return self._base_id

    def set_source(self, quire: Quire | None, base_id: int | None) -> None:
        """Show another base (or none): the only full reset this model ever does."""
        self.beginResetModel()
        self._session += 1
        self._quire, self._base_id = quire, base_id
        self.stamps: lifecycle.Stamps | None = None
        if quire is not None and base_id is not None:  # today's stamps, for the stale marker (off-thread)
            session = self._session
            Op(lifecycle.current_stamps, quire, base_id).bound_to(self).on_success(
                lambda stamps: self._stamps_read(session, stamps)
            ).on_failure(lambda _exc: None).run()
        self._root = Node(ROOT, None, None, loaded_all=base_id is None)
        self._nodes = {ROOT: self._root}
        self._summary_wanted.clear()
        self._partial = []
        self._gone = set()
        self.endResetModel()

    def _stamps_read(self, session: int, stamps: lifecycle.Stamps) -> None:
        if session != self._session:
            return  # another base is shown by now
        self.stamps = stamps
        # every loaded row's details may gain or lose the stale marker; no row moves
        self.layoutAboutToBeChanged.emit()
        self.layoutChanged.emit()

    def set_hidden_statuses(self, statuses: Sequence[str]) -> None:
        """Leave rows in these statuses out (pages are read filtered, so lazy paging still holds); the
        levels are paged in again from the start."""
        if tuple(statuses) != self._hidden:
            self._hidden = tuple(statuses)
            self.set_source(self._quire, self._base_id)

    @property
    def hidden_statuses(self) -> tuple[str, ...]:
        return self._hidden

    # -- Qt model API -------------------------------------------------------------------------

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return len(COLUMNS)

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        if parent.isValid() and parent.column() != 0:
            return 0
        return len(self._node(parent).children)

    def index(self, row: int, column: int, parent: AnyIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        node = self._node(parent)
        if not (0 <= row < len(node.children) and 0 <= column < len(COLUMNS)):
            return QModelIndex()
        return self.createIndex(row, column, node.children[row].id)

    def parent(self, index: AnyIndex = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        if not index.isValid():
            return QModelIndex()
        node = self._nodes.get(index.internalId())
        if node is None or node.parent is None or node.parent is self._root:
            return QModelIndex()
        return self.createIndex(self._row_of(node.parent), 0, node.parent.id)

    def hasChildren(self, parent: AnyIndex = QModelIndex()) -> bool:  # noqa: B008
        if not parent.isValid():
            return True
        node = self._nodes.get(parent.internalId())  # called for every row on each layout: keep it short
        if node is None or node.item is None or node.item.type != "directory" or parent.column() != 0:
            return False
        return bool(node.children) or not node.loaded_all

    def canFetchMore(self, parent: AnyIndex) -> bool:
        """Only a level's first page is fetched on the view's say-so.

        QTreeView asks ``canFetchMore`` on every layout pass and fetches whenever it is true, which
        would page in a whole level at once; later pages are asked for by the view when the last
        loaded row scrolls into sight (``ItemTreeView`` calls ``fetch_page``).
        """
        node = self._node(parent)
        return self.can_fetch_page(parent) and not node.children

    def fetchMore(self, parent: AnyIndex) -> None:
        if self.canFetchMore(parent):
            self.fetch_page(parent)

    def can_fetch_page(self, parent: AnyIndex) -> bool:
        node = self._node(parent)
        return self._quire is not None and node.is_container and not node.loaded_all and not node.fetching

    def fetch_page(self, parent: AnyIndex) -> None:
        """Read the next page of this level in an ``Op``; it is appended when it arrives."""
        node = self._node(parent)
        if not self.can_fetch_page(parent) or self._base_id is None:
            return
        node.fetching = True
        parent_id = None if node is self._root else node.id
        done = _PageArrival(self, node.id, node.epoch, self._session)
        page = Op(lifecycle.children_page, self._quire, self._base_id, parent_id, node.cursor, PAGE, self._hidden)
        page.bound_to(self).on_success(done.arrived).on_failure(done.failed).run()

    def fetching(self, parent: AnyIndex) -> bool:
        return self._node(parent).fetching

    def partial_levels(self) -> list[QModelIndex]:
        """Levels with rows loaded and more to come (the view fetches on when their last row shows)."""
        return [
            QModelIndex() if node is self._root else self.index_for_id(node.id)
            for node in self._partial
            if node.id in self._nodes and node.children and not node.loaded_all and not node.fetching
        ]

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        return ROW_FLAGS if index.isValid() else Qt.ItemFlag.ItemIsDropEnabled

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self._nodes.get(index.internalId()) if index.isValid() else None
        if node is None or node.item is None:
            return None
        return row_data(node.item, node.summary, self.stamps, index.column(), role)

    # -- lookups ------------------------------------------------------------------------------

    def _node(self, index: AnyIndex) -> Node:
        if not index.isValid():
            return self._root
        return self._nodes.get(index.internalId(), self._root)

    def _row_of(self, node: Node) -> int:
        parent = node.parent
        if parent is not None and parent.rows_dirty:
            for row, child in enumerate(parent.children):
                child.row = row
            parent.rows_dirty = False
        return node.row

    def index_for_id(self, item_id: int, column: int = 0) -> QModelIndex:
        node = self._nodes.get(item_id)
        if node is None or node is self._root:
            return QModelIndex()
        return self.createIndex(self._row_of(node), column, node.id)

    def item_for_id(self, item_id: int) -> Item | None:
        node = self._nodes.get(item_id)
        return None if node is None else node.item

    def item_at(self, index: AnyIndex) -> Item | None:
        node = self._nodes.get(index.internalId()) if index.isValid() else None
        return None if node is None else node.item

    def loaded_items(self) -> list[Item]:
        return [n.item for n in self._nodes.values() if n.item is not None]

    def loaded_ids(self) -> list[int]:
        return [i for i in self._nodes if i != ROOT]

    def summary_of(self, item_id: int) -> dict[str, int]:
        node = self._nodes.get(item_id)
        return {} if node is None else dict(node.summary)

    def take_summary_requests(self) -> list[int]:
        """Containers whose child counts should be re-read (the window's poll reads them)."""
        wanted = [i for i in self._summary_wanted if i in self._nodes and i != ROOT]
        self._summary_wanted.clear()
        return wanted

    # -- pages --------------------------------------------------------------------------------

    def page_arrived(self, node_id: int, epoch: int, session: int, page: Sequence[Item]) -> None:
        node = self._nodes.get(node_id)
        if session != self._session or node is None or node.epoch != epoch:
            return
        node.fetching = False
        if len(page) < PAGE:
            node.loaded_all = True
        self._partial = [n for n in self._partial if n is not node and not n.loaded_all and n.id in self._nodes]
        if not node.loaded_all:
            self._partial.append(node)
        if page:
            node.cursor = sort_key(page[-1])
        fresh = [i for i in page if i.id not in self._nodes and i.status != "deleting"]
        if fresh and (not node.children or sort_key(fresh[0]) > self._key(node.children[-1])):
            self._append(node, fresh)  # the usual case: a page goes after everything loaded, in one block
        else:
            self._insert_sorted(node, fresh)
        self._summary_wanted.update(i.id for i in fresh if i.is_container)
        if not fresh and node.loaded_all and node is not self._root:
            parent_index = self.index_for_id(node.id)
            self.dataChanged.emit(parent_index, parent_index)  # the expander may go away

    def page_failed(self, node_id: int, epoch: int, session: int) -> None:
        node = self._nodes.get(node_id)
        if session == self._session and node is not None and node.epoch == epoch:
            node.fetching = False

    @staticmethod
    def _key(node: Node) -> SortKey:
        return sort_key(node.item) if node.item is not None else (0, "", 0)

    def _append(self, parent: Node, items: Sequence[Item]) -> None:
        parent_index = QModelIndex() if parent is self._root else self.index_for_id(parent.id)
        first = len(parent.children)
        self.beginInsertRows(parent_index, first, first + len(items) - 1)
        for row, item in enumerate(items, start=first):
            node = Node(item.id, item, parent, row=row, loaded_all=not item.is_container)
            parent.children.append(node)
            self._nodes[item.id] = node
        self.endInsertRows()

    def _insert_sorted(self, parent: Node, items: Iterable[Item]) -> None:
        parent_index = QModelIndex() if parent is self._root else self.index_for_id(parent.id)
        for item in items:
            key = sort_key(item)
            row = bisect.bisect_left(parent.children, key, key=self._key)
            self.beginInsertRows(parent_index, row, row)
            node = Node(item.id, item, parent, row=row, loaded_all=not item.is_container)
            parent.children.insert(row, node)
            parent.rows_dirty = True
            self._nodes[item.id] = node
            self.endInsertRows()

    # -- updates ------------------------------------------------------------------------------

    def apply_changes(self, changes: Changes) -> None:
        """An operation's result: new statuses in place, ``deleting`` rows removed at once."""
        if changes.base_id != self._base_id:
            return
        updated = []
        for item_id, status in changes.statuses.items():
            node = self._nodes.get(item_id)
            if node is not None and node.item is not None and node.item.status != status:
                updated.append(dataclasses.replace(node.item, status=status))
        self.apply_items(updated)

    def apply_items(self, items: Sequence[Item]) -> None:
        """Rows that changed (from the poll or an operation), oldest change first."""
        changed_status = False
        for item in items:
            if item.base_id != self._base_id or item.id in self._gone:
                continue
            if item.status == "deleting":
                self._gone.add(item.id)
            node = self._nodes.get(item.id)
            if item.status in self._hidden:  # e.g. became skipped: leaves the view, back when it changes again
                if node is not None and node is not self._root:
                    self._remove(node)
                    changed_status = True
                continue
            if node is None:
                self._maybe_insert(item)
            elif item.status == "deleting":
                self._remove(node)
                changed_status = True
            elif node.item != item:
                changed_status |= node.item is None or node.item.status != item.status
                self._update(node, item)
        if changed_status:
            self.statuses_changed.emit()

    def _maybe_insert(self, item: Item) -> None:
        if item.status == "deleting":
            return
        parent = self._nodes.get(item.parent_id if item.parent_id is not None else ROOT)
        if parent is None:
            return
        self._summary_wanted.add(parent.id)
        if parent.loaded_all or (parent.cursor is not None and sort_key(item) <= parent.cursor):
            self._insert_sorted(parent, [item])
            if item.is_container:
                self._summary_wanted.add(item.id)

    def _update(self, node: Node, item: Item) -> None:
        old = node.item
        node.item = item
        if item.is_container and old is not None and old.generation != item.generation:
            self._drop_children(node)
        if item.is_container:
            self._summary_wanted.add(item.id)
        if node.parent is not None:
            self._summary_wanted.add(node.parent.id)
        self._emit_row(node)

    def _emit_row(self, node: Node) -> None:
        row = self._row_of(node)
        self.dataChanged.emit(self.createIndex(row, 0, node.id), self.createIndex(row, len(COLUMNS) - 1, node.id))

    def _drop_children(self, node: Node) -> None:
        node.epoch += 1
        node.loaded_all, node.fetching, node.cursor = False, False, None
        if not node.children:
            return
        parent_index = self.index_for_id(node.id)
        self.beginRemoveRows(parent_index, 0, len(node.children) - 1)
        for child in node.children:
            self._forget(child)
        node.children = []
        self.endRemoveRows()

    def _remove(self, node: Node) -> None:
        parent = node.parent
        if parent is None:
            return
        row = self._row_of(node)
        parent_index = QModelIndex() if parent is self._root else self.index_for_id(parent.id)
        self.beginRemoveRows(parent_index, row, row)
        del parent.children[row]
        parent.rows_dirty = True
        self._forget(node)
        self.endRemoveRows()
        self._summary_wanted.add(parent.id)

    def _forget(self, node: Node) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            self._nodes.pop(current.id, None)
            stack.extend(current.children)

    def remove_ids(self, item_ids: Iterable[int]) -> None:
        """Rows that no longer exist at all (hard-deleted without the poll seeing ``deleting``)."""
        for item_id in item_ids:
            node = self._nodes.get(item_id)
            if node is not None and node is not self._root:
                self._remove(node)

    def apply_summaries(self, summaries: dict[int, dict[str, int]]) -> None:
        for item_id, summary in summaries.items():
            node = self._nodes.get(item_id)
            if node is not None and node is not self._root and node.summary != summary:
                node.summary = summary
                self._emit_row(node)


class _PageArrival:
    """Carries which level and epoch a page read was for, so a late page for dropped rows is ignored."""

    def __init__(self, model: ItemTreeModel, node_id: int, epoch: int, session: int) -> None:
        self.model, self.node_id, self.epoch, self.session = model, node_id, epoch, session

    def arrived(self, page: list[Item]) -> None:
        self.model.page_arrived(self.node_id, self.epoch, self.session, page)

    def failed(self, exc: BaseException) -> None:
        self.model.page_failed(self.node_id, self.epoch, self.session)
        report_failure(exc)
