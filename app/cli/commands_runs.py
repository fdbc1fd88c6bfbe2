"""Folder-run commands: ``run preview|start|list|show|cancel|revert|retry`` and ``audit``.

The caller is a person (the OS user at the terminal) unless the global ``--as-agent NAME`` marks it
as an agent principal, which may preview and read but not start, cancel or revert runs (exit 5).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.base import EXIT_REFUSED, Output, UsageError
from app.cli.commands_core import opened, principal_of
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from knowledge import folder_runs
from knowledge.library import audit


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    run = sub.add_parser("run", parents=[common], help="folder runs: preview, start, list, show, cancel, revert, retry")
    rsub = run.add_subparsers(dest="run_command", metavar="ACTION", parser_class=type(run))
    rsub.required = True

    p = rsub.add_parser(
        "preview",
        parents=[common],
        help="what a run over FOLDER would ingest; over the cap: refused (exit 5) with the runs `start --split` "
        "would start",
    )
    p.add_argument("base", help="base name or id")
    p.add_argument("folder", type=Path)
    p.set_defaults(func=cmd_preview)

    p = rsub.add_parser(
        "start",
        parents=[common],
        help="start (or replay) a run over FOLDER; several folders: one run each, in order, from one process",
    )
    p.add_argument("base", help="base name or id")
    p.add_argument("folders", type=Path, nargs="+", metavar="FOLDER")
    p.add_argument(
        "--key",
        help="idempotency key (one FOLDER only): reusing it replays the same run instead of starting another "
        "(default: derived from base, folder, you and the files, so repeating the command replays its runs)",
    )
    p.add_argument(
        "--split",
        action="store_true",
        help="one FOLDER over the cap: start one run per sub-folder (split again where one is over the cap; the "
        "folder's own files are a run of their own), all in one transaction; a FOLDER within the cap is one run",
    )
    p.set_defaults(func=cmd_start)

    p = rsub.add_parser("list", parents=[common], help="runs over a folder or into a base")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--folder", type=Path)
    which.add_argument("--base")
    add_paging(p, most=1000)
    p.set_defaults(func=cmd_list)

    p = rsub.add_parser("show", parents=[common], help="a run's status, progress and per-source dispositions")
    p.add_argument("run", type=int)
    p.set_defaults(func=cmd_show)

    p = rsub.add_parser(
        "cancel",
        parents=[common],
        help="stop a pending or running run: it ends cancelled, keeping what it committed (revert undoes that)",
    )
    p.add_argument("run", type=int)
    p.set_defaults(func=cmd_cancel)

    p = rsub.add_parser("revert", parents=[common], help="undo a completed or cancelled run as a group")
    p.add_argument("run", type=int)
    p.set_defaults(func=cmd_revert)

    p = rsub.add_parser("retry", parents=[common], help="retry a failed run as a new run over the folder as it is now")
    p.add_argument("run", type=int)
    p.set_defaults(func=cmd_retry)

    p = sub.add_parser("audit", parents=[common], help="audit entries (optionally of one run)")
    p.add_argument("--run", type=int)
    add_paging(p)
    p.set_defaults(func=cmd_audit)


def _preview_text(d: dict[str, Any]) -> str:
    lines = [
        f"{d['folder']} → {d['base']['name']}: walked {d['walked']} of at most {d['cap']}; "
        f"{len(d['eligible'])} eligible, {len(d['ineligible'])} not"
    ]
    lines += [f"  + {e['path']} ({e['size']} bytes)" for e in d["eligible"]]
    lines += [f"  - {e['path']}: {e['reason']}" for e in d["ineligible"]]
    lines += [f"  ? {f}: could not be read (not walked)" for f in d["unreadable_folders"]]
    return "\n".join(lines)


def _plan_text(d: dict[str, Any]) -> str:
    lines = [f"`quire run start --split` would start {d['run_count']} runs of at most {d['cap']} files and folders:"]
    lines += [f"  {r['label']}: {r['files']} file(s), {r['walked']} walked" for r in d["runs"]]
    return "\n".join(lines)


def cmd_preview(args: argparse.Namespace, out: Output) -> int:
    """A folder over the cap is refused (exit 5) with the split plan: in the JSON error's ``split``, and below
    the refusal on stderr."""
    with opened(args) as quire:
        try:
            result = folder_runs.preview(quire, principal_of(args, quire), args.base, args.folder)
        except folder_runs.FolderTooLarge as refusal:
            try:
                plan = folder_runs.plan_split(quire, args.folder).as_dict()
            except folder_runs.FolderTooLarge as no_plan:
                raise folder_runs.FolderTooLarge(f"{refusal}; {no_plan}") from None
            return _refused_with_plan(out, refusal, plan)
    out.emit(result.as_dict(), _preview_text)
    return 0


def _refused_with_plan(out: Output, refusal: folder_runs.FolderTooLarge, plan: dict[str, Any]) -> int:
    if out.as_json:
        error = {"code": refusal.code, "message": str(refusal), "exit_code": EXIT_REFUSED, "split": plan}
        print(json.dumps({"error": error}, sort_keys=True))
    print(f"quire: {refusal}\n{_plan_text(plan)}", file=sys.stderr)
    return EXIT_REFUSED


def _started_text(d: dict[str, Any]) -> str:
    return f"{d['outcome']}: run {d['run_id']}, job {d['job_id']} (key {d['key']})" + (
        "" if d["outcome"] == "created" else "; pass another --key to start a new run over the same files"
    )


def cmd_start(args: argparse.Namespace, out: Output) -> int:
    """One run per folder, each started (or replayed) in its own transaction. Several folders share one
    process (its start-up is most of what starting a run costs); if one fails, the runs before it stay
    started, and repeating the command replays them and goes on."""
    if args.split:
        return _start_split(args, out)
    if args.key is not None and len(args.folders) > 1:
        raise UsageError("--key names one run: give one FOLDER with it")
    started = []
    with opened(args) as quire:
        who = principal_of(args, quire)
        for folder in args.folders:
            started.append(folder_runs.start_run(quire, who, args.base, folder, key=args.key).as_dict())
    if len(started) == 1:
        out.emit(started[0], lambda d: _started_text(d) + "; `quire worker` runs it")
    else:
        out.emit(
            {"runs": started},
            lambda d: "\n".join(_started_text(r) for r in d["runs"]) + "\n`quire worker` runs them",
        )
    return 0


def _split_text(d: dict[str, Any]) -> str:
    plan = d["split"]
    head = (
        f"{plan['folder']} is over the cap of {plan['cap']}: {plan['run_count']} runs, started in one transaction"
        if plan["over_cap"]
        else f"{plan['folder']} fits in one run (nothing to split)"
    )
    lines = [head] + [f"  {r['label']}: {_started_text(r)}" for r in d["runs"]]
    return "\n".join(lines) + "\n`quire worker` runs them"


def _start_split(args: argparse.Namespace, out: Output) -> int:
    """Every run of the split plan, or none (one transaction); repeating the command replays them."""
    if len(args.folders) > 1 or args.key is not None:
        raise UsageError("--split starts the runs of one FOLDER, each with a key of its own: give one FOLDER, no --key")
    with opened(args) as quire:
        started = folder_runs.start_split(quire, principal_of(args, quire), args.base, args.folders[0])
    out.emit(started.as_dict(), _split_text)
    return 0


def _status(r: dict[str, Any]) -> str:
    return f"{r['status']} (cancelling)" if r["cancel_requested"] else str(r["status"])


def _run_line(r: dict[str, Any]) -> str:
    c = r["counts"]
    return (
        f"{r['id']:>5} {_status(r):<10} {r['progress']['settled']}/{r['size']} settled, {c['committed']} committed, "
        f"{c['skipped']} skipped ({c['already_committed']} already committed), {c['rejected']} rejected  "
        f"{r['folder']} → {r['base']['name']}"
    )


def cmd_list(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        runs = folder_runs.list_runs(quire, folder=args.folder, base=args.base, limit=limit, after_id=args.after)
    rows = [r.as_dict() for r in runs]
    more = next_cursor(runs, limit, lambda r: int(r.run.id))
    out.emit(
        paged("runs", rows, more), lambda d: with_more("\n".join(_run_line(r) for r in d["runs"]) or "no runs", more)
    )
    return 0


def _show_text(d: dict[str, Any]) -> str:
    lines = [_run_line(d)]
    if d["retry_of"] is not None:
        lines.append(f"  retry of run {d['retry_of']}")
    if d["retried_by"] is not None:
        lines.append(f"  retried as run {d['retried_by']}")
    for key in ("created_at", "started_at", "finished_at", "reverted_at"):
        if d[key] is not None:
            lines.append(f"  {key}: {d[key]}")
    if d["error"]:
        lines.append(f"  error: {d['error']}")
    for s in d["sources"]:
        reason = f" ({s['reason']})" if s["reason"] else ""
        lines.append(f"  {s['ordinal']:>4} {s['disposition']:<18} {s['relative_path']}{reason}")
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        detail = folder_runs.show_run(quire, args.run)
    out.emit(detail.as_dict(), _show_text)
    return 0


def _cancel_text(d: dict[str, Any]) -> str:
    if d["status"] == "cancelled":
        return f"run {d['run_id']} cancelled"
    already = "already requested" if d["already_requested"] else "requested"
    return f"run {d['run_id']}: cancel {already}; the worker running it stops after the source it is on"


def cmd_cancel(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        result = folder_runs.cancel_run(quire, principal_of(args, quire), args.run)
    out.emit(result.as_dict(), _cancel_text)
    return 0


def cmd_revert(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        result = folder_runs.revert_run(quire, principal_of(args, quire), args.run)
    out.emit(result.as_dict(), lambda d: f"run {d['run_id']} reverted; {d['deleting']} item(s) being removed")
    return 0


def cmd_retry(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        result = folder_runs.retry_run(quire, principal_of(args, quire), args.run)
    out.emit(
        result.as_dict(),
        lambda d: (
            f"{d['outcome']}: run {d['run_id']} retries run {d['retry_of']} (job {d['job_id']}); `quire worker` runs it"
        ),
    )
    return 0


def cmd_audit(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        entries = audit.list_entries(quire.db, run_id=args.run, after_id=args.after, limit=limit)
    rows = [e.as_dict() for e in entries]
    more = next_cursor(entries, limit, lambda e: int(e.id))
    out.emit(
        paged("entries", rows, more),
        lambda d: with_more(
            "\n".join(
                f"{e['id']:>6} {e['action']:<36} {e['actor']:<20} run {e['run_id']} attempt {e['attempt']} "
                f"{e['payload'].get('counts', '')}"
                for e in d["entries"]
            )
            or "no audit entries",
            more,
        ),
    )
    return 0
