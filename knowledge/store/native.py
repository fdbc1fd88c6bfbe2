"""Native components loaded at run time, and the one readable sentence when one of them fails.

sqlite-vec is a loadable SQLite extension (``vec0.so`` / ``.dylib`` / ``.dll``): no Python import ever
touches it, so a packaged build (``packaging/quire.spec``) must ship it by hand. A frozen app looks for it
inside its own bundle (``sys._MEIPASS``), never on the machine. When it — or any other native piece — is
missing or will not load, people see :class:`MissingComponent`'s one sentence, not the loader's text.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import apsw
import sqlite_vec

from knowledge.errors import MissingComponent

log = logging.getLogger(__name__)

VEC_COMPONENT = "sqlite-vec's SQLite extension (vec0)"


def vec_extension_path() -> str:
    """Where sqlite-vec's extension is, without its file suffix (SQLite adds the platform's own)."""
    bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle is not None:
        return str(Path(bundle) / "sqlite_vec" / "vec0")  # packaging/quire.spec puts it there
    return str(sqlite_vec.loadable_path())


def load_vec_extension(conn: apsw.Connection) -> None:
    """Load sqlite-vec into an apsw connection, or raise :class:`MissingComponent`."""
    conn.enable_load_extension(True)
    try:
        conn.load_extension(vec_extension_path())
    except apsw.Error as exc:
        log.debug("loading sqlite-vec failed: %s", exc)
        raise MissingComponent(VEC_COMPONENT) from exc
    finally:
        conn.enable_load_extension(False)
