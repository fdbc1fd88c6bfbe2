"""The bearer token of a data directory's MCP HTTP endpoint.

Contract
* One token per data directory, generated on first need (``secrets``, 256 bits) and kept in
  ``<data dir>/agents/mcp-token``: the directory is created ``0700`` and the file ``0600`` (owner only),
  written through ``os.open`` with those modes so it is never readable by others, not even briefly.
* The file appears whole or not at all: the token is written to a private temporary file first, then
  linked into place (a new token: the first process to link wins, the others read its token) or
  renamed over a file that holds no usable token (empty, unreadable, not a regular file) — never
  re-created in place, so no reader ever sees it empty and a damaged file cannot make this loop.
* It is read ``O_NOFOLLOW``, only as a regular file, at most ``MAX_TOKEN_BYTES``.
* The token is shown only by ``quire mcp --print-config`` and the window's Agent access page; it is
  never logged (nothing here logs it, and the server's verifier logs neither presented nor stored
  tokens).
* :func:`verify` reads the file on every request, so :func:`revoke` (which deletes it) locks out every
  client at once, also a running server's; the next :func:`ensure_token` makes a new one.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from knowledge.store.permissions import FILE_MODE, make_private_dir

TOKEN_DIR = "agents"
TOKEN_FILE = "mcp-token"
MAX_TOKEN_BYTES = 4096


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_DIR / TOKEN_FILE


def read_token(data_dir: Path) -> str | None:
    """The token, or None when there is no usable one (missing, empty, not a regular file, unreadable)."""
    try:
        fd = os.open(token_path(data_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, MAX_TOKEN_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        value = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return value if value and len(raw) <= MAX_TOKEN_BYTES else None


def ensure_token(data_dir: Path) -> str:
    """The data directory's token, made now (owner-only) if there is no usable one."""
    existing = read_token(data_dir)
    if existing is not None:
        return existing
    folder = data_dir / TOKEN_DIR
    make_private_dir(folder)  # a new data directory too: 0700 from the start
    os.chmod(folder, 0o700)
    path = token_path(data_dir)
    token = secrets.token_urlsafe(32)
    temporary = folder / f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token)
        try:
            os.link(temporary, path)  # appears whole, and only if no other process made one first
        except FileExistsError:
            theirs = read_token(data_dir)
            if theirs is not None:
                return theirs
            os.replace(temporary, path)  # a file without a usable token: replaced, whole
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return read_token(data_dir) or token


def revoke(data_dir: Path) -> bool:
    """Forget the token (every client using it is refused from now on); True if there was one."""
    try:
        token_path(data_dir).unlink()
    except FileNotFoundError:
        return False
    return True


def verify(data_dir: Path, presented: str) -> bool:
    current = read_token(data_dir)
    return current is not None and hmac.compare_digest(current.encode("ascii"), presented.encode("ascii", "replace"))
