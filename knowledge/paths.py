"""Where a data directory lives: ``--data-dir``, else ``QUIRE_DATA_DIR``, else the platform default."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

ENV_VAR = "QUIRE_DATA_DIR"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("Quire", appauthor=False))


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return default_data_dir()
