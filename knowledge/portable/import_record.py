"""The row that hides an unfinished import (``base_imports``): which file, under which name, which process
imports it (host, pid, start time, heartbeat: a crashed one is told from a live one), and the stage and cursor
reached. This module alone writes it: created with the hidden base, taken over by a process that resumes the
same file, moved on by compare-and-set in each stage's transactions, removed by the transaction that shows the
base."""

from __future__ import annotations

import os
import time
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, update

from jobs.sessions import is_alive, process_start_time, this_host
from knowledge.store.schema_portable import base_imports


def owner_values() -> dict[str, Any]:
    """This process as the import's owner, beating now."""
    pid = os.getpid()
    return {"host": this_host(), "pid": pid, "process_started_at": process_start_time(pid), "heartbeat_at": time.time()}


def owner_alive(row: Any) -> bool:
    return is_alive(row.host, row.pid, row.process_started_at, row.heartbeat_at, None)


def begin(
    conn: Connection, base_id: int, *, name: str, checksum: str, stage: str, first_item: int, first_chunk: int
) -> None:
    """The hidden base's record, in the transaction that creates the base."""
    conn.execute(
        insert(base_imports).values(
            base_id=base_id,
            name=name,
            checksum=checksum,
            stage=stage,
            cursor=0,
            item_offset=first_item,  # the columns keep their names; they hold the first ids of the ranges
            chunk_offset=first_chunk,
            started_at=time.time(),
            **owner_values(),
        )
    )


def take_over(conn: Connection, base_id: int, name: str) -> None:
    """This process resumes a dead one's import (under the name asked now)."""
    conn.execute(update(base_imports).where(base_imports.c.base_id == base_id).values(**owner_values(), name=name))


def move_cursor(conn: Connection, base_id: int, expected: tuple[str, int], to: tuple[str, int]) -> bool:
    """Move stage and cursor from exactly ``expected`` to ``to``; False when another process moved them."""
    moved = conn.execute(
        update(base_imports)
        .where(
            and_(
                base_imports.c.base_id == base_id,
                base_imports.c.stage == expected[0],
                base_imports.c.cursor == expected[1],
            )
        )
        .values(stage=to[0], cursor=to[1], heartbeat_at=time.time())
    ).rowcount
    return bool(moved == 1)


def end(conn: Connection, base_id: int) -> None:
    """The import is whole: the base stops being hidden (in the transaction that gives it its name)."""
    conn.execute(delete(base_imports).where(base_imports.c.base_id == base_id))
