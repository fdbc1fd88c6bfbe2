"""A folder beside the data directory that a hostile input must never reach: its files' bytes and times are
recorded, and :meth:`Outside.assert_untouched` fails on anything created, changed or deleted in it."""

from __future__ import annotations

import os
from pathlib import Path

SECRET = b"SECRET-NOT-FOR-QUIRE 7f3a9c\n"


class Outside:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.secret = root / "sentinel.txt"
        self.secret.write_bytes(SECRET)
        (root / "folder").mkdir(exist_ok=True)
        (root / "folder" / "other.txt").write_bytes(b"another private file\n")
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        found: dict[str, tuple[bytes, int]] = {}
        for dirpath, dirs, files in os.walk(self.root):
            for name in [*dirs, *files]:
                path = Path(dirpath) / name
                info = path.lstat()
                data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
                found[str(path.relative_to(self.root))] = (data, info.st_mtime_ns)
        return found

    def assert_untouched(self) -> None:
        assert self.snapshot() == self.before, "something outside the data directory was created, changed or deleted"


def files_holding(root: Path, needle: bytes) -> list[Path]:
    """Regular files under ``root`` whose bytes contain ``needle`` (a secret must not be copied in)."""
    if not root.exists():
        return []
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]
