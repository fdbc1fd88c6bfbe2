"""Portable bases: ``base export``, ``base import``, ``base relocate``, ``backup``, ``restore``, ``salvage``.

The ``base`` actions are added to the ``base`` parser that ``commands_bases`` defines (this module
is listed after it in ``COMMAND_MODULES``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli.base import Output, UsageError, local_only
from app.cli.commands_core import opened


def _base_actions(sub: Any) -> Any:
    base_parser = sub.choices["base"]
    for action in base_parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise RuntimeError("the base command has no actions")


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    bsub = _base_actions(sub)
    p = bsub.add_parser("export", parents=[common], help="write a base, with its vectors, to one file")
    p.add_argument("base")
    p.add_argument("file", type=Path)
    p.set_defaults(func=cmd_base_export)
    p = bsub.add_parser("import", parents=[common], help="make a new base from an export file")
    p.add_argument("file", type=Path)
    p.add_argument("--name", help="the new base's name (default: the exported name)")
    p.set_defaults(func=cmd_base_import)
    p = bsub.add_parser("relocate", parents=[common], help="re-point source paths from OLD to NEW")
    p.add_argument("base")
    p.add_argument("old")
    p.add_argument("new")
    p.set_defaults(func=cmd_base_relocate)

    p = sub.add_parser("backup", parents=[common], help="online backup of the data directory into DIR")
    p.add_argument("dir", type=Path, nargs="?")
    p.add_argument("--keep", type=int, help="then keep only the newest N backups in DIR")
    p.add_argument("--auto", action="store_true", help="instead: back up into DIR automatically (the window does)")
    p.add_argument("--every-hours", type=float, default=24.0, help="with --auto: how often (default 24)")
    p.add_argument("--auto-off", action="store_true", help="turn automatic backups off")
    p.set_defaults(func=cmd_backup)
    p = sub.add_parser("restore", parents=[common], help="check a backup and restore it into the data directory")
    p.add_argument("backup", type=Path)
    p.add_argument("--force", action="store_true", help="move a non-empty data directory aside first")
    p.add_argument("--check-only", action="store_true", help="only check the backup")
    p.set_defaults(func=cmd_restore)
    p = sub.add_parser(
        "salvage", parents=[common], help="copy what a damaged database can still give into a new data directory"
    )
    p.add_argument("--to", type=Path, required=True, help="a new, empty data directory")
    p.set_defaults(func=cmd_salvage)


class _Progress:
    """Progress on stderr for people (a line per stage change and every few percent)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or not sys.stderr.isatty()
        self.last: tuple[str, int] = ("", -1)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        percent = 100 if total <= 0 else int(done * 100 / total)
        if (stage, percent // 5) != self.last:
            self.last = (stage, percent // 5)
            print(f"\r{stage}: {done}/{total} ({percent}%)   ", end="", file=sys.stderr, flush=True)


def cmd_base_export(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable import export_base

    with opened(args) as quire:
        result = export_base(quire, args.base, args.file, progress=_Progress(args.json))
    d = result.as_dict()
    out.emit(
        d,
        lambda r: (
            f"\nexported {r['base']!r}: {r['items']} items, {r['chunks']} chunks, {r['blobs']} owned files "
            f"-> {r['path']} ({r['bytes']} bytes, {r['seconds']} s)"
            + (
                f"\nnote: {r['active_items']} item(s) were still being indexed and were exported as they stand"
                if r["active_items"]
                else ""
            )
        ),
    )
    return 0


def cmd_base_import(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable import import_base

    with opened(args) as quire:
        result = import_base(quire, args.file, name=args.name, progress=_Progress(args.json))
    out.emit(
        result.as_dict(),
        lambda r: (
            f"\nimported {r['name']!r} (id {r['base_id']}): {r['items']} items, {r['chunks']} chunks"
            + (" (resumed)" if r["resumed"] else "")
            + (
                f"\n{r['marked_for_reindex']} item(s) were mid-indexing at export; reindex them"
                if r["marked_for_reindex"]
                else ""
            )
        ),
    )
    return 0


def cmd_base_relocate(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable.relocate import relocate_base

    with opened(args) as quire:
        moved = relocate_base(quire, args.base, args.old, args.new)
    out.emit({"relocated": moved}, f"{moved} item(s) now point under {args.new}")
    return 0


def cmd_backup(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable import backup

    local_only(args, "backup", "back a team store up with pg_dump (its own consistent copy)")

    if args.auto_off or args.auto:
        with opened(args) as quire:
            if args.auto_off:
                backup.set_auto_backup(quire, None)
                out.emit({"auto": None}, "automatic backups are off")
                return 0
            if args.dir is None:
                raise UsageError("--auto needs a DIR")
            chosen = backup.set_auto_backup(quire, backup.AutoBackup(str(args.dir), args.every_hours, args.keep or 7))
        assert chosen is not None
        out.emit(
            {"auto": chosen.as_dict()},
            f"automatic backups into {chosen.dir} every {chosen.every_hours} h, keeping {chosen.keep} "
            "(while the window is open)",
        )
        return 0
    if args.dir is None:
        raise UsageError("give the folder to back up into")
    with opened(args) as quire:
        result = backup.backup_data_dir(quire, args.dir, progress=_Progress(args.json))
    removed = backup.prune_backups(Path(result.path).parent, args.keep) if args.keep else []
    out.emit(
        {**result.as_dict(), "removed": removed},
        lambda r: (
            f"\nbackup written to {r['path']} ({r['blobs']} owned files)"
            + (f"; removed {len(r['removed'])} older backup(s)" if r["removed"] else "")
        ),
    )
    return 0


def cmd_restore(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable.backup import check_backup, restore_backup

    local_only(args, "restore", "restore a team store with pg_restore")

    if args.check_only:
        checked = check_backup(args.backup)
        out.emit(checked.as_dict(), f"{checked.path}: database ok, {checked.blobs} owned files listed")
        return 0 if not checked.blobs_missing else 1
    result = restore_backup(args.backup, Path(args.data_dir), force=args.force)
    out.emit(result, restore_text)
    return 0


def restore_text(r: dict[str, Any]) -> str:
    """What a restore copied, and everything it refused or held back, in words."""
    lines = [f"restored {r['restored_from']} into {r['data_dir']}", f"  {r['blobs']} owned file(s) copied"]
    if r["blobs_missing"]:
        lines.append(f"  {r['blobs_missing']} owned file(s) missing from the backup")
    if r["blobs_invalid"]:
        lines.append(f"  refused owned-copy names that are not hashes: {', '.join(r['blobs_invalid'])}")
    refused = r.get("blobs_refused_count", len(r["blobs_refused"]))
    if refused:
        lines.append(f"  {refused} owned file(s) refused, not copied:")
        lines.extend(f"    {reason}" for reason in r["blobs_refused"])
        if refused > len(r["blobs_refused"]):
            lines.append(f"    and {refused - len(r['blobs_refused'])} more")
    if r["originals_unverified"]:
        lines.append(
            f"  {r['originals_unverified']} original(s) not verified: reindex reads the owned copies and sync "
            "waits until you run `quire base relocate`"
        )
    for name in r["endpoints_held_back"]:
        lines.append(f"  the endpoint of {name!r} waits for `quire base confirm-endpoint {name}`")
    if r["jobs_cancelled"] or r["messages_discarded"]:
        lines.append(
            f"  {r['jobs_cancelled']} queued job(s) cancelled and {r['messages_discarded']} queue message(s) "
            "discarded: reindex what they left unfinished"
        )
    if r["moved_aside"]:
        lines.append(f"  the folder's old contents were moved to {r['moved_aside']}")
    return "\n".join(lines)


def cmd_salvage(args: argparse.Namespace, out: Output) -> int:
    from knowledge.portable.salvage import salvage

    local_only(args, "salvage", "a team store's server keeps its own pages; see PostgreSQL's recovery")

    result = salvage(Path(args.data_dir), args.to)  # the damaged directory is only read
    out.emit(
        result.as_dict(),
        lambda r: (
            f"salvaged into {r['to']}: "
            + ", ".join(f"{t} {v['copied']}" for t, v in r["tables"].items() if v["copied"])
            + f"\n{r['items_parked']} item(s) lost chunks and are parked for reindex"
        ),
    )
    return 0
