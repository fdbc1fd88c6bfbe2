"""Moving in: a data directory's bases copied into a team store (``quire store migrate DIR URL``).

Each base travels the way a person would carry it by hand — exported from the directory (one read snapshot,
vectors as float32, owned copies included) and imported into the store — so the copy is exactly what
``base export``/``import`` check and keep: the same items, chunks and vectors (nothing is embedded again; the
import never builds an encoder), the folder-run ledger and the audit entries. The export file lives in a
private temporary folder and is removed afterwards, whatever happens.

A base whose name the store already has is left alone and reported ``present``, so running the command again
after an interruption copies only what is missing (an import cut short is cleaned up by the store's repair
scan and copied again). The first refusal (a failed base, a name taken by a base that is not this one)
stops the command with its reason; the bases copied before it stay.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from knowledge.library import bases
from knowledge.portable.export import export_base
from knowledge.portable.import_ import import_base
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store.permissions import make_private_dir


@dataclass(frozen=True)
class MovedBase:
    name: str
    outcome: str  # copied | present
    items: int = 0
    chunks: int = 0
    blobs: int = 0
    vector_index_seconds: float | None = None  # its HNSW index built on arrival (a large base)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def move_in(source: Quire, target: Quire, *, on_base: Callable[[MovedBase], None] | None = None) -> list[MovedBase]:
    """Copy every base of ``source`` (a data directory) into ``target`` (a team store) that it lacks."""
    require_person("move bases into a team store")
    present = {b.name.lower() for b in bases.list_bases(target.db)}
    moved: list[MovedBase] = []
    make_private_dir(target.data_dir)
    for base in bases.list_bases(source.db):
        if base.name.lower() in present:
            done = MovedBase(base.name, "present")
        else:
            with tempfile.TemporaryDirectory(dir=target.data_dir, prefix=".move-in-") as tmp:
                file = Path(tmp) / "base.quirebase"
                export_base(source, base.id, file)
                imported = import_base(target, file, name=base.name)
            done = MovedBase(
                base.name, "copied", imported.items, imported.chunks, imported.blobs, imported.vector_index_seconds
            )
        moved.append(done)
        if on_base is not None:
            on_base(done)
    return moved
