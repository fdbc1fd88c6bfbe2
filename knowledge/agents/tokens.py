"""The bearer token of a data directory's MCP HTTP endpoint.

Contract
* One token per data directory, generated on first need (``secrets``, 256 bits) and kept in
  ``<data dir>/agents/mcp-token``: the directory is created ``0700`` and the file ``0600`` (owner only),
  written through ``os.open`` with those modes so it is never readable by others, not even briefly.
* The token is shown only by ``quire mcp --print-config`` and the window's Agent access page; it is
  never logged (nothing here logs it, and the server's verifier logs neither presented nor stored
  tokens).
* :func:`verify` reads the file on every request, so :func:`revoke` (which deletes it) locks out every
  client at once, also a running server's; the next :func:`ensure_token` makes a new one.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

TOKEN_DIR = "agents"
TOKEN_FILE = "mcp-token"


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_DIR / TOKEN_FILE


def read_token(data_dir: Path) -> str | None:
    try:
        value = token_path(data_dir).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


def ensure_token(data_dir: Path) -> str:
    """The data directory's token, made now (owner-only) if there is none."""
    existing = read_token(data_dir)
    if existing is not None:
        return existing
    folder = data_dir / TOKEN_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    token = secrets.token_urlsafe(32)
    path = token_path(data_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return read_token(data_dir) or ensure_token(data_dir)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token)
    return token


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
