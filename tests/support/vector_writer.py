"""A process that writes and clears material of base "kb" forever (until killed): ``python -m
tests.support.vector_writer DATA_DIR``. Each transaction writes three items of seven chunks (random unit
vectors, seeded) and clears the oldest item left, so its vector-file appends (after each commit, the real
write path) and the rows are in every state a SIGKILL can catch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from knowledge.compose import open_quire
from knowledge.library import index
from knowledge.library.bases import get_base
from knowledge.library.index import ChunkRow
from knowledge.library.tree import NewItem, create_item


def main(data_dir: Path) -> None:
    quire = open_quire(data_dir)
    base = get_base(quire.db, "kb")
    rng = np.random.default_rng(7)
    alive: list[int] = []
    n = 0
    while True:
        with quire.db.write() as conn:
            for _ in range(3):
                vectors = rng.normal(size=(7, base.dimension)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                item = create_item(conn, NewItem(base.id, "note", f"w{n}", "completed", note_text="x"))
                rows = [ChunkRow(i, f"writer {n} {i}", 0, 1, None, None, None, 2, f"w{n}-{i}") for i in range(7)]
                index.write_item_material(conn, base.id, item, rows, vectors)
                alive.append(item)
                n += 1
            index.clear_items_material(conn, base.id, [alive.pop(0)])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
