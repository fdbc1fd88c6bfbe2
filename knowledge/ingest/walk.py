"""Walking a local folder: the one set of visibility rules that adding a folder and folder runs share.

* Symlinks are never followed out of (or around) the tree: a link to a folder is reported, not walked.
* A directory that cannot be read is neither walked nor counted; the walk notes that it met one.
* ``.quireignore`` files (gitignore syntax) apply from the folder where they stand downwards; one that
  contains ``*`` alone excludes its own directory. VCS metadata folders (``.git``, ``.hg``, ``.svn``)
  are not walked. The global ignore patterns (Preferences, passed as ``ignore``) apply below every root.
* A ``.quireignore`` is read only through ``knowledge.sources.files.read_small_file``: a regular file
  (or a link to one inside the root), never blocking, at most 64 KiB. One that cannot be used that way
  (a pipe, a device, a link out of the root, too large, unreadable) excludes the folder it stands in,
  with the reason: the person's rules are never silently dropped, so nothing they meant to keep out is
  read because their ignore file was odd (fail closed).
* With a ``cap``, the walk counts every file and directory it reaches and stops at ``cap + 1``,
  raising ``CapExceeded``: it refuses, it never truncates. A directory an ignore rule excludes is
  counted (it was reached) but not entered.
* ``hidden`` directories (the application's own data directory) are invisible: neither walked, nor
  counted, nor noted.
* Readability is decided by :func:`is_readable_dir` (``os.access``), one function on purpose: running
  as root, ``chmod 000`` does not stop reading, so tests replace it to model an unreadable folder.
* :func:`judge_path` applies the same rules to one relative path (the root-down chain of ignore
  files, own markers, links, readability), so a folder run can re-judge a single source when it
  reaches it instead of re-walking the whole folder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from knowledge.sources import SourceRejected
from knowledge.sources.files import read_small_file

IGNORE_FILE = ".quireignore"
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
SKIPPED_FILES = frozenset({IGNORE_FILE, ".DS_Store"})
GLOBAL = "\0global"  # the rules' marker for the global ignore patterns (no relative path looks like it)


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
    mtime: float | None = None  # regular files only: lets a re-expansion skip unchanged files unread


@dataclass
class Walk:
    root: Path
    entries: list[Entry] = field(default_factory=list)
    walked: int = 0  # files and directories reached (what the cap counts)
    unreadable_dirs: list[str] = field(default_factory=list)  # relative paths of folders it could not read
    shallow: bool = False  # only the root's own entries: its sub-folders are reported, not entered

    def files(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "file"]


@dataclass(frozen=True)
class IgnoreFile:
    """A folder's ``.quireignore`` as read: its lines, or why it cannot be used."""

    lines: tuple[str, ...] = ()
    unusable: str | None = None

    def own_exclusion(self) -> str | None:
        """Why the folder it stands in is excluded: ``*`` alone, or an ignore file that cannot be used."""
        if self.unusable is not None:
            return f"excluded: its own {IGNORE_FILE} cannot be used: {self.unusable}"
        if any(line.strip() == "*" for line in self.lines):
            return f"excluded by its own {IGNORE_FILE}"
        return None


def read_ignore_file(directory: Path, root: Path) -> IgnoreFile | None:
    """The ``.quireignore`` of ``directory`` (None when it has none), read within the walk's ``root``."""
    path = directory / IGNORE_FILE
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return IgnoreFile(unusable="it cannot be read")
    try:
        data = read_small_file(path, root=root)
    except SourceRejected as refused:
        return IgnoreFile(unusable=refused.reason)
    return IgnoreFile(tuple(data.decode("utf-8", errors="replace").splitlines()))


@dataclass(frozen=True)
class _Rules:
    specs: tuple[tuple[str, pathspec.PathSpec[Any]], ...] = ()  # (directory rel path, spec)
    blocked: tuple[tuple[str, str], ...] = ()  # (directory rel path, why its ignore file cannot be used)

    def excluded(self, relative: str, is_dir: bool) -> str | None:
        for base, why in self.blocked:
            if not base or relative.startswith(base + "/"):
                where = f"{base}/{IGNORE_FILE}" if base else IGNORE_FILE
                return f"excluded: {where} cannot be used: {why}"
        for base, spec in self.specs:
            if base and base != GLOBAL and not relative.startswith(base + "/"):
                continue
            sub = relative[len(base) + 1 :] if base and base != GLOBAL else relative
            if spec.match_file(sub + ("/" if is_dir else "")):
                if base == GLOBAL:
                    return "excluded by the global ignore patterns"
                where = f"{base}/{IGNORE_FILE}" if base else IGNORE_FILE
                return f"excluded by {where}"
        return None

    @staticmethod
    def start(patterns: Sequence[str]) -> _Rules:
        """The rules at a walk's root: the global patterns (Preferences), matched below the root."""
        if not patterns:
            return _Rules()
        return _Rules(((GLOBAL, pathspec.PathSpec.from_lines("gitignore", list(patterns))),))

    def with_ignore(self, directory_rel: str, ignore: IgnoreFile | None) -> _Rules:
        if ignore is None:
            return self
        if ignore.unusable is not None:
            return _Rules(self.specs, (*self.blocked, (directory_rel, ignore.unusable)))
        spec = pathspec.PathSpec.from_lines("gitignore", list(ignore.lines))
        return _Rules((*self.specs, (directory_rel, spec)), self.blocked)


def is_readable_dir(path: Path) -> bool:
    """Whether the walk may enter ``path``: listable and traversable by this process.

    Decided with ``os.access`` instead of by trying, and kept in this one function, so that tests can
    replace it: as root (CAP_DAC_OVERRIDE) a ``chmod 000`` folder is still readable, so a test that
    needs an unreadable folder monkeypatches ``knowledge.ingest.walk.is_readable_dir``.
    """
    return os.access(path, os.R_OK | os.X_OK)


def _resolved(paths: Sequence[Path]) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(p)) for p in paths)


def _is_hidden(path: Path, hidden: tuple[Path, ...]) -> bool:
    if not hidden:
        return False
    real = Path(os.path.realpath(path))
    return any(real == h or h in real.parents for h in hidden)


def walk(
    root: Path,
    *,
    cap: int | None = None,
    hidden: Sequence[Path] = (),
    ignore: Sequence[str] = (),
    shallow: bool = False,
) -> Walk:
    """Every entry below ``root`` by the rules above; ``shallow``: only its own (sub-folders not entered)."""
    result = Walk(root, shallow=shallow)
    if not is_readable_dir(root):
        result.unreadable_dirs.append(".")
        return result
    rules = _Rules.start(ignore).with_ignore("", read_ignore_file(root, root))
    for entry in _walk_dir(root, "", rules, result, cap, _resolved(hidden)):
        result.entries.append(entry)
    return result


def _count(result: Walk, cap: int | None) -> None:
    result.walked += 1
    if cap is not None and result.walked > cap:
        raise CapExceeded(cap)


def _walk_dir(
    directory: Path, rel: str, rules: _Rules, result: Walk, cap: int | None, hidden: tuple[Path, ...]
) -> Iterator[Entry]:
    """The entries below ``directory``; ``rules`` already hold its own ignore file."""
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
        yield from _visit(Path(dirent.path), child_rel, rules, result, cap, hidden)


def _visit(
    path: Path, rel: str, rules: _Rules, result: Walk, cap: int | None, hidden: tuple[Path, ...]
) -> Iterator[Entry]:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        if _is_hidden(path, hidden):
            return  # the application's own data: invisible, not even noted
        if not is_readable_dir(path):
            result.unreadable_dirs.append(rel)
            return  # neither walked nor counted
        _count(result, cap)
        excluded = rules.excluded(rel, True)
        ignore = None if excluded is not None else read_ignore_file(path, result.root)
        if ignore is not None:
            excluded = ignore.own_exclusion()
        yield Entry(path, rel, "dir", excluded)
        if excluded is None and not result.shallow:
            yield from _walk_dir(path, rel, rules.with_ignore(rel, ignore), result, cap, hidden)
        return
    if stat.S_ISLNK(st.st_mode) and _is_hidden(path, hidden):
        return  # a link into the application's own data is as invisible as the data itself
    _count(result, cap)
    if stat.S_ISLNK(st.st_mode):
        kind = "link_to_dir" if os.path.isdir(path) else ("file" if os.path.isfile(path) else "dangling_link")
        if kind == "file":
            kind = _link_kind(path, result.root)
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "special"
    regular = stat.S_ISREG(st.st_mode)
    yield Entry(
        path,
        rel,
        kind,
        rules.excluded(rel, False),
        st.st_size if kind == "file" else None,
        st.st_mtime if regular else None,
    )


def _link_kind(path: Path, root: Path) -> str:
    """A link to a file inside the walked folder is read; one pointing outside it is not followed."""
    target = Path(os.path.realpath(path))
    try:
        target.relative_to(Path(os.path.realpath(root)))
    except ValueError:
        return "link_outside"
    return "file"


# -- judging one path --------------------------------------------------------------------------

VISIBLE, UNAVAILABLE, OUTSIDE_ROOT, EXCLUDED = "visible", "unavailable", "outside_root", "excluded"


@dataclass(frozen=True)
class PathJudgement:
    """What the walk's rules say about one file below a root, judged now."""

    verdict: str  # visible | unavailable | outside_root | excluded
    reason: str | None = None
    unreadable_dirs: tuple[str, ...] = ()  # folders on the way that could not be read (a read to note)


def judge_path(root: Path, relative: str, *, hidden: Sequence[Path] = (), ignore: Sequence[str] = ()) -> PathJudgement:
    """Judge the file at ``root/relative`` by the rules :func:`walk` applies, without walking siblings.

    The chain from the root down is checked folder by folder: each must still be a readable, real
    directory (a link to a folder is not followed; one that now points outside the root means the
    source left it), not hidden, not excluded by the ignore files above it or by its own marker. The
    file itself must be a regular file, or a link to one inside the root, and not excluded.
    """
    hidden_real = _resolved(hidden)
    parts = relative.split("/")
    if not relative or any(part in ("", ".", "..") for part in parts) or relative.startswith("/"):
        return PathJudgement(UNAVAILABLE, "not a path below the folder")
    if not is_readable_dir(root):
        return PathJudgement(UNAVAILABLE, "the folder cannot be read", (".",))
    root_real = Path(os.path.realpath(root))
    rules = _Rules.start(ignore).with_ignore("", read_ignore_file(root, root))
    current, rel = root, ""
    for name in parts[:-1]:
        current, rel = current / name, f"{rel}/{name}" if rel else name
        verdict = _judge_dir(current, rel, name, rules, root_real, hidden_real)
        if isinstance(verdict, PathJudgement):
            return verdict
        rules = rules.with_ignore(rel, verdict)
    return _judge_file(current / parts[-1], relative, parts[-1], rules, root_real, hidden_real)


def _judge_dir(
    path: Path, rel: str, name: str, rules: _Rules, root_real: Path, hidden: tuple[Path, ...]
) -> PathJudgement | IgnoreFile | None:
    """A verdict when the folder stops the path, else the folder's own ignore file (None: it has none)."""
    if name in SKIPPED_DIRS:
        return PathJudgement(EXCLUDED, "inside a version-control folder")
    try:
        st = os.lstat(path)
    except OSError:
        return PathJudgement(UNAVAILABLE, "a folder on its path no longer exists")
    if stat.S_ISLNK(st.st_mode):
        if not _inside(path, root_real):
            return PathJudgement(OUTSIDE_ROOT, "a folder on its path now leads outside the folder")
        return PathJudgement(UNAVAILABLE, "a folder on its path is now a link, which is not followed")
    if not stat.S_ISDIR(st.st_mode) or _is_hidden(path, hidden):
        return PathJudgement(UNAVAILABLE, "a folder on its path is no longer a folder")
    if not is_readable_dir(path):
        return PathJudgement(UNAVAILABLE, "a folder on its path cannot be read", (rel,))
    excluded = rules.excluded(rel, True)
    if excluded is not None:
        return PathJudgement(EXCLUDED, excluded)
    ignore = read_ignore_file(path, root_real)
    own = None if ignore is None else ignore.own_exclusion()
    if own is not None:
        return PathJudgement(EXCLUDED, f"a folder on its path is {own}")
    return ignore


def _judge_file(
    path: Path, rel: str, name: str, rules: _Rules, root_real: Path, hidden: tuple[Path, ...]
) -> PathJudgement:
    if name in SKIPPED_FILES:
        return PathJudgement(EXCLUDED, "not a document")
    try:
        st = os.lstat(path)
    except OSError:
        return PathJudgement(UNAVAILABLE, "the file no longer exists")
    if stat.S_ISLNK(st.st_mode):
        if not _inside(path, root_real):
            return PathJudgement(OUTSIDE_ROOT, "the file now points outside the folder")
        if _is_hidden(path, hidden) or not os.path.isfile(path):
            return PathJudgement(UNAVAILABLE, "the file is now a link to something that is not a file")
    elif not stat.S_ISREG(st.st_mode):
        return PathJudgement(UNAVAILABLE, "no longer a regular file")
    excluded = rules.excluded(rel, False)
    if excluded is not None:
        return PathJudgement(EXCLUDED, excluded)
    return PathJudgement(VISIBLE)


def _inside(path: Path, root_real: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root_real or root_real in real.parents
