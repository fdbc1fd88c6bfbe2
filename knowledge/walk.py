"""Walking a local folder: the one set of visibility rules that adding a folder and folder runs share.

* Symlinks are never followed out of (or around) the tree: a link to a folder is reported, not walked.
* A directory that cannot be read is neither walked nor counted; the walk notes that it met one.
* ``.quireignore`` files (gitignore syntax) apply from the folder where they stand downwards; one that
  contains ``*`` alone excludes its own directory. VCS metadata folders (``.git``, ``.hg``, ``.svn``)
  are not walked.
* With a ``cap``, the walk counts every file and directory it reaches and stops at ``cap + 1``,
  raising ``CapExceeded``: it refuses, it never truncates.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

IGNORE_FILE = ".quireignore"
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
SKIPPED_FILES = frozenset({IGNORE_FILE, ".DS_Store"})


class CapExceeded(Exception):
    def __init__(self, cap: int) -> None:
        super().__init__(f"the folder has more than {cap} files and folders")
        self.cap = cap


@dataclass(frozen=True)
class Entry:
    path: Path  # absolute
    relative: str  # posix path below the root
    kind: str  # file | dir | link_to_dir | dangling_link | special | unreadable_dir
    excluded: str | None = None  # why an ignore rule excludes it, if one does
    size: int | None = None


@dataclass
class Walk:
    root: Path
    entries: list[Entry] = field(default_factory=list)
    walked: int = 0  # files and directories reached (what the cap counts)
    unreadable_dirs: list[str] = field(default_factory=list)  # relative paths of folders it could not read

    def files(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "file"]


@dataclass(frozen=True)
class _Rules:
    specs: tuple[tuple[str, pathspec.PathSpec], ...] = ()  # (directory rel path, spec)

    def excluded(self, relative: str, is_dir: bool) -> str | None:
        for base, spec in self.specs:
            if base and not relative.startswith(base + "/"):
                continue
            sub = relative[len(base) + 1 :] if base else relative
            if spec.match_file(sub + ("/" if is_dir else "")):
                where = f"{base}/{IGNORE_FILE}" if base else IGNORE_FILE
                return f"excluded by {where}"
        return None

    def with_file(self, directory_rel: str, ignore_file: Path) -> _Rules:
        try:
            lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return self
        spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
        return _Rules((*self.specs, (directory_rel, spec)))


def own_marker_excludes(directory: Path) -> bool:
    """A ``.quireignore`` containing ``*`` on its own excludes the directory it stands in."""
    try:
        lines = (directory / IGNORE_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    return any(line.strip() == "*" for line in lines)


def walk(root: Path, *, cap: int | None = None) -> Walk:
    result = Walk(root)
    for entry in _walk_dir(root, "", _Rules(), result, cap):
        result.entries.append(entry)
    return result


def _count(result: Walk, cap: int | None) -> None:
    result.walked += 1
    if cap is not None and result.walked > cap:
        raise CapExceeded(cap)


def _walk_dir(directory: Path, rel: str, rules: _Rules, result: Walk, cap: int | None) -> Iterator[Entry]:
    if (directory / IGNORE_FILE).is_file():
        rules = rules.with_file(rel, directory / IGNORE_FILE)
    try:
        with os.scandir(directory) as it:
            names = sorted((e.name, e) for e in it)
    except OSError:
        result.unreadable_dirs.append(rel or ".")
        return
    for name, dirent in names:
        if name in SKIPPED_FILES or name in SKIPPED_DIRS:
            continue
        child_rel = f"{rel}/{name}" if rel else name
        yield from _visit(Path(dirent.path), child_rel, rules, result, cap)


def _visit(path: Path, rel: str, rules: _Rules, result: Walk, cap: int | None) -> Iterator[Entry]:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        if not os.access(path, os.R_OK | os.X_OK):
            result.unreadable_dirs.append(rel)
            return  # neither walked nor counted
        _count(result, cap)
        excluded = rules.excluded(rel, True) or (
            "excluded by its own .quireignore" if own_marker_excludes(path) else None
        )
        yield Entry(path, rel, "dir", excluded)
        if excluded is None:
            yield from _walk_dir(path, rel, rules, result, cap)
        return
    _count(result, cap)
    if stat.S_ISLNK(st.st_mode):
        kind = "link_to_dir" if os.path.isdir(path) else ("file" if os.path.isfile(path) else "dangling_link")
        if kind == "file":
            kind = _link_kind(path, result.root)
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "special"
    yield Entry(path, rel, kind, rules.excluded(rel, False), st.st_size if kind == "file" else None)


def _link_kind(path: Path, root: Path) -> str:
    """A link to a file inside the walked folder is read; one pointing outside it is not followed."""
    target = Path(os.path.realpath(path))
    try:
        target.relative_to(Path(os.path.realpath(root)))
    except ValueError:
        return "link_outside"
    return "file"
