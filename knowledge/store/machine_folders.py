"""The folders a person on this machine asked Quire to read, and the endpoints it may send texts to, recorded in
the machine's own data directory.

On a team store a job row is any writer's word: a job pinned to another machine's host name (host names are
readable in ``worker_sessions``, and ``QUIRE_HOST`` is whatever a client says) would make that machine's worker
walk a path on its own disk and upload what it finds. So a job that reads a machine's files — a folder's walk, a
reindex, a folder run, a sync scan — reads only a path equal to, or under, one recorded here, and a path is
recorded only by a person's own gesture on this machine (add, turn sync on, start or retry a run, relocate). The
record is ``machine_folders.json`` in the data directory: owner-only, replaced atomically, read bounded, written
under a lock so two processes of this machine never lose each other's entries.

The same holds for a base's remote embedder: its endpoint and the *name* of the variable holding the key are
a store row any writer can change, so this machine sends texts (and the key it holds under that name) only to an
endpoint + variable a person here confirmed (created the base here, or ran ``quire base confirm-endpoint``).

A data directory's own store (SQLite) needs none of this: only this machine's person writes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from knowledge.store.database import Database
from knowledge.store.permissions import FILE_MODE, write_private_bytes

log = logging.getLogger(__name__)

FILE_NAME = "machine_folders.json"
_KINDS = ("folders", "endpoints")
MAX_BYTES = 4 * 1024 * 1024  # tens of thousands of paths; a bigger file is not one Quire wrote


def _normal(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def recorded(data_dir: Path) -> set[str]:
    """The folders and files recorded on this machine (nothing when the record is missing or not Quire's)."""
    return {_normal(f) for f in _read(data_dir).get("folders", []) if isinstance(f, str) and f.startswith("/")}


def _read(data_dir: Path) -> dict[str, list[object]]:
    """The record's lists by kind (empty when it is missing or not Quire's)."""
    path = data_dir / FILE_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("the machine's folder record cannot be opened (%s): nothing counts as added here", exc)
        return {}
    with os.fdopen(fd, "rb") as fh:
        if not _regular_and_bounded(os.fstat(fh.fileno())):
            log.warning("the machine's folder record is not a regular file of at most %d bytes: ignored", MAX_BYTES)
            return {}
        raw = fh.read(MAX_BYTES + 1)
    try:
        found = json.loads(raw)
        return {kind: listed for kind in _KINDS if isinstance(listed := found.get(kind, []), list)}
    except (ValueError, AttributeError):
        log.warning("the machine's folder record is not valid JSON: nothing counts as added here")
        return {}


def _regular_and_bounded(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_BYTES


def is_recorded(data_dir: Path, path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a recorded folder or file, or lies under a recorded folder."""
    wanted = _normal(path)
    return any(wanted == f or wanted.startswith(f.rstrip("/") + "/") for f in recorded(data_dir))


def record(data_dir: Path, paths: Iterable[str | os.PathLike[str]]) -> None:
    """Record ``paths`` as asked for by a person on this machine (idempotent)."""
    _add(data_dir, "folders", {_normal(p) for p in paths})


def _add(data_dir: Path, kind: str, wanted: set[str]) -> None:
    if not wanted:
        return
    with _locked(data_dir):
        lists = _read(data_dir)
        known = {str(v) for v in lists.get(kind, []) if isinstance(v, str)}
        if wanted <= known:
            return
        body = json.dumps({**lists, kind: sorted(known | wanted)}, indent=1).encode()
        staging = data_dir / f".{FILE_NAME}.{os.getpid()}.tmp"
        write_private_bytes(staging, body)
        os.replace(staging, data_dir / FILE_NAME)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    fd = os.open(data_dir / f".{FILE_NAME}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


NOT_ADDED_HERE = "not added on this machine: a person here adds it, turns its sync on or starts its run"


def may_read(db: Database, data_dir: Path, path: str | os.PathLike[str] | None) -> bool:
    """Whether a job may read ``path`` on this machine: always on a data directory's own store; on a team
    store only a path a person here recorded."""
    if not db.shared_by_machines:
        return True
    return path is not None and is_recorded(data_dir, path)


def record_for(db: Database, data_dir: Path, paths: Iterable[str | os.PathLike[str] | None]) -> None:
    """A person on this machine asked for ``paths``: record them (on a team store; a data directory's own
    store needs no record)."""
    if db.shared_by_machines:
        record(data_dir, [p for p in paths if p is not None])


def _endpoint_entry(embedder: dict[str, object]) -> str:
    """An endpoint with the key variable it is sent: both must be what a person here confirmed."""
    return json.dumps([str(embedder.get("endpoint")), embedder.get("api_key_env")])


def endpoint_confirmed(db: Database, data_dir: Path, embedder: dict[str, object]) -> bool:
    """Whether this machine may send texts (and the named key) to the embedder: always on a data directory's own
    store; on a team store only an endpoint + key variable a person here confirmed."""
    if not db.shared_by_machines:
        return True
    return _endpoint_entry(embedder) in {str(e) for e in _read(data_dir).get("endpoints", [])}


def confirm_endpoint_here(db: Database, data_dir: Path, embedder: dict[str, object]) -> None:
    """A person on this machine created the base or confirmed its endpoint: record it (on a team store)."""
    if db.shared_by_machines:
        _add(data_dir, "endpoints", {_endpoint_entry(embedder)})
