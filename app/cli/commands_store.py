"""Team store commands: ``store init [URL]`` creates Quire's schema in a PostgreSQL database.

Every other command reaches a team store with ``--store URL`` (or ``QUIRE_STORE``) and refuses a database
that has no schema yet, pointing here; ``init`` is the one command that creates it (the pgvector extension,
the tables, the same named migrations as a data directory's). Running it again on a current store changes
nothing and says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.main import Output, UsageError


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


def cmd_store_init(args: argparse.Namespace, out: Output) -> int:
    from knowledge.store.migrations import applied_migrations, migrate
    from knowledge.store.postgres import PostgresDatabase, is_store_url, redacted

    url = args.url or args.store
    if url is None:
        raise UsageError("give the store's URL: quire store init postgresql://user@host/database")
    if not is_store_url(url):
        raise UsageError(f"store init takes a PostgreSQL URL (postgresql://…), not {redacted(url)!r}")
    db = PostgresDatabase(url)
    try:
        server = db.connect_check()
        existed = db.has_schema()
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
