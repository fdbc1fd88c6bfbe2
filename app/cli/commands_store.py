"""Team store commands: ``store init [URL]`` creates Quire's schema in a PostgreSQL database.

Every other command reaches a team store with ``--store URL`` (or ``QUIRE_STORE``) and refuses a database
that has no schema yet, pointing here; ``init`` is the one command that creates it (the pgvector extension,
the tables, the same named migrations as a data directory's). Running it again on a current store changes
nothing and says so. ``upgrade`` is the one command that migrates a store holding bases to this Quire's
schema; ``status`` reports a store without migrating it; ``grant`` gives a person's role its rights.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.base import Output, UsageError


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("store", parents=[common], help="a team store (PostgreSQL + pgvector): `store init URL`")
    actions = p.add_subparsers(dest="store_action", metavar="ACTION", required=True)
    q = actions.add_parser("init", parents=[common], help="create Quire's schema in a PostgreSQL database")
    q.add_argument("url", nargs="?", metavar="URL", help="postgresql://user:password@host/database (default: --store)")
    q.set_defaults(func=cmd_store_init)
    m = actions.add_parser(
        "migrate", parents=[common], help="copy a data directory's bases, vectors included, into a team store"
    )
    m.add_argument("directory", type=Path, metavar="DIR", help="the data directory to copy from")
    m.add_argument("url", nargs="?", metavar="URL", help="the team store (default: --store)")
    m.set_defaults(func=cmd_store_migrate)
    u = actions.add_parser("upgrade", parents=[common], help="bring a team store in use up to this Quire's schema")
    u.add_argument("url", nargs="?", metavar="URL", help="the team store (default: --store)")
    u.set_defaults(func=cmd_store_upgrade)
    s = actions.add_parser(
        "status", parents=[common], help="schema version, live workers per machine, queue depth, jobs waiting"
    )
    s.set_defaults(func=cmd_store_status)
    g = actions.add_parser(
        "grant", parents=[common], help="give a database role reader, writer or admin rights, now and on later bases"
    )
    g.add_argument("role", metavar="ROLE", help="an existing PostgreSQL login role (a person)")
    g.add_argument("level", choices=("reader", "writer", "admin"), metavar="reader|writer|admin")
    g.set_defaults(func=cmd_store_grant)


def cmd_store_init(args: argparse.Namespace, out: Output) -> int:
    from knowledge.store.migrations import MIGRATIONS, applied_migrations, migrate
    from knowledge.store.postgres import PostgresDatabase, is_store_url, redacted
    from knowledge.store.schema_version import refuse_older

    url = args.url or args.store
    if url is None:
        raise UsageError("give the store's URL: quire store init postgresql://user@host/database")
    if not is_store_url(url):
        raise UsageError(f"store init takes a PostgreSQL URL (postgresql://…), not {redacted(url)!r}")
    db = PostgresDatabase(url)
    try:
        server = db.connect_check()
        existed = db.has_schema()
        if existed:
            refuse_older(db, [m.name for m in MIGRATIONS])  # a store in use is upgraded by `store upgrade`
        applied = migrate(db)
        with db.read() as conn:
            migrations = applied_migrations(conn)
    finally:
        db.dispose()
    report = {
        "store": redacted(url),
        "postgresql": server,
        "created": not existed,
        "applied": applied,
        "schema": migrations[-1] if migrations else None,
    }
    out.emit(report, _init_text)
    return 0


def cmd_store_upgrade(args: argparse.Namespace, out: Output) -> int:
    from knowledge.errors import NotFound
    from knowledge.store.migrations import applied_migrations, migrate
    from knowledge.store.postgres import PostgresDatabase, is_store_url, redacted

    url = args.url or args.store
    if url is None or not is_store_url(url):
        raise UsageError("give the team store's URL: quire store upgrade postgresql://user@host/database")
    db = PostgresDatabase(url)
    try:
        db.connect_check()
        if not db.has_schema():
            raise NotFound(f"{redacted(url)} is not a Quire team store yet; create it with `quire store init URL`")
        applied = migrate(db)
        with db.read() as conn:
            schema = applied_migrations(conn)[-1]
    finally:
        db.dispose()
    out.emit(
        {"store": redacted(url), "applied": applied, "schema": schema},
        lambda r: (
            f"{r['store']} upgraded to {r['schema']} ({len(r['applied'])} migration(s) applied)"
            if r["applied"]
            else f"{r['store']} is at {r['schema']} already; nothing to do"
        ),
    )
    return 0


def cmd_store_migrate(args: argparse.Namespace, out: Output) -> int:
    from knowledge.compose import open_quire, open_team_quire
    from knowledge.portable import move_in
    from knowledge.store.postgres import is_store_url, redacted

    url = args.url or args.store
    if url is None or not is_store_url(url):
        raise UsageError("give the team store's URL: quire store migrate DIR postgresql://user@host/database")
    if not (args.directory / "quire.sqlite3").is_file():
        raise UsageError(f"{args.directory.name or args.directory} is not a Quire data directory (no quire.sqlite3)")
    source = open_quire(args.directory)
    try:
        target = open_team_quire(url, data_dir=Path(args.data_dir), queue_url=args.queue, create=False)
        try:
            moved = move_in(source, target)
        finally:
            target.close()
    finally:
        source.close()
    out.emit({"store": redacted(url), "bases": [m.as_dict() for m in moved]}, _migrate_text)
    return 0


def cmd_store_status(args: argparse.Namespace, out: Output) -> int:
    from knowledge.store.status import store_status

    if args.store:
        from knowledge.errors import NotFound
        from knowledge.store.postgres import PostgresDatabase, redacted

        db = PostgresDatabase(args.store)
        try:
            db.connect_check()
            if not db.has_schema():
                raise NotFound(
                    f"{redacted(args.store)} is not a Quire team store yet; create it with `quire store init`"
                )
            report = {"store": redacted(args.store), "engine": "postgresql", **store_status(db)}
        finally:
            db.dispose()
    else:
        report = {"store": str(args.data_dir), "engine": "sqlite", **_data_dir_status(Path(args.data_dir))}
    out.emit(report, _status_text)
    return 0


def cmd_store_grant(args: argparse.Namespace, out: Output) -> int:
    from knowledge.errors import NotFound
    from knowledge.store.pg_grants import check_role_name, grant
    from knowledge.store.postgres import PostgresDatabase, redacted

    if not args.store:
        raise UsageError("store grant works on a team store: give it with --store URL (or QUIRE_STORE)")
    check_role_name(args.role)
    db = PostgresDatabase(args.store)
    try:
        db.connect_check()
        if not db.has_schema():
            raise NotFound(f"{redacted(args.store)} is not a Quire team store yet; create it with `quire store init`")
        report = {"store": redacted(args.store), **grant(db, args.role, args.level)}
    finally:
        db.dispose()
    out.emit(report, _grant_text)
    return 0


def _grant_text(r: dict[str, Any]) -> str:
    text = f"{r['role']} is a {r['level']} of {r['store']}, on today's tables and on bases made later"
    if r["not_covered"]:
        text += f"; bases made later by {', '.join(r['not_covered'])} are not covered: grant again as a superuser"
    return text


def _data_dir_status(data_dir: Path) -> dict[str, Any]:
    """A data directory's status, read without migrating it (a newer Quire's file is reported, not refused)."""
    from knowledge.store.database import DB_FILENAME, Database
    from knowledge.store.status import store_status

    if not (data_dir / DB_FILENAME).is_file():
        from app.cli.commands_core import open_data_dir

        with open_data_dir(data_dir) as quire:  # a new directory is made, as every command makes it
            return store_status(quire.db)
    db = Database.in_dir(data_dir)
    try:
        return store_status(db)
    finally:
        db.dispose()


def _status_text(r: dict[str, Any]) -> str:
    import time

    schema = r["schema"]
    if schema["newer"]:
        state = f"upgraded by a newer Quire ({schema['newer'][-1]}): upgrade Quire"
    elif schema["pending"]:
        state = f"older than this Quire ({len(schema['pending'])} migration(s) to apply)"
    else:
        state = "current"
    now = time.time()
    workers = [
        f"  {w['host']}: {w['workers']} worker(s), last heartbeat {max(0.0, now - w['last_heartbeat']):.0f} s ago"
        for w in r["workers"]
    ]
    waiting = [
        f"  {w['host']}: {w['jobs']} job(s)" + ("" if w["worker_running"] else " (no worker running there)")
        for w in r["waiting"]
    ]
    return "\n".join(
        [
            f"store: {r['store']} ({'team store' if r['engine'] == 'postgresql' else 'data directory'})",
            f"schema: {schema['last'] or 'none'} ({state})",
            "workers:" + ("" if workers else " none running"),
            *workers,
            f"queue: {r['queue']['pending']} pending, {r['queue']['running']} running",
            "waiting for a machine:" + ("" if waiting else " none"),
            *waiting,
        ]
    )


def _migrate_text(r: dict[str, Any]) -> str:
    lines = [
        f"{b['name']}: copied ({b['items']} items, {b['chunks']} chunks, {b['blobs']} owned copies)"
        if b["outcome"] == "copied"
        else f"{b['name']}: already in the store, left alone"
        for b in r["bases"]
    ]
    return "\n".join(lines) or "no bases to copy"


def _init_text(r: dict[str, Any]) -> str:
    if r["created"]:
        return f"created Quire's schema in {r['store']} (PostgreSQL {r['postgresql']}, through {r['schema']})"
    if r["applied"]:
        return f"{r['store']} brought up to {r['schema']} ({len(r['applied'])} migration(s) applied)"
    return f"{r['store']} is a Quire team store already, at {r['schema']}; nothing to do"
