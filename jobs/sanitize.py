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

# A quoted absolute path ('/a/b c/d.txt', "C:\\x\\y") may hold spaces. An unquoted one is a run of
# components; a component may hold spaces when another component follows it (``/home/ann smith/notes.txt``
# is one path), and the last one ends at whitespace (what follows a space in a file name is left as text,
# so only the name's first word is kept from it). It may start after a colon (``open failed:/x/y``), not
# after a word, a dot or another slash (``docs/a.md``, ``https://host/p`` are not absolute paths).
_NAME = r"""[^\s'"/\\,;:()\[\]]+"""
_QUOTED_PATH = re.compile(r"""(['"])((?:~|[A-Za-z]:)?[/\\][^'"\n]*)\1""")
_BARE_PATH = re.compile(
    rf"""(?<![\w.~/\\])(?:~|[A-Za-z]:)?(?:[/\\]{_NAME}(?: +{_NAME})*(?=[/\\]))*[/\\]{_NAME}[/\\]?"""
)
# Matching is bounded: only this much of the first line is read (a reason keeps far less).
_SCAN_CHARS = 4 * MAX_REASON_CHARS
_FILE_URL = re.compile(r"file://\S+")


def _last_part(path: str) -> str:
    name = re.split(r"[/\\]", path.rstrip("/\\"))[-1]
    return name or "(folder)"


def _home_and_user() -> tuple[str, str]:
    """The home directory (to become ``~``) and ``/user/`` (a path segment naming the user); "" if none."""
    home = os.path.expanduser("~")
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment: nothing to strip
        user = ""
    return (home if home not in ("", "/", "~") else "", f"/{user}/" if len(user) >= 2 else "")


def sanitize_reason(text: str) -> str:
    """``text`` as a stored reason: first line, no absolute path, no home directory, bounded length."""
    lines = [line for line in text.splitlines() if line.strip()]
    line = lines[0].strip()[:_SCAN_CHARS] if lines else ""
    line = _FILE_URL.sub(lambda m: _last_part(m.group(0)), line)
    home, user = _home_and_user()
    if home:  # first, so a path that ends at the home directory keeps none of its names
        line = line.replace(home, "~")
    line = _QUOTED_PATH.sub(lambda m: f"{m.group(1)}{_last_part(m.group(2))}{m.group(1)}", line)
    line = _BARE_PATH.sub(lambda m: _last_part(m.group(0)), line)
    if user:
        line = line.replace(user, "~/")
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
