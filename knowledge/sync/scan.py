"""The reconcile scan: compare a synced folder with its item rows and name every difference.

Reads only — it never writes. The folder is walked with the rules of adding a folder
(``knowledge.ingest.walk``: ``.quireignore``, VCS folders, links, the data directory hidden); the item
rows are read in pages ordered by relative path, each page in its own short read snapshot, and merged
with the walk's entries (sorted the same way). A file whose size and mtime equal its row's is unchanged
and never opened; only when those differ is its content hashed, and only the hash decides ``changed``.

Outcomes (one :class:`Change` each): ``added``, ``changed``, ``removed``, ``moved`` (a removed row's
content hash found at an added path: the row moves, its material stays), ``unreadable`` (kept as it is,
with a reason; never taken for removed) and ``unstable`` (size/mtime still moving across a quiet period:
revisited later, never skipped for good).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import and_, select

from knowledge.ingest.walk import Entry, walk
from knowledge.library.tree import Reason
from knowledge.sources import SourceRejected, is_supported, unsupported_reason
from knowledge.sources.files import open_regular
from knowledge.store.database import Database
from knowledge.store.schema import ACTIVE_STATUSES, items

ROW_PAGE = 1000
INTERRUPTED = "indexing_interrupted"  # knowledge.lifecycle.recovery.INTERRUPTED: re-read these
UNREADABLE_DIR = Reason("unreadable", "a folder on its path cannot be read")
UNREADABLE_FILE = Reason("unreadable", "the file cannot be read")
NOT_REGULAR = Reason("unreadable", "no longer a regular file (device, pipe or socket)")

_KIND_FAILURES: dict[str, Reason] = {
    "link_to_dir": Reason("symlink_not_followed", "a link to a folder is not followed"),
    "link_outside": Reason("symlink_not_followed", "a link pointing outside the folder is not followed"),
    "dangling_link": Reason("unreadable", "file does not exist or cannot be read (broken link)"),
    "special": Reason("not_regular_file", "not a regular file (device, pipe or socket)"),
}


@dataclass(frozen=True)
class Row:
    """A live (not ``deleting``) item row below the synced root."""

    id: int
    type: str
    relative: str  # items.relative_path (relative to the item tree's top root)
    size: int | None
    mtime: float | None
    sha: str | None
    status: str
    error_code: str | None
    generation: int

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"


@dataclass(frozen=True)
class Change:
    kind: str  # added | changed | removed | moved | unreadable | unstable
    relative: str  # items.relative_path form
    is_dir: bool = False
    item_id: int | None = None
    generation: int | None = None
    path: Path | None = None
    size: int | None = None
    mtime: float | None = None
    sha: str | None = None
    moved_from: str | None = None
    failure: Reason | None = None  # added: create it failed (unsupported type, link); unreadable: why
    same_bytes: bool = False  # changed: touched, same content hash — only size/mtime are restamped

    @property
    def fingerprint(self) -> str:
        """What a dismissal remembers: the file as it was (a new edit moves size or mtime)."""
        if self.kind == "removed":
            return f"gone:{self.item_id}"
        base = f"{self.size}:{self.mtime!r}"
        return f"{base}:from:{self.moved_from}" if self.moved_from else base

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.relative,
            "is_dir": self.is_dir,
            "moved_from": self.moved_from,
            "reason": None if self.failure is None else self.failure.code,
        }


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)
    files_seen: int = 0
    hashed: int = 0  # files opened to hash (the unchanged tree opens none)

    def of(self, *kinds: str) -> list[Change]:
        return [c for c in self.changes if c.kind in kinds]

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("added", "changed", "removed", "moved", "unreadable", "unstable")}
        for c in self.changes:
            out[c.kind] += 1
        return out

    @property
    def applicable(self) -> list[Change]:
        return self.of("added", "changed", "removed", "moved")


def content_sha(path: Path, root: Path | None = None) -> str:
    """The content hash of a file (raises ``OSError`` when it cannot be read). Tests may replace it.

    Opened like a source (``knowledge.sources.files.open_regular``): never a pipe or device, never
    through a link leading out of ``root`` — a file swapped for one since the walk is not read."""
    digest = hashlib.sha256()
    try:
        handle = open_regular(path, root=root)
    except SourceRejected as refused:
        raise OSError(refused.reason) from None
    with handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def iter_rows(db: Database, root_id: int, prefix: str) -> Iterator[Row]:
    """Live rows of the tree below ``prefix`` (``''`` or ``'sub/'``), by relative path, one page per snapshot."""
    last = prefix
    upper = prefix[:-1] + chr(ord("/") + 1) if prefix else None
    while True:
        query = (
            select(
                items.c.id,
                items.c.type,
                items.c.relative_path,
                items.c.size,
                items.c.mtime,
                items.c.content_sha256,
                items.c.status,
                items.c.error_code,
                items.c.generation,
            )
            .where(and_(items.c.root_id == root_id, items.c.relative_path > last, items.c.status != "deleting"))
            .order_by(items.c.relative_path)
            .limit(ROW_PAGE)
        )
        if upper is not None:
            query = query.where(items.c.relative_path < upper)
        with db.read() as conn:
            page = conn.execute(query).all()
        for r in page:
            yield Row(
                r.id, r.type, r.relative_path, r.size, r.mtime, r.content_sha256, r.status, r.error_code, r.generation
            )
        if len(page) < ROW_PAGE:
            return
        last = page[-1].relative_path


@dataclass(frozen=True)
class Target:
    """What to scan: the folder on disk and where its rows live in the item tree."""

    folder: Path
    tree_root_id: int  # items.root_id of the rows below it
    prefix: str  # '' for a top-level folder item, 'sub/' for a folder inside one


def scan(db: Database, target: Target, *, hidden: list[Path], quiet_seconds: float) -> Diff:
    found = walk(target.folder, hidden=hidden)
    diff = Diff()
    if "." in found.unreadable_dirs:
        for row in iter_rows(db, target.tree_root_id, target.prefix):
            diff.changes.append(Change("unreadable", row.relative, row.is_dir, row.id, failure=UNREADABLE_DIR))
        return diff
    entries = _visible_entries(found.entries, target.prefix)
    unreadable = [target.prefix + d + "/" for d in found.unreadable_dirs]
    _merge(db, target, entries, unreadable, diff)
    _find_moves(diff, target.folder)
    _settle_unstable(diff, quiet_seconds)
    return diff


def _visible_entries(entries: list[Entry], prefix: str) -> list[tuple[str, Entry]]:
    """Entries not excluded (nor under an excluded folder), keyed by items.relative_path, sorted."""
    excluded_dirs: list[str] = []
    out: list[tuple[str, Entry]] = []
    for e in entries:
        if e.excluded or any(e.relative.startswith(d + "/") for d in excluded_dirs):
            if e.kind == "dir":
                excluded_dirs.append(e.relative)
            continue
        out.append((prefix + e.relative, e))
    out.sort(key=lambda pair: pair[0])
    return out


def _merge(db: Database, target: Target, entries: list[tuple[str, Entry]], unreadable: list[str], diff: Diff) -> None:
    rows = iter_rows(db, target.tree_root_id, target.prefix)
    row = next(rows, None)
    i = 0
    while i < len(entries) or row is not None:
        rel, entry = entries[i] if i < len(entries) else (None, None)
        if row is not None and (rel is None or row.relative < rel):
            _row_only(row, unreadable, diff)
            row = next(rows, None)
        elif row is None or rel is None or rel < row.relative:
            assert rel is not None and entry is not None
            _entry_only(rel, entry, diff)
            i += 1
        else:
            assert entry is not None
            _both(row, entry, diff, target.folder)
            row = next(rows, None)
            i += 1


def _row_only(row: Row, unreadable: list[str], diff: Diff) -> None:
    if any(row.relative.startswith(d) for d in unreadable):
        diff.changes.append(Change("unreadable", row.relative, row.is_dir, row.id, failure=UNREADABLE_DIR))
    else:
        diff.changes.append(
            Change("removed", row.relative, row.is_dir, row.id, row.generation, sha=row.sha, size=row.size)
        )


def _entry_only(rel: str, entry: Entry, diff: Diff) -> None:
    if entry.kind == "dir":
        diff.changes.append(Change("added", rel, True, path=entry.path))
        return
    diff.files_seen += 1
    failure = _KIND_FAILURES.get(entry.kind)
    if failure is None and not is_supported(entry.path):
        failure = Reason("unsupported_type", unsupported_reason(entry.path.name))
    diff.changes.append(
        Change("added", rel, False, path=entry.path, size=entry.size, mtime=entry.mtime, failure=failure)
    )


def _both(row: Row, entry: Entry, diff: Diff, folder: Path) -> None:
    if entry.kind == "dir" or row.is_dir:
        if entry.kind == "dir" and row.is_dir:
            return
        diff.changes.append(Change("removed", row.relative, row.is_dir, row.id, row.generation))
        _entry_only(row.relative, entry, diff)
        return
    diff.files_seen += 1
    if entry.kind != "file":
        if row.sha is not None:  # it had content: keep it, say why it cannot be read now
            failure = NOT_REGULAR if entry.kind == "special" else _KIND_FAILURES.get(entry.kind, NOT_REGULAR)
            diff.changes.append(Change("unreadable", row.relative, False, row.id, path=entry.path, failure=failure))
        return
    interrupted = row.status == "failed" and row.error_code == INTERRUPTED
    if not interrupted and row.size == entry.size and row.mtime == entry.mtime:
        return  # unchanged: never opened
    if row.status in ACTIVE_STATUSES and not interrupted:
        return  # a job is reading it right now; it stamps what it read, the next scan compares again
    sha: str | None = None
    if row.sha is not None and not interrupted:
        try:
            sha = content_sha(entry.path, folder)
            diff.hashed += 1
        except OSError:
            diff.changes.append(
                Change("unreadable", row.relative, False, row.id, path=entry.path, failure=UNREADABLE_FILE)
            )
            return
        if sha == row.sha:  # touched, same bytes: only the stamp moves (applied as a metadata refresh)
            diff.changes.append(
                Change(
                    "changed",
                    row.relative,
                    False,
                    row.id,
                    row.generation,
                    entry.path,
                    entry.size,
                    entry.mtime,
                    sha,
                    same_bytes=True,
                )
            )
            return
    diff.changes.append(
        Change("changed", row.relative, False, row.id, row.generation, entry.path, entry.size, entry.mtime, sha)
    )


def _find_moves(diff: Diff, folder: Path) -> None:
    """Pair a removed file's content hash with an added file of the same size and bytes: a move."""
    removed = {c.item_id: c for c in diff.changes if c.kind == "removed" and not c.is_dir and c.sha is not None}
    if not removed:
        return
    by_size: dict[int | None, list[Change]] = {}
    for c in removed.values():
        by_size.setdefault(c.size, []).append(c)
    replaced: dict[int, Change] = {}
    taken: set[int | None] = set()
    for idx, c in enumerate(diff.changes):
        if c.kind != "added" or c.is_dir or c.failure is not None or c.size not in by_size or c.path is None:
            continue
        try:
            sha = content_sha(c.path, folder)
            diff.hashed += 1
        except OSError:
            continue
        match = next((r for r in by_size[c.size] if r.sha == sha and r.item_id not in taken), None)
        if match is None:
            continue
        taken.add(match.item_id)
        replaced[idx] = Change(
            "moved", c.relative, False, match.item_id, match.generation, c.path, c.size, c.mtime, sha, match.relative
        )
    diff.changes = [
        replaced.get(i, c) for i, c in enumerate(diff.changes) if not (c.kind == "removed" and c.item_id in taken)
    ]


def _settle_unstable(diff: Diff, quiet_seconds: float) -> None:
    """Files whose mtime is younger than the quiet period are stat'ed again once it has passed: a size
    or mtime that moved meanwhile makes them ``unstable`` (revisited later), never applied half-written."""
    recent = [
        (i, c)
        for i, c in enumerate(diff.changes)
        if c.kind in ("added", "changed", "moved")
        and not c.is_dir
        and c.mtime is not None
        and c.path is not None
        and time.time() - c.mtime < quiet_seconds
    ]
    if not recent:
        return
    newest = max(c.mtime or 0.0 for _i, c in recent)
    wait = newest + quiet_seconds - time.time()
    if wait > 0:
        time.sleep(min(wait, quiet_seconds))  # the quiet period itself, not a stand-in for synchronisation
    for i, c in recent:
        assert c.path is not None
        try:
            st = os.stat(c.path)
        except OSError:
            st = None
        if st is None or st.st_size != c.size or st.st_mtime != c.mtime:
            diff.changes[i] = Change("unstable", c.relative, False, c.item_id, path=c.path, size=c.size, mtime=c.mtime)
