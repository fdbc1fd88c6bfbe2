"""Hostile pickles for the queue tests: bytes that run code *if* anything unpickles them.

Quire must never unpickle them; a test only writes them where an attacker could (a queue, a backup) and
checks that their marker file never appears. Nothing here loads a pickle.
"""

from __future__ import annotations

import os
import pickle
import shlex
from pathlib import Path
from typing import Any


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


class _Shell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


def touching_pickle(marker: Path) -> bytes:
    """Unpickled, these bytes create ``marker`` (no shell involved)."""
    return pickle.dumps(_Touch(marker))


def shell_pickle(marker: Path) -> bytes:
    """Unpickled, these bytes run a shell command that creates ``marker`` (the issue's attack)."""
    return pickle.dumps(_Shell(f"touch {shlex.quote(str(marker))}"))
