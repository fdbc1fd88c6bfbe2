"""Where a data directory lives: ``--data-dir``, else ``QUIRE_DATA_DIR``, else the per-user config file's
choice (the Preferences' "data directory", which cannot live inside the data directory it names), else the
platform default. The config file is ``<user config dir>/Quire/config.json`` (``QUIRE_CONFIG_DIR`` moves it:
tests and portable installs); a change applies on the next start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import platformdirs

ENV_VAR = "QUIRE_DATA_DIR"
CONFIG_ENV_VAR = "QUIRE_CONFIG_DIR"
CONFIG_FILE = "config.json"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("Quire", appauthor=False))


def config_file() -> Path:
    folder = os.environ.get(CONFIG_ENV_VAR) or platformdirs.user_config_dir("Quire", appauthor=False)
    return Path(folder) / CONFIG_FILE


def _read_config() -> dict[str, object]:
    try:
        data = json.loads(config_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def configured_data_dir() -> Path | None:
    """The data directory chosen in Preferences (applies on the next start), if any."""
    value = _read_config().get("data_dir")
    return Path(value).expanduser() if isinstance(value, str) and value else None


def set_configured_data_dir(path: Path | None) -> None:
    """Write (or clear, with ``None``) the chosen data directory; written whole, then renamed into place."""
    data = _read_config()
    if path is None:
        data.pop("data_dir", None)
    else:
        data["data_dir"] = str(path)
    _write_config(data)


def _write_config(data: dict[str, object]) -> None:
    target = config_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, target)


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (configured_data_dir() or default_data_dir()).resolve()


TEAM_STORE_KEY = "team_store"


def without_password(url: str) -> str:
    """A URL with its password left out (``scheme://user@host:port/…``): the only form a store or queue URL
    is ever written to the config file in."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = user + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def remembered_team_store() -> tuple[str, str | None] | None:
    """The team store (and queue) the window last connected to, without passwords, if any."""
    value = _read_config().get(TEAM_STORE_KEY)
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        return None
    queue = value.get("queue")
    return str(value["url"]), queue if isinstance(queue, str) and queue else None


def remember_team_store(url: str | None, queue: str | None = None) -> None:
    """Keep (or forget, with ``None``) the team store the window connected to — its passwords left out."""
    data = _read_config()
    if url is None:
        data.pop(TEAM_STORE_KEY, None)
    else:
        data[TEAM_STORE_KEY] = {"url": without_password(url), "queue": without_password(queue) if queue else None}
    _write_config(data)
