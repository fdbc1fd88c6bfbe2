"""Folder sync: ``quire sync on|off|status|pending|apply|dismiss|run``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.base import EXIT_CONFLICT, Output
from app.cli.commands_core import opened, person_of
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from knowledge import sync
from knowledge.library import bases


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("sync", parents=[common], help="keep folders in sync with disk")
    ss = p.add_subparsers(dest="sync_command", metavar="SYNC_COMMAND")
    ss.required = True

    q = ss.add_parser("on", parents=[common], help="keep a folder item in sync")
    q.add_argument("base")
    q.add_argument("item", type=int)
    q.add_argument("--mode", choices=("auto", "review"), default="auto", help="review: list changes for approval")
    q.set_defaults(func=cmd_on)

    q = ss.add_parser("off", parents=[common], help="stop syncing a folder (its items stay)")
    q.add_argument("base")
    q.add_argument("item", type=int)
    q.set_defaults(func=cmd_off)

    q = ss.add_parser("status", parents=[common], help="synced folders and their state")
    q.add_argument("base", nargs="?")
    add_paging(q)
    q.set_defaults(func=cmd_status)

    q = ss.add_parser("pending", parents=[common], help="changes a review-mode folder found")
    q.add_argument("base", nargs="?")
    add_paging(q)
    q.set_defaults(func=cmd_pending)

    q = ss.add_parser("apply", parents=[common], help="apply a review-mode folder's pending changes")
    q.add_argument("base")
    q.add_argument("item", type=int)
    q.set_defaults(func=cmd_apply)

    q = ss.add_parser("dismiss", parents=[common], help="dismiss pending changes until the files change again")
    q.add_argument("base")
    q.add_argument("item", type=int)
    q.add_argument("paths", nargs="+", help="relative paths as listed by `quire sync pending`")
    q.set_defaults(func=cmd_dismiss)

    q = ss.add_parser("run", parents=[common], help="reconcile a synced folder now, in this process")
    q.add_argument("base")
    q.add_argument("item", type=int)
    q.set_defaults(func=cmd_run)


def _roots(quire: Any, base_ref: str | None) -> list[sync.SyncRoot]:
    base_id = bases.get_base(quire.db, base_ref).id if base_ref is not None else None
    return sync.list_roots(quire.db, base_id)


def cmd_on(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        root = sync.enable_sync(quire, args.base, args.item, mode=args.mode)
    out.emit(root.as_dict(), f"item {args.item} is kept in sync ({root.mode})")
    return 0


def cmd_off(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        was = sync.disable_sync(quire, args.base, args.item)
    out.emit({"item_id": args.item, "was_synced": was}, f"item {args.item} is no longer kept in sync")
    return 0


def cmd_status(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        base_id = bases.get_base(quire.db, args.base).id if args.base is not None else None
        roots = sync.root_statuses(quire.db, base_id, limit=limit, after_id=args.after)
    more = next_cursor(roots, limit, lambda r: r.root.id)
    out.emit(
        paged("roots", [r.as_dict() for r in roots], more),
        lambda _d: with_more("\n".join(r.line() for r in roots) or "no synced folders", more),
    )
    return 0


def cmd_pending(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        roots = _roots(quire, args.base)
        by_id = {r.id: r.item_id for r in roots}
        found = sync.page_pending(quire, list(by_id), limit=limit, after_id=args.after)
    rows = [{**p, "item_id": by_id[p["root_id"]]} for p in found]
    more = next_cursor(found, limit, lambda p: int(p["id"]))
    out.emit(
        paged("pending", rows, more),
        lambda _d: with_more(
            "\n".join(f"{p['item_id']:>6} {p['kind']:<8} {p['path']}" for p in rows) or "nothing pending", more
        ),
    )
    return 0


def _reconcile(args: argparse.Namespace, out: Output, *, apply_review: bool) -> int:
    with opened(args) as quire:
        with quire.db.read() as conn:
            root = sync.resolve_root(conn, args.base, args.item)
        outcome = sync.reconcile(quire, root.id, quire.db.write, apply_review=apply_review, actor=person_of(quire))
    data = outcome.as_dict()
    if outcome.stood_down:
        out.emit(data, f"stood down: {outcome.stood_down}")
        return EXIT_CONFLICT
    counts = ", ".join(f"{v} {k}" for k, v in outcome.counts.items() if v) or "no changes"
    out.emit(data, f"generation {outcome.generation}: {counts}; applied {outcome.applied}, pending {outcome.pending}")
    return 0


def cmd_apply(args: argparse.Namespace, out: Output) -> int:
    return _reconcile(args, out, apply_review=True)


def cmd_run(args: argparse.Namespace, out: Output) -> int:
    return _reconcile(args, out, apply_review=False)


def cmd_dismiss(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        with quire.db.read() as conn:
            root = sync.resolve_root(conn, args.base, args.item)
        count = sync.dismiss(quire, root.id, args.paths, person_of(quire))
    out.emit({"dismissed": count}, json.dumps({"dismissed": count}) if args.json else f"{count} change(s) dismissed")
    return 0
