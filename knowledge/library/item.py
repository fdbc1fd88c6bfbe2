"""What an item is: its row as a value (:class:`Item`), the values its writes take (a new row, a reason, a
file's stat, what a completed leaf's index was made from) and the rule that tells a skipped item from a
failed one. Nothing here touches the database; :mod:`knowledge.library.tree` reads and writes the rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from jobs.queue import JobId
from knowledge.library.ids import BaseId, ItemId, RunId

CONTAINER_TYPES = ("directory",)

# Reason codes that mean "not read by design": the item is ``skipped``, not ``failed``.
# Everything else (unreadable, parse_error, invalid_encoding, index_error, interrupted…) is a failure.
SKIP_CODES = frozenset(
    {
        "unsupported_type",  # a type Quire does not read (yet: a later version may, and reindex picks it up)
        "excluded",  # an ignore rule (.quireignore) excludes it
        "empty",  # nothing but whitespace
        "too_large",  # over the size limit
        "no_text",  # parsed (and OCR'd where it applies) and no text came out
        "binary",  # binary data behind a text suffix
        "not_regular_file",  # a device, pipe or socket
        "symlink_not_followed",  # a link to a folder, or one pointing outside the folder
        "encrypted",  # locked with a password Quire does not have (an encrypted archive member)
        "nested_too_deep",  # a container more levels below the file added than are unpacked
    }
)


def terminal_status_for(code: str) -> str:
    """``skipped`` for a by-design reason code, ``failed`` for anything that went wrong."""
    return "skipped" if code in SKIP_CODES else "failed"


@dataclass(frozen=True)
class Item:
    id: ItemId
    base_id: BaseId
    parent_id: ItemId | None
    root_id: ItemId | None
    type: str
    name: str
    source_path: str | None
    relative_path: str | None
    status: str
    error_code: str | None
    error_message: str | None
    content_sha256: str | None
    size: int | None
    mtime: float | None
    blob_sha256: str | None
    text_sha256: str | None
    note_text: str | None
    parser: str | None
    parser_version: str | None
    chunker_version: str | None
    model_fingerprint: str | None
    chunk_count: int
    metadata: dict[str, Any]
    generation: int
    job_id: JobId | None
    run_id: RunId | None
    owner: str | None
    created_at: float
    updated_at: float
    source_unverified: bool = False  # imported: the original's path is someone else's word (relocate vouches)

    @classmethod
    def from_row(cls, row: Any) -> Item:
        m = row._mapping
        return cls(
            id=m["id"],
            base_id=m["base_id"],
            parent_id=m["parent_id"],
            root_id=m["root_id"],
            type=m["type"],
            name=m["name"],
            source_path=m["source_path"],
            relative_path=m["relative_path"],
            status=m["status"],
            error_code=m["error_code"],
            error_message=m["error_message"],
            content_sha256=m["content_sha256"],
            size=m["size"],
            mtime=m["mtime"],
            blob_sha256=m["blob_sha256"],
            text_sha256=m["text_sha256"],
            note_text=m["note_text"],
            parser=m["parser"],
            parser_version=m["parser_version"],
            chunker_version=m["chunker_version"],
            model_fingerprint=m["model_fingerprint"],
            chunk_count=m["chunk_count"],
            metadata=json.loads(m["metadata"]) if m["metadata"] else {},
            generation=m["generation"],
            job_id=m["job_id"],
            run_id=m["run_id"],
            owner=m["owner"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            source_unverified=bool(m.get("source_unverified") or 0),
        )

    @property
    def is_container(self) -> bool:
        return self.type in CONTAINER_TYPES

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "base_id": self.base_id,
            "parent": self.parent_id,
            "root": self.root_id,
            "type": self.type,
            "name": self.name,
            "status": self.status,
            "source_path": self.source_path,
            "relative_path": self.relative_path,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "chunk_count": self.chunk_count,
            "size": self.size,
            "content_sha256": self.content_sha256,
            "metadata": self.metadata,
            "run_id": self.run_id,
            "owner": self.owner,
            "updated_at": self.updated_at,
        }


class FileStat(NamedTuple):
    """A file's size and mtime as last seen, so a later look can tell whether it changed."""

    size: int | None
    mtime: float | None


@dataclass(frozen=True)
class Indexed:
    """What a completed leaf's index was made from: its bytes (hash, size; none for a note), its text's
    hash, and the parser, chunker and model stamps that tell later whether it is stale."""

    content_sha256: str | None
    size: int | None
    mtime: float | None
    text_sha256: str
    parser: str
    parser_version: str
    chunker_version: str
    model_fingerprint: str
    chunk_count: int
    metadata: dict[str, Any]


class Reason(NamedTuple):
    """Why an item failed or was not read: a stable code and a short message with no absolute path."""

    code: str
    message: str


@dataclass(frozen=True)
class NewItem:
    """A row to create. ``root_id`` None makes the item its own root; ``error`` creates it terminal
    (``skipped`` or ``failed`` by its code, see :func:`terminal_status_for`)."""

    base_id: int
    type: str
    name: str
    status: str
    parent_id: int | None = None
    root_id: int | None = None
    source_path: str | None = None
    relative_path: str | None = None
    note_text: str | None = None
    owner: str | None = None
    run_id: int | None = None
    error: Reason | None = None
    source_key: str | None = None  # the canonical path of a root add_items created (its identity)
