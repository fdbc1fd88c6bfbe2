"""Preview: walk the folder under the cap and say, for every file, whether it is eligible and why not."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, or_, select

from knowledge import preferences
from knowledge.errors import NotFound
from knowledge.folder_runs.judging import descendant_cap, judge_destination, visible_folder
from knowledge.folder_runs.rules import FOLDER_NOT_FOUND, LINK_REASONS, FolderTooLarge
from knowledge.ingest.chunking import chunker_version
from knowledge.ingest.item_bytes import MAX_SOURCE_BYTES
from knowledge.ingest.models import model_stamp
from knowledge.ingest.walk import CapExceeded, Entry, Walk, walk
from knowledge.library import blobs
from knowledge.library.bases import Base
from knowledge.principal import Principal
from knowledge.sources import PARSER_VERSIONS, SourceRejected, is_supported, unsupported_reason
from knowledge.sources.files import read_source
from knowledge.sources.formats import is_container
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- preview -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreviewEntry:
    relative: str
    kind: str  # file | dir | link | special
    size: int | None
    sha256: str | None
    reason: str | None  # why it is not eligible (None when it is)

    @property
    def eligible(self) -> bool:
        return self.reason is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.relative,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "eligible": self.eligible,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Preview:
    base_id: int
    base_name: str
    folder: str
    cap: int
    walked: int
    eligible: list[PreviewEntry]
    ineligible: list[PreviewEntry]
    unreadable_folders: list[str]
    visible_files: frozenset[str] = field(default_factory=frozenset, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": {"id": self.base_id, "name": self.base_name},
            "folder": self.folder,
            "cap": self.cap,
            "walked": self.walked,
            "eligible": [e.as_dict() for e in self.eligible],
            "ineligible": [e.as_dict() for e in self.ineligible],
            "unreadable_folders": self.unreadable_folders,
            "eligible_bytes": sum(e.size or 0 for e in self.eligible),
        }


def preview(quire: Quire, principal: Principal, base_ref: str | int, folder: str | os.PathLike[str]) -> Preview:
    """What a run over ``folder`` would ingest now (any principal may preview; nothing is written)."""
    del principal  # previewing is a read; agents may do it too
    with quire.db.read() as conn:
        base = judge_destination(conn, base_ref)
        cap = descendant_cap(conn)
    root = visible_folder(quire, folder)
    return build_preview(quire, base, root, cap)


def build_preview(
    quire: Quire, base: Base, root: Path, cap: int, *, committed: Mapping[str, str] | None = None
) -> Preview:
    """``committed`` (relative path → content hash) names what the failed run a retry retries committed:
    those sources stay in the retry's manifest, where they settle ``already_committed``, instead of
    reading as covered by the base."""
    committed = committed or {}
    with quire.db.read() as conn:
        ignore, limit = preferences.ignore_patterns(conn), preferences.max_file_bytes(conn)
    try:
        found = walk(root, cap=cap, hidden=[quire.data_dir], ignore=ignore)
    except CapExceeded:
        raise FolderTooLarge(
            f"the folder has more than {cap} files and folders; a run covers a whole folder, so split it "
            "and start a run per sub-folder"
        ) from None
    if "." in found.unreadable_dirs:
        raise NotFound(FOLDER_NOT_FOUND)
    return preview_of_walk(quire, base, root, cap, found, limit, committed)


def preview_of_walk(
    quire: Quire, base: Base, root: Path, cap: int, found: Walk, limit: int, committed: Mapping[str, str]
) -> Preview:
    """The preview of what ``found`` walked below ``root``: every entry judged, and what the base covers."""
    eligible: list[PreviewEntry] = []
    ineligible: list[PreviewEntry] = []
    visible: set[str] = set()
    for entry in found.entries:
        judged = _judge_entry(root, entry, limit)
        if judged is None:
            continue
        if entry.kind == "file" and entry.excluded is None:
            visible.add(entry.relative)
        (eligible if judged.eligible else ineligible).append(judged)
    covered = _covered_shas(quire, base, {e.sha256 for e in eligible if e.sha256})
    still: list[PreviewEntry] = []
    for candidate in eligible:
        if candidate.sha256 in covered and committed.get(candidate.relative) != candidate.sha256:
            ineligible.append(_with_reason(candidate, "already in the knowledge base (same content)"))
        else:
            still.append(candidate)
    ineligible.sort(key=lambda e: e.relative)
    return Preview(
        base_id=base.id,
        base_name=base.name,
        folder=str(root),
        cap=cap,
        walked=found.walked,
        eligible=still,
        ineligible=ineligible,
        unreadable_folders=sorted(d for d in found.unreadable_dirs if d != "."),
        visible_files=frozenset(visible),
    )


def _with_reason(entry: PreviewEntry, reason: str) -> PreviewEntry:
    return PreviewEntry(entry.relative, entry.kind, entry.size, entry.sha256, reason)


def _judge_entry(root: Path, entry: Entry, limit: int = MAX_SOURCE_BYTES) -> PreviewEntry | None:
    """Eligibility of one walked entry; None for folders that are simply walked through."""
    if entry.kind == "dir":
        return None if entry.excluded is None else PreviewEntry(entry.relative, "dir", None, None, entry.excluded)
    if entry.kind in LINK_REASONS:
        kind = "special" if entry.kind == "special" else "link"
        return PreviewEntry(entry.relative, kind, None, None, LINK_REASONS[entry.kind])
    if entry.excluded is not None:
        return PreviewEntry(entry.relative, "file", entry.size, None, entry.excluded)
    if not is_supported(entry.path):
        return PreviewEntry(entry.relative, "file", entry.size, None, unsupported_reason(entry.path.name))
    if is_container(entry.path.name):  # its files would be children a run's one-source commit cannot schedule
        reason = "an archive or mailbox is read when its folder is added (quire add), not yet by a folder run"
        return PreviewEntry(entry.relative, "file", entry.size, None, reason)
    if entry.size is not None and entry.size > limit:
        mib = limit // (1024 * 1024)
        return PreviewEntry(entry.relative, "file", entry.size, None, f"larger than the {mib} MB a source may have")
    try:
        raw = read_source(root / entry.relative, max_bytes=limit, root=root)
    except SourceRejected as rejected:
        return PreviewEntry(entry.relative, "file", entry.size, None, rejected.reason)
    return PreviewEntry(entry.relative, "file", len(raw), blobs.sha256_bytes(raw), None)


@functools.lru_cache(maxsize=16)
def _covered_statement(base_id: int, stamp: str, chunker: str, parsers: tuple[tuple[str, str], ...]) -> Any:
    """Completed, visible items of the base with the bytes ``:shas`` names, indexed with these stamps. Built
    once per base and stamps (a run asks once per group and once per source's transaction)."""
    parser_stamp = or_(*(and_(items.c.parser == p, items.c.parser_version == v) for p, v in parsers))
    return select(items.c.content_sha256).where(
        and_(
            items.c.base_id == base_id,
            items.c.content_sha256.in_(bindparam("shas", expanding=True)),
            items.c.status == "completed",
            items.c.chunker_version == chunker,
            items.c.model_fingerprint == stamp,
            parser_stamp,
        )
    )


def covered_shas(conn: Connection, base: Base, shas: set[str]) -> set[str]:
    """Which of ``shas`` the base holds, completed with today's stamps (parser, chunker, model)."""
    statement = _covered_statement(
        base.id, model_stamp(base), chunker_version(), tuple(sorted(PARSER_VERSIONS.items()))
    )
    found: set[str] = set()
    ordered = sorted(shas)
    for start in range(0, len(ordered), 500):
        found.update(r[0] for r in conn.execute(statement, {"shas": ordered[start : start + 500]}).all())
    return found


def _covered_shas(quire: Quire, base: Base, shas: set[str]) -> set[str]:
    with quire.db.read() as conn:
        return covered_shas(conn, base, shas)


def is_covered(conn: Connection, base: Base, sha: str) -> bool:
    return bool(covered_shas(conn, base, {sha}))
