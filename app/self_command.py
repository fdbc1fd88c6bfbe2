"""The one builder of argv lists that start Quire's own commands, as a source checkout or a frozen app.

A frozen (PyInstaller) build has no ``python -m``: its one executable takes a role word first
(``packaging/quire_entry.py``): ``Quire cli ARGS`` is ``quire ARGS``, ``Quire worker-launch PID DIR`` the
window's worker launcher. A source checkout runs the modules with the same interpreter. Everything that
starts Quire again — the window's worker, the MCP client configuration a person pastes into an agent —
asks here, so the frozen app never prints or runs ``Quire -m app.cli …`` (which its entry refuses).

Qt-free and core-free (``sys`` only): the worker launcher imports it right before it ``exec``s.
"""

from __future__ import annotations

import sys


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def quire_command(*args: str) -> list[str]:
    """``quire ARGS`` as an argv list (program first)."""
    if is_frozen():
        return [sys.executable, "cli", *args]
    return [sys.executable, "-m", "app.cli", *args]


def worker_launcher_command(parent_pid: int, data_dir: str) -> list[str]:
    """The window's worker launcher (``app.worker_launch``) as an argv list."""
    if is_frozen():
        return [sys.executable, "worker-launch", str(parent_pid), data_dir]
    return [sys.executable, "-m", "app.worker_launch", str(parent_pid), data_dir]
