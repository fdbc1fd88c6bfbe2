"""The one sanitizer for every stored reason (items, folder-run outcomes, jobs, audit payloads).

A stored reason is a code plus a short message a person can read, and it never carries an absolute path
or the user's name: exception texts often do (``[Errno 13] Permission denied: '/home/ann/notes.pdf'``).
Absolute paths are cut to their last component (``notes.pdf``), the home directory to ``~``, and what
is left to one line of at most ``MAX_REASON_CHARS`` characters.
"""

from __future__ import annotations

import getpass
import os
import re

MAX_REASON_CHARS = 500

# A quoted absolute path ('/a/b c/d.txt', "C:\\x\\y") may hold spaces; an unquoted one ends at whitespace.
_QUOTED_PATH = re.compile(r"""(['"])((?:[A-Za-z]:)?[/\\][^'"\n]*)\1""")
_BARE_PATH = re.compile(r"""(?<![\w.~:/\\])(?:[A-Za-z]:)?(?:[/\\][^\s'"/\\,;:()\[\]]+)+[/\\]?""")
_FILE_URL = re.compile(r"file://\S+")


def _last_part(path: str) -> str:
    name = re.split(r"[/\\]", path.rstrip("/\\"))[-1]
    return name or "(folder)"


def _home_and_user() -> list[str]:
    found = []
    home = os.path.expanduser("~")
    if home not in ("", "/", "~"):
        found.append(home)
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment: nothing to strip
        user = ""
    if len(user) >= 2:
        found.append(f"/{user}/")
    return found


def sanitize_reason(text: str) -> str:
    """``text`` as a stored reason: first line, no absolute path, no home directory, bounded length."""
    lines = [line for line in text.splitlines() if line.strip()]
    line = lines[0].strip() if lines else ""
    line = _FILE_URL.sub(lambda m: _last_part(m.group(0)), line)
    line = _QUOTED_PATH.sub(lambda m: f"{m.group(1)}{_last_part(m.group(2))}{m.group(1)}", line)
    line = _BARE_PATH.sub(lambda m: _last_part(m.group(0)), line)
    for secret in _home_and_user():
        line = line.replace(secret, "~/" if secret.endswith("/") else "~")
    return line[:MAX_REASON_CHARS]


def sanitize_error(exc: BaseException) -> str:
    """An exception as a stored reason: ``Type: message`` (no traceback, no SQL parameters, no path)."""
    message = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        message = exc.strerror  # the file names of an OSError are paths by nature
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return sanitize_reason(text)


def sanitize_optional(text: str | None) -> str | None:
    return None if text is None else sanitize_reason(text)
