"""Preferences: typed keys with defaults, validated, stored in the database's ``settings`` table.

One place answers "what may be set, to what, and what is it now" for the Preferences dialog and for
``quire config get/set/list``, so the two always agree. Values are stored as text; ``get`` returns the
typed value (the default when unset or unreadable). ``set_value`` takes text (the CLI's and the
dialog's common form), validates it and raises ``InvalidInput`` with a message a person can act on.

* ``data_dir`` cannot live inside the data directory it names: it goes to the per-user config file
  (``knowledge.paths``) and applies on the next start.
* ``folder_runs.max_descendants`` is the folder-run cap's existing key (``folder_runs.rules.CAP_SETTING``).
* ``jobs.paused`` is the pause flag the worker's claim loop reads (through a callable the composition
  root hands the ``jobs`` layer, which imports nothing of ``knowledge``); it is set by pause/resume,
  not listed with the preferences.
* Agent access (``agents.mcp_enabled``) has its own operation (``knowledge.agents.access``); the
  dialog shows it, nothing here duplicates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec
from sqlalchemy import Connection

from knowledge import paths
from knowledge.errors import InvalidInput, NotFound
from knowledge.principal import require_person
from knowledge.store import settings
from knowledge.store.database import Database

PAUSED_KEY = "jobs.paused"
PAUSED_BY_KEY = "jobs.paused_by"  # "battery" when the battery rule paused; a person's pause is never undone by it
DATA_DIR = "data_dir"
MiB = 1024 * 1024


@dataclass(frozen=True)
class Preference:
    key: str
    kind: str  # int | choice | text | lines | path
    default: Any
    label: str
    help: str
    parse: Callable[[str], Any]
    applies: str = "at once"

    def show(self, value: Any) -> str:
        """The value as text (what ``set_value`` accepts back)."""
        if isinstance(value, list | tuple):
            return "\n".join(str(v) for v in value)
        return "" if value is None else str(value)


def _int_between(low: int, high: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            message = f"{what} must be a whole number between {low} and {high}, not {text.strip()!r}"
            raise InvalidInput(message) from None
        if not low <= value <= high:
            raise InvalidInput(f"{what} must be between {low} and {high}, not {value}")
        return value

    return parse


def _choice(options: tuple[str, ...], what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise InvalidInput(f"{what} must be one of {', '.join(options)}, not {text.strip()!r}")
        return value

    return parse


def _patterns(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    kept = [line for line in lines if line.strip()]
    for line in kept:
        try:
            pathspec.PathSpec.from_lines("gitignore", [line])
        except Exception as exc:  # pathspec raises several kinds for a bad pattern
            raise InvalidInput(f"ignore pattern {line!r} is not valid gitignore syntax ({exc})") from None
    if len(kept) > 500:
        raise InvalidInput("at most 500 ignore patterns")
    return kept


_OCR = re.compile(r"^[a-z]{3}(_[a-z]+)?(\+[a-z]{3}(_[a-z]+)?)*$")


def _ocr_language(text: str) -> str:
    value = text.strip().lower()
    if not _OCR.match(value):
        raise InvalidInput(
            f"OCR language must be Tesseract language codes such as 'eng' or 'eng+deu', not {text.strip()!r}"
        )
    return value


def _directory(text: str) -> str:
    value = text.strip()
    if not value:
        return ""
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"the data directory must be an absolute path, not {value!r}")
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"the data directory {value!r} exists and is not a folder")
    return str(path)


PREFERENCES: dict[str, Preference] = {
    p.key: p
    for p in (
        Preference(
            DATA_DIR,
            "path",
            "",
            "Data directory",
            "where the database and copies live (empty: the platform default)",
            _directory,
            applies="on restart",
        ),
        Preference(
            "bases.default_precision",
            "choice",
            "auto",
            "Default precision",
            "precision of new bases: auto (bf16 where the CPU has it), fp32 or bf16",
            _choice(("auto", "fp32", "bf16"), "the default precision"),
        ),
        Preference(
            "bases.default_backend",
            "choice",
            "auto",
            "Default encoder backend",
            "what runs the model for new bases: auto (OpenVINO where installed), openvino or torch",
            _choice(("auto", "openvino", "torch"), "the default backend"),
        ),
        Preference(
            "bases.default_chunk_size",
            "int",
            254,
            "Default chunk size",
            "tokens per chunk of new bases (16-254)",
            _int_between(16, 254, "the default chunk size"),
        ),
        Preference(
            "ingest.ignore_patterns",
            "lines",
            [],
            "Global ignore patterns",
            "gitignore patterns applied to every folder, besides its .quireignore files",
            _patterns,
            applies="on the next walk",
        ),
        Preference(
            "worker.threads",
            "int",
            1,
            "Worker threads",
            "jobs the worker runs at once (1-16)",
            _int_between(1, 16, "the worker's thread count"),
            applies="when the worker restarts",
        ),
        Preference(
            "worker.nice",
            "int",
            10,
            "Worker priority (nice)",
            "how much the worker yields the CPU (0 = normal, 19 = least)",
            _int_between(0, 19, "the worker's nice value"),
            applies="when the worker restarts",
        ),
        Preference(
            "ingest.max_file_mb",
            "int",
            50,
            "Maximum file size (MiB)",
            "files larger than this are not read (1-50; 50 is the parsers' ceiling)",
            _int_between(1, 50, "the maximum file size"),
        ),
        Preference(
            "folder_runs.max_descendants",
            "int",
            200,
            "Folder-run cap",
            "most files and folders a folder run may cover (0-1000000)",
            _int_between(0, 1_000_000, "the folder-run cap"),
        ),
        Preference(
            "worker.pause_on_battery",
            "choice",
            "no",
            "Pause on battery",
            "pause indexing while the computer runs on battery (where the platform reports it); resume on mains",
            _choice(("no", "yes"), "pause on battery"),
        ),
        Preference(
            "ocr.language",
            "text",
            "eng",
            "OCR language",
            "Tesseract language codes for scanned pages, e.g. eng or eng+deu",
            _ocr_language,
        ),
        Preference(
            "sync.interval_minutes",
            "int",
            0,
            "Sync interval (minutes)",
            "how often watched folders are re-synced (0 = off; 0-10080)",
            _int_between(0, 10_080, "the sync interval"),
        ),
    )
}


def preference(key: str) -> Preference:
    try:
        return PREFERENCES[key]
    except KeyError:
        raise NotFound(f"no preference named {key!r}; known: {', '.join(PREFERENCES)}") from None


def read(conn: Connection, key: str) -> Any:
    """The typed value inside a caller's transaction (the default when unset or no longer valid)."""
    pref = preference(key)
    if key == DATA_DIR:
        configured = paths.configured_data_dir()
        return "" if configured is None else str(configured)
    raw = settings.get(conn, key)
    if raw is None:
        return pref.default
    try:
        return pref.parse(raw)
    except InvalidInput:
        return pref.default


def get(db: Database, key: str) -> Any:
    with db.read() as conn:
        return read(conn, key)


def list_values(db: Database) -> dict[str, Any]:
    with db.read() as conn:
        return {key: read(conn, key) for key in PREFERENCES}


def set_value(db: Database, key: str, text: str) -> Any:
    """Validate ``text`` for ``key`` and store it (a person only); returns the typed value stored."""
    pref = preference(key)
    require_person(f"change the preference {key}")
    value = pref.parse(text)
    if key == DATA_DIR:
        paths.set_configured_data_dir(Path(value) if value else None)
        return value
    with db.write() as conn:
        settings.put(conn, key, pref.show(value))
    return value


def max_file_bytes(conn: Connection) -> int:
    return int(read(conn, "ingest.max_file_mb")) * MiB


def ignore_patterns(conn: Connection) -> list[str]:
    return list(read(conn, "ingest.ignore_patterns"))


# -- pause / resume --------------------------------------------------------------------------------


def is_paused(db: Database) -> bool:
    """Whether indexing is paused (the worker claims nothing new); survives restarts."""
    with db.read() as conn:
        return settings.get(conn, PAUSED_KEY) == "1"


def set_paused(db: Database, paused: bool) -> bool:
    require_person("pause or resume indexing")
    with db.write() as conn:
        settings.put(conn, PAUSED_KEY, "1" if paused else "0")
        settings.put(conn, PAUSED_BY_KEY, "person")
    return paused


def apply_battery_rule(db: Database, on_battery: bool | None) -> bool | None:
    """Pause on battery, resume on mains — only a pause this rule made; returns the new state if it changed.

    ``on_battery`` is what the platform reports (``None``: no battery or unknown — nothing happens).
    A pause a person made is left alone, and a resume a person made while on battery holds until the
    next switch to battery.
    """
    if on_battery is None:
        return None
    require_person("pause or resume indexing")
    with db.read() as conn:
        wanted = read(conn, "worker.pause_on_battery") == "yes"
        paused = settings.get(conn, PAUSED_KEY) == "1"
        by_battery = settings.get(conn, PAUSED_BY_KEY) == "battery"
        was_on_battery = settings.get(conn, "jobs.on_battery") == "1"
    if on_battery == was_on_battery:
        return None
    with db.write() as conn:
        settings.put(conn, "jobs.on_battery", "1" if on_battery else "0")
        if wanted and on_battery and not paused:
            settings.put(conn, PAUSED_KEY, "1")
            settings.put(conn, PAUSED_BY_KEY, "battery")
            return True
        if not on_battery and paused and by_battery:
            settings.put(conn, PAUSED_KEY, "0")
            settings.put(conn, PAUSED_BY_KEY, "")
            return False
    return None
